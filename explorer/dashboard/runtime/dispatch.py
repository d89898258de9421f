"""Handing results from worker threads to a session's UI thread: in a served session a callback is
scheduled on the Bokeh document's event loop (where Bokeh models may be changed safely); in scripts and
tests it is simply called."""
from __future__ import annotations

import threading
from typing import Callable

Dispatch = Callable[[Callable[[], None]], None]


def call_now(callback: Callable[[], None]) -> None:
    """The dispatcher outside a server: run the callback in the calling thread."""
    callback()


def call_later(dispatch: Dispatch, seconds: float, callback: Callable[[], None]) -> None:
    """Hand `callback` to `dispatch` after `seconds`, from a timer thread (Bokeh's add_next_tick_callback,
    which a served dispatcher uses, is the thread-safe way into a document). With `call_now` (scripts,
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
    """A dispatcher that runs callbacks on `doc`'s event loop with the document lock held.

    Panel's own pattern (reactive._apply_update): make `doc` current, then pn.state.execute with
    schedule=True, which uses doc.add_next_tick_callback when the document has a live session and
    runs the callback directly otherwise (a notebook comm)."""
    import panel as pn
    from panel.io.state import set_curdoc

    from ..ui.internals import mend_panel_write_queue

    mend_panel_write_queue()  # patches can otherwise stay unsent under load (see there)

    def dispatch(callback):
        def run():
            # unlocked(): every model change the callback makes goes out as ONE patch message
            # instead of one per property (a live step changes about ten).
            with pn.io.unlocked():
                callback()
        with set_curdoc(doc):
            pn.state.execute(run, schedule=True)

    return dispatch
