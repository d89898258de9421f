"""A page closed while its session is still pushing updates (a tab closed mid-run): the server logs no
traceback. Panel wrote a patch's frames one after another, and when the page went away between two of
them the frames already written were dropped unawaited, each logging "Task exception was never
retrieved" with a WebSocketClosedError (ui/internals.mend_panel_socket_writes).

How many tries: each is a page of its own, and a page's load is most of the test's cost. With the mending
undone, on a busy 2-core machine, 15 of 18 tries logged the traceback (a try misses when no patch is on
its way as the page goes): three tries miss that regression in about one run in 200 ((3/18)^3), and the
next run catches it; the six this test used to open cost twice as much to make that one run in 30000."""
from __future__ import annotations

import gc
import logging
import threading

import numpy as np

from tests.support.browser import open_page, wait_until
from tests.support.dashboard import explore

PAGES = 3  # the close must land between two frames of one message: each page is one try (see above)


def push_updates(state, stop: threading.Event) -> None:
    """Update the page's heatmap (a patch with binary buffers: several frames) as fast as the session's
    loop takes them, as a streaming run does, until `stop`."""
    import panel as pn

    def redraw():
        source = pn.state.curdoc.select_one({"name": "trajectory-cells"})
        if source is not None:
            source.data = {k: np.asarray(v).copy() for k, v in source.data.items()}

    while not stop.is_set():
        state.dispatch(redraw)
        stop.wait(0.002)


def test_closing_a_page_mid_update_logs_no_traceback(served, browser, caplog):
    url, states = served
    caplog.set_level(logging.WARNING)
    for _ in range(PAGES):
        page, _problems = open_page(browser, f"{url}?length=24&steps=24")
        wait_until(lambda: states and explore(states[-1]).trajectory is not None and not explore(states[-1]).running)
        stop = threading.Event()
        pusher = threading.Thread(target=push_updates, args=(states[-1], stop), daemon=True)
        pusher.start()
        page.wait_for_timeout(300)
        page.close()  # while the updates keep coming
        threading.Event().wait(0.5)
        stop.set()
        pusher.join(timeout=10)
    gc.collect()  # an unawaited failed write is reported when it is collected
    threading.Event().wait(0.5)
    gc.collect()
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info or "never retrieved" in r.getMessage()]
    assert tracebacks == []
