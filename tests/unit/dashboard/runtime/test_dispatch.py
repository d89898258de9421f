"""The dispatcher of a page built off its loop's thread (runtime/dispatch.document_dispatcher). Callbacks
handed in while Panel writes a held document, in a served page: tests/browser/test_dispatch.py."""
from __future__ import annotations

import threading

from explorer.dashboard.runtime.dispatch import document_dispatcher
from tests.support.dashboard import wait_for


def test_a_page_built_off_its_loops_thread_still_gets_a_working_dispatcher():
    """document_dispatcher wakes the loop it was made on; made on a thread with no running loop (a page
    built in a thread pool) it must not wait on a loop nobody runs: it falls back to Panel's
    add_next_tick_callback path, which runs the callback at once for a document with no session."""
    from bokeh.document import Document

    made, ran = {}, []
    thread = threading.Thread(target=lambda: made.update(dispatch=document_dispatcher(Document())))
    thread.start()
    thread.join()
    made["dispatch"](lambda: ran.append("ran"))
    wait_for(lambda: ran == ["ran"], timeout=5, message="the callback never ran")
