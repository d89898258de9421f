"""Background work for the dashboard: one worker thread per kind of task, newest request wins.

The UI thread must never run the model (a 32-step run takes about a second on a CPU), so runs,
sweeps and model loads happen on daemon threads. Results come back through a `dispatch` function
that runs a callback on the UI side: in a served session it schedules the callback on the Bokeh
document's event loop (where Bokeh models may be changed safely); in scripts and tests it simply
calls it. Issue 7 (many sessions, one device) plugs its shared device queue in at `Worker.submit`.
"""
from __future__ import annotations

import threading
from typing import Callable

Dispatch = Callable[[Callable[[], None]], None]


def call_now(callback: Callable[[], None]) -> None:
    """The dispatcher outside a server: run the callback in the calling thread."""
    callback()


def document_dispatcher(doc) -> Dispatch:
    """A dispatcher that runs callbacks on `doc`'s event loop with the document lock held.

    Panel's own pattern (reactive._apply_update): make `doc` current, then pn.state.execute with
    schedule=True, which uses doc.add_next_tick_callback when the document has a live session and
    runs the callback directly otherwise (a notebook comm)."""
    import panel as pn
    from panel.io.state import set_curdoc

    def dispatch(callback):
        def run():
            # unlocked(): every model change the callback makes goes out as ONE patch message
            # instead of one per property (a live step changes about ten).
            with pn.io.unlocked():
                callback()
        with set_curdoc(doc):
            pn.state.execute(run, schedule=True)

    return dispatch


class Job:
    """A handle on one submitted task: `cancelled` is checked by the task between steps."""

    def __init__(self, name: str):
        self.name = name
        self._cancel = threading.Event()
        self.done = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()


class Worker:
    """Runs one task at a time; submitting a new task cancels the one before it.

    Tasks are serialised by a lock so a superseded run has left the model before the next starts
    (it notices its cancel flag at its next step, within one model call)."""

    def __init__(self, name: str):
        self.name = name
        self.current: Job | None = None
        self._lock = threading.Lock()

    def submit(self, task: Callable[[Job], None], *, wait: bool = False) -> Job:
        """Cancel the running task, then run `task(job)`: on a daemon thread, or here if `wait`."""
        self.cancel()
        job = Job(self.name)
        self.current = job
        if wait:
            self._run(task, job)
        else:
            threading.Thread(target=self._run, args=(task, job), name=f"dashboard-{self.name}",
                             daemon=True).start()
        return job

    def _run(self, task, job: Job) -> None:
        with self._lock:
            try:
                if not job.cancelled:
                    task(job)
            finally:
                job.done.set()

    def cancel(self) -> None:
        if self.current is not None:
            self.current.cancel()

    def is_current(self, job: Job) -> bool:
        return job is self.current and not job.cancelled
