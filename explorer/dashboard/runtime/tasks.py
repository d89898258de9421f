"""Background work of a session: a Job handle (cancel, done) and a Worker that runs one task at a time,
the newest request winning. Every Worker is bound to a device: its tasks take turns there with the
sampler runs of every session (queue.DeviceTurns) and run at the device queue's precision. A Worker
given a session's share (limits.SessionShare) counts its jobs against that session's limit of queued
work, and runs its tasks one at a time with the session's other background tasks."""
from __future__ import annotations

import logging
import threading
from contextlib import nullcontext
from typing import Callable

import param

from .limits import LimitExceeded, SessionShare
from .queue import DeviceTurns, SampleRequest, device_queue, release_free_memory

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

    @property
    def cancel_requested(self) -> bool:
        """Whether the job was cancelled, from any thread (unlike `cancelled`, never lends the device)."""
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
    a sampler run to the device's queue instead of running a task here.

    `share` (a session's limits.SessionShare): each new job is admitted against the session's limit
    of jobs queued or running (LimitExceeded, nothing cancelled, when it has its share going), and
    the tasks run one at a time with the session's other Workers' tasks: a session holds the working
    memory of one sweep at a time, not one per tab."""

    def __init__(self, name: str, device, share: SessionShare | None = None):
        if device is None:  # unbound work would skip the runs' turns and the precision, competing for the cores
            raise ValueError(f"Worker {name!r} needs a device: its tasks take turns there with the runs")
        self.name = name
        self.device = device
        self.share = share
        self.current: Job | None = None
        self._lock = threading.Lock()

    def new_job(self) -> Job:
        """The next job: admitted against the session's share (LimitExceeded before anything is cancelled),
        then the current one cancelled: the new one replaces it."""
        job = Job(self.name)
        if self.share is not None:
            self.share.admit(job, replacing=self.current)
        # the new job is current before the old one is cancelled: cancelling runs its hooks (a queued
        # run is dropped and says "stopped"), and a hook that asked whether the old job was still
        # current in between was told yes, so the page said "stopped" over the run just asked for
        old, self.current = self.current, job
        if old is not None:
            old.cancel()
        return job

    def submit(self, task: Callable[[Job], None], *, wait: bool = False) -> Job:
        """Cancel the running task, then run `task(job)`: on a daemon thread, or here if `wait`.
        Raises LimitExceeded (the running task left alone) when the session has its share of jobs going."""
        return self.start(self.new_job(), task, wait=wait)

    def start(self, job: Job, task: Callable[[Job], None], *, wait: bool = False) -> Job:
        """Run `task(job)` for a job made by new_job (submit's second half)."""
        if wait:
            self._run(task, job)
        else:
            threading.Thread(target=self._run, args=(task, job), name=f"dashboard-{self.name}",
                             daemon=True).start()
        return job

    def enqueue(self, make_request: Callable[[Job], SampleRequest], *, wait: bool = False,
                job: Job | None = None) -> Job:
        """Cancel the current job, then queue `make_request(job)` on the device's shared queue;
        with `wait`, return once it has finished (done, failed or stopped). LimitExceeded as submit.
        job: one new_job already made (and admitted) for it."""
        job = job or self.new_job()
        device_queue(self.device).submit(make_request(job))
        if wait:
            self.wait(job)
        return job

    def wait(self, job: Job) -> None:
        """Return once `job`, a run enqueued here, has finished (done, failed or stopped)."""
        if device_queue(self.device).on_worker_thread():
            raise RuntimeError("start_run(wait=True) from the device worker itself would wait forever")
        job.done.wait()

    def _run(self, task, job: Job) -> None:
        ran = False
        with self._lock:
            try:
                with self.share.turn if self.share is not None else nullcontext():  # one task of the session at a time
                    if not job.cancelled:
                        ran = True
                        self._run_on_device(task, job)
            finally:
                job.done.set()
        if ran:
            # A sweep's working memory (its rows' logits under way) is freed now, but glibc keeps it in
            # the arena of this thread, and the next task's thread may use another: without a trim, RSS
            # tracked the largest sweep every arena had seen.
            release_free_memory()

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

    def __init__(self, name: str, device, dispatch: Callable, share: SessionShare | None = None, **params):
        super().__init__(**params)
        self.label = name
        self.worker = Worker(name, device, share)
        self.dispatch = dispatch

    def start(self, work: Callable, *, status: str = "starting …", wait: bool = False,
              admitted: Callable[[], None] | None = None) -> Job | None:
        """Run `work` (superseding the task's work in progress); None, with the reason as `error` and
        the work in progress left alone, when the session has its share of jobs going (limits.py).
        admitted(): called once the work is let in, before it starts (e.g. to clear the old result)."""
        try:
            job = self.worker.new_job()
        except LimitExceeded as e:
            self.error = str(e)
            return None
        if admitted is not None:
            admitted()
        self.param.update(progress=0, running=True, error="", status=status)
        return self.worker.start(job, lambda job: self._run(job, work), wait=wait)

    def _run(self, job: Job, work: Callable) -> None:
        def report(done: int, total: int, text: str | None = None) -> None:
            self.dispatch(lambda: self._progress(job, done, total, text))

        try:
            result = work(job, report)
        except TaskCancelled as e:
            partial, status = e.partial, e.status
            return self.dispatch(lambda: self._finish(job, partial, status, ""))
        except Exception as e:  # a notice beside the task's view, never a traceback in the page
            if isinstance(e, ValueError):
                # what is missing or wrong, in words (no held-out text on this server): one line per
                # page that asks; its traceback would say nothing more, on every page
                log.warning("%s failed: %s", self.label, e)
            else:  # a bug: the log keeps its traceback
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
        """Show a result computed elsewhere (a cache hit), cancelling any work in progress. The result
        already shown is not announced again: its views would redraw for nothing, and a pane that
        builds new Bokeh models per object must not do that twice in one UI callback (see
        InspectState._validation_arrived)."""
        self._detach()
        ended = dict(progress=100, running=False, status=status, error="")
        if result is not self.result:
            ended["result"] = result
        self.param.update(**ended)

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
