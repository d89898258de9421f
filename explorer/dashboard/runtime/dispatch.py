"""Handing results from worker threads to a session's UI thread: in a served session a callback is
scheduled on the Bokeh document's event loop (where Bokeh models may be changed safely); in scripts and
tests it is simply called."""
from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Callable

from ..ui.internals import one_graph_walk

log = logging.getLogger(__name__)

Dispatch = Callable[[Callable[[], None]], None]


def call_now(callback: Callable[[], None]) -> None:
    """The dispatcher outside a server: run the callback in the calling thread."""
    callback()


def call_later(dispatch: Dispatch, seconds: float, callback: Callable[[], None]) -> None:
    """Hand `callback` to `dispatch` after `seconds`, from a timer thread (a served dispatcher takes callbacks
    from any thread: document_dispatcher). With `call_now` (scripts,
    tests) it runs at once in the calling thread: there is no page whose messages a wait could merge,
    and a timer thread would run it beside the thread that is still working."""
    if dispatch is call_now:
        callback()
        return
    timer = threading.Timer(seconds, dispatch, args=(callback,))
    timer.daemon = True  # a pending wait never holds the server's exit
    timer.start()


class Later:
    """One pending delayed callback at a time through `dispatch` (call_later): scheduling another
    supersedes it, and cancel() drops it; a superseded or cancelled one does nothing when its timer
    fires. Used for the URL rewrite once the knobs rest, and for "waiting for the device"."""

    def __init__(self, dispatch: Dispatch):
        self.dispatch, self._latest = dispatch, None

    def schedule(self, seconds: float, callback: Callable[[], None]) -> None:
        token = self._latest = object()
        call_later(self.dispatch, seconds, lambda: self._run(token, callback))

    def cancel(self) -> None:
        self._latest = None

    def _run(self, token, callback) -> None:
        if token is self._latest:
            self._latest = None
            callback()


def document_dispatcher(doc) -> Dispatch:
    """A dispatcher that runs callbacks on `doc`'s event loop with the document lock held, one after
    another in the order they were handed in (call it on that loop: the page is built there).

    Why not doc.add_next_tick_callback (Panel's pattern, used here before): from another thread it
    registers the callback through a document event, and while the loop's thread holds the document
    (pn.io.unlocked, around every callback here and Panel's own updates) that event is held back and
    put behind the events other threads add meanwhile, or dropped if one lands as Panel takes the held
    list. Seen: Compare's "1 done" ran after its "done: 2 of 2", and its page kept "sampling … 1 done"
    (2 of 5 page loads). Here the callbacks wait in this dispatcher's own FIFO queue, and the loop is
    woken with IOLoop.add_callback (thread-safe, never held) to drain it under the document's lock."""
    from tornado.ioloop import IOLoop

    from ..ui.internals import mend_panel_socket_writes, mend_panel_write_queue

    mend_panel_write_queue()  # patches can otherwise stay unsent under load (see there)
    mend_panel_socket_writes()  # a page closed mid-message otherwise logs a traceback (see there)
    loop = IOLoop.current(instance=False)  # the loop running here, the session's; None off it
    if loop is None:
        return _next_tick_dispatcher(doc)
    pending: deque = deque()

    async def drain_locked(_doc) -> None:
        run_in_order(doc, pending)

    async def drain() -> None:
        context = doc.session_context
        if pending and context is not None and not context.destroyed:
            await context.with_locked_document(drain_locked)

    def dispatch(callback):
        pending.append(callback)
        loop.add_callback(drain)

    return dispatch


def _next_tick_dispatcher(doc) -> Dispatch:
    """Panel's pattern, for a page built off its loop's thread (no loop to wake there): each callback
    through doc.add_next_tick_callback, which keeps their order only while the document is not held."""
    import panel as pn
    from panel.io.state import set_curdoc

    def dispatch(callback):
        def run():
            with pn.io.unlocked():
                callback()
        with set_curdoc(doc):
            pn.state.execute(run, schedule=True)

    return dispatch


# The end-of-callback work of the callback run_in_order is running on this thread: {key: callback}, or None.
_at_end = threading.local()


def at_end(key, callback: Callable[[], None]) -> bool:
    """Inside a callback run_in_order runs (a dispatched one, on the document's loop): run `callback` once
    the callback has finished, in the same patch message, once however often `key` is asked for meanwhile.
    Returns False elsewhere (a widget's own change, a script, another thread): the caller works at once.

    Why: a run's start and end each change several things one view shows (the header's status, its run
    number and which tabs are settled): drawn at each change, the header was redrawn six times a run, a
    third of the dashboard's own work per run, and its settled tabs, read in a callback of their own,
    cost the page two more messages."""
    hooks = getattr(_at_end, "hooks", None)
    if hooks is None:
        return False
    hooks.setdefault(key, callback)
    return True


def _run_with_end_hooks(callback: Callable[[], None]) -> None:
    """`callback`, then the at_end work it asked for (which may ask for more), in order."""
    _at_end.hooks = hooks = {}
    try:
        callback()
        while hooks:
            hooks.pop(next(iter(hooks)))()
    finally:
        _at_end.hooks = None


def run_in_order(doc, pending: deque) -> None:
    """Run the queued callbacks in order, `doc` current (Panel's and Bokeh's), each inside
    pn.io.unlocked(): every model change it makes goes out as ONE patch message instead of one per
    property (a live step changes about ten), the work it left for its end (at_end) included. A callback
    that raises is logged; the rest still run."""
    import panel as pn
    from bokeh.io.doc import patch_curdoc
    from panel.io.state import set_curdoc

    with patch_curdoc(doc), set_curdoc(doc):
        while pending:
            callback = pending.popleft()
            try:
                with pn.io.unlocked(), one_graph_walk(doc):
                    _run_with_end_hooks(callback)
            except Exception:
                log.exception("a dashboard update failed")
