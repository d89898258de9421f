"""Background work of a session: a Job handle (cancel, done) and a Worker that runs one task at a time,
the newest request winning. Every Worker is bound to a device: its tasks take turns there with the
sampler runs of every session (queue.DeviceTurns) and run at the device queue's precision."""
from __future__ import annotations

import logging
import threading
from typing import Callable

import param

from .queue import DeviceTurns, SampleRequest, device_queue

log = logging.getLogger(__name__)


class Job:
    """A handle on one submitted task: `cancelled` is checked by the task between steps.

    For a Worker bound to a device, checking `cancelled` on the task's own thread is also where the
    task lends the device to waiting runs (DeviceTurns.pause)."""

    def __init__(self, name: str):
        self.name = name
        self._cancel = threading.Event()
        self.done = threading.Event()
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._turns: DeviceTurns | None = None
        self._thread: int | None = None

    @property
    def cancelled(self) -> bool:
        if self._turns is not None and threading.get_ident() == self._thread:
            self._turns.pause()
        return self._cancel.is_set()

    def cancel(self) -> None:
        with self._lock:
            if self._cancel.is_set():
                return
            self._cancel.set()
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Call `hook` when the job is cancelled (at once if it already is)."""
        with self._lock:
            if not self._cancel.is_set():
                self._hooks.append(hook)
                return
        hook()


class Worker:
    """Runs one task at a time; submitting a new task cancels the one before it.

    Tasks are serialised by a lock so a superseded run has left the model before the next starts
    (it notices its cancel flag at its next step, within one model call). With `device`, tasks take
    turns on that device with the sampler runs of every session (module docstring); `enqueue` sends
    a sampler run to the device's queue instead of running a task here."""

    def __init__(self, name: str, device):
        if device is None:  # unbound work would skip the runs' turns and the precision (issue 13)
            raise ValueError(f"Worker {name!r} needs a device: its tasks take turns there with the runs")
        self.name = name
        self.device = device
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

    def enqueue(self, make_request: Callable[[Job], SampleRequest], *, wait: bool = False) -> Job:
        """Cancel the current job, then queue `make_request(job)` on the device's shared queue;
        with `wait`, return once it has finished (done, failed or stopped)."""
        self.cancel()
        job = Job(self.name)
        self.current = job
        queue = device_queue(self.device)
        queue.submit(make_request(job))
        if wait:
            if queue.on_worker_thread():
                raise RuntimeError("start_run(wait=True) from the device worker itself would wait forever")
            job.done.wait()
        return job

    def _run(self, task, job: Job) -> None:
        with self._lock:
            try:
                if not job.cancelled:
                    self._run_on_device(task, job)
            finally:
                job.done.set()

    def _run_on_device(self, task, job: Job) -> None:
        queue = device_queue(self.device)
        turns = queue.turns
        with turns.turn("background"), queue.autocast():  # the device's precision, as its runs
            job._turns, job._thread = turns, threading.get_ident()
            try:
                task(job)
            finally:
                job._turns = None

    def cancel(self) -> None:
        if self.current is not None:
            self.current.cancel()

    def is_current(self, job: Job) -> bool:
        return job is self.current and not job.cancelled




class TaskCancelled(Exception):
    """Raised by a Task's work when it stopped early; `partial` is what it finished (or None)."""

    def __init__(self, partial=None, status: str = "cancelled"):
        super().__init__(status)
        self.partial, self.status = partial, status


class Task(param.Parameterized):
    """One kind of background work of a session, with what its views show: progress, status, a
    readable error, the result, running; newest request wins (a new start cancels the one before).

    `work(job, report)` runs on a Worker bound to `device`, so it takes turns with every session's
    runs and runs at the queue's precision; it returns the result, calls report(done, total[, text])
    for progress, checks `job.cancelled` between chunks (where it also lends the device to waiting
    runs) and raises TaskCancelled(partial) when it stops early. Every parameter is set on the UI
    thread, through `dispatch`."""

    progress = param.Integer(0, bounds=(0, 100))
    status = param.String("")
    error = param.String("", doc="Why the last start failed ('' = it did not)")
    result = param.Parameter(default=None)
    running = param.Boolean(False)

    def __init__(self, name: str, device, dispatch: Callable, **params):
        super().__init__(**params)
        self.label = name
        self.worker = Worker(name, device)
        self.dispatch = dispatch

    def start(self, work: Callable, *, status: str = "starting …", wait: bool = False) -> Job:
        self.param.update(progress=0, running=True, error="", status=status)
        return self.worker.submit(lambda job: self._run(job, work), wait=wait)

    def _run(self, job: Job, work: Callable) -> None:
        def report(done: int, total: int, text: str | None = None) -> None:
            self.dispatch(lambda: self._progress(job, done, total, text))

        try:
            result = work(job, report)
        except TaskCancelled as e:
            partial, status = e.partial, e.status
            return self.dispatch(lambda: self._finish(job, partial, status, ""))
        except Exception as e:  # a notice beside the task's view, never a traceback; the log has it
            log.exception("%s failed", self.label)
            message = f"{self.label} failed: {e}"  # built now: Python unbinds `e` after the block
            return self.dispatch(lambda: self._finish(job, None, "", message))
        status = self.done_status(result)
        self.dispatch(lambda: self._finish(job, result, status, ""))

    def done_status(self, result) -> str:
        """The status shown when the work finished (override to say more); starts with 'done'."""
        return "done"

    def _progress(self, job: Job, done: int, total: int, text: str | None) -> None:
        if self.worker.is_current(job):
            self.param.update(progress=int(100 * done / max(total, 1)),
                              status=text if text is not None else f"{done} of {total}")

    def _finish(self, job: Job, result, status: str, error: str) -> None:
        if job is not self.worker.current:
            return  # superseded: the newer job reports for itself
        ended = {"running": False, "status": status}
        if error:  # start() cleared the error; one set since (a knob the next run cannot take) stays
            ended["error"] = error
        if result is not None:  # one update: no watcher sees the task ended without its result
            ended.update(result=result, progress=100 if status.startswith("done") else self.progress)
        self.param.update(**ended)

    def show(self, result, status: str) -> None:
        """Show a result computed elsewhere (a cache hit), cancelling any work in progress."""
        self._detach()
        self.param.update(result=result, progress=100, running=False, status=status, error="")

    def cancel(self, status: str = "cancelled") -> None:
        if self.running:
            self.worker.cancel()
            self.param.update(running=False, status=status)

    def close(self) -> None:
        """The session is gone: stop the work and drop what it still hands in (_detach). A late result
        would run the views' watchers of a closed session, whose model is already let go of."""
        was_running = self.running
        self._detach()
        if was_running:  # an idle task's views are left alone: nobody is there to see a change
            self.param.update(running=False, status="closed")

    def clear(self) -> None:
        """Forget the result (a model change), and the job: see _detach."""
        self._detach()
        self.param.update(result=None, progress=0, status="", error="", running=False)

    def _detach(self) -> None:
        """Cancel the current job and forget it: a result it still hands in (its work may finish
        before it looks at its cancel flag) must not replace the one shown or cleared now."""
        self.worker.cancel()
        self.worker.current = None
