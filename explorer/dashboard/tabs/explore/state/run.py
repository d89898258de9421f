"""Explore's run: the session's knobs sampled on the device's shared queue, streamed row by row into
`frames` on the UI thread, and the finished `trajectory`.

Runs go through the device's shared queue (runtime/queue.py), batched with other sessions' compatible
runs; each session still gets exactly its solo result (at the default fp32). The sampler thread only
queues steps (`_push`); the UI thread adds them to the frames and ticks the views (`_flush`).
"""
from __future__ import annotations

import os
import random
import threading
import time

import param

from ....frames import Frames, glyph_table
from ....runtime.dispatch import Later, call_later
from ....runtime.limits import run_bytes, run_calls
from ....runtime.queue import SampleRequest
from ....runtime.tasks import Worker
from ....session import run_plan
from ...base import TabState

# A live run is shown at most this often (its first rows and its end at once): every view redraws on
# the same tick, so the page gets one message per tick. Bokeh lays out and repaints the page after
# every message; one per step per view kept Chromium busy ~1.5 s of a 32-step run on a 2-core CPU, on the cores
# the sampler needs (benchmarks/bench_dashboard.py).
LIVE_INTERVAL = 0.25
# A run's start canvas waits up to this long for its first sampled row, so the page gets the two (and the
# header's "sampling ..." line) in one message instead of three; a first step slower than this (a big
# model) shows the start canvas first. "waiting for the device" is said only of a run not begun by then.
START_GRACE = 0.15
# Scrubbing: the sidebar's sliders send their value while they are dragged, not only on release, and a
# knob change made while a run is on its way waits for that run to finish instead of superseding it; the
# newest knobs then run. Runs superseded at every move of a drag would never finish while the handle moves;
# this way the page shows finished runs one after another, each at the knobs of its start. On by default
# on a GPU, where a run is fast enough to follow a hand (MDLM_EXPLORER_SCRUB=on|off|auto, serve --scrub).
SCRUB_ENV = "MDLM_EXPLORER_SCRUB"
SCRUB_CHOICES = ("auto", "on", "off")


def scrub_wanted(device) -> bool:
    """Whether a session on `device` scrubs (see SCRUB_ENV): on, off, or auto (on a CUDA device)."""
    choice = os.environ.get(SCRUB_ENV, "").strip().lower() or "auto"
    if choice not in SCRUB_CHOICES:
        choice = "auto"  # (serve refuses a bad value before any session exists)
    return choice == "on" or (choice == "auto" and device.type == "cuda")


def run_summary(traj) -> str:
    """What the header says of a finished run: steps, model calls (NFE), positions decoded per call
    (what parallel decoding buys) and wall time."""
    return (f"{traj.n_steps} steps, {traj.nfe} model calls ({traj.tokens_per_forward:.1f} per call), "
            f"{traj.seconds * 1000:.0f} ms")


def run_status(model, config, frames) -> str:
    """What the header says while a run streams: only what is known before it ends (a threshold run's
    model calls are not: the header said "sampling 32 steps" over a 256-call threshold run)."""
    n = frames.expected_rows - 1
    if model is not None and model.config.kind == "ar":
        return f"sampling {n} characters left to right, one model call each …"
    if getattr(frames, "process", "masked") == "uniform":  # random-token noise: its stop is its own
        if config.stop_entropy is None:
            return f"sampling {n} steps from random tokens …"
        return f"sampling from random tokens, each block until stable and confident (at most {config.steps} steps) …"
    if config.threshold is not None:
        return f"sampling until every position clears the threshold {config.threshold:g} (one model call per step) …"
    if config.adaptive:  # the factor or entropy-bound rule: no step count either
        rule = "factor" if config.factor is not None else "entropy-bound"
        return f"sampling until every position is decoded by the {rule} rule (one model call per step) …"
    return f"sampling {n} steps …"


class RunState(TabState):
    """The run the session's knobs produced: `frames` while it streams, `trajectory` once finished.
    `start_run` starts one, superseding any in progress; `_run_superseded` and `_run_finished` are
    the hooks the tab's state (state/__init__.py) hangs the work that follows a run on."""

    run = param.Event(label="Run", doc="Sample now with these knobs")
    stop = param.Event(label="Stop", doc="Stop the running sample")
    new_seed = param.Event(label="New seed", doc="Draw a fresh random seed and sample")
    auto_run = param.Boolean(True, label="Auto-run on change", doc="Sample again whenever a knob changes")
    step = param.Integer(0, bounds=(0, None), label="Step", doc="Step shown in the text and confidence views")

    # Results: set by the state itself (on the UI thread), read by the views.
    run_id = param.Integer(0, doc="Bumped when a run starts: views clear")
    n_rows = param.Integer(0, doc="Rows of the current run shown so far (a live tick): views draw the new ones")
    running = param.Boolean(False)
    trajectory = param.Parameter(default=None, doc="The last finished run (explorer.sampling.Trajectory)")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        self.frames = None
        self._runs = Worker("run", session.device, session.share)  # runs go to the device's shared queue
        self._pending, self._pending_lock, self._flush_queued = [], threading.Lock(), False
        self._shown_at = self._begun_at = 0.0  # when n_rows last ticked; when the device began the run
        self._flushed_at = 0.0  # when steps were last added to the frames (_flush_wait)
        self._starting = None  # (job, frames, header line) of a run begun on the device, not yet shown
        self._shown_job = None  # the run whose frames `frames` are: only its steps are added to them
        self._waiting = Later(session.dispatch)  # "waiting for the device", unless the run begins first
        self.held = False  # the page opened on another tab: no run until Explore is first shown (hold_runs)
        self._start_lock = threading.Lock()  # start_run: knobs read and run made current at once
        self.scrub = scrub_wanted(session.device)  # knob changes wait for the run on its way (SCRUB_ENV)
        self._in_flight = None  # the job of the run started last, until it ends
        self._scrub_pending = False  # a knob changed while it was on its way: run the newest knobs next

    def _run_superseded(self) -> None:
        """Hook: a run is starting or was stopped (the tab cancels the work that followed the last one)."""

    def _run_finished(self, traj) -> None:
        """Hook: `traj` finished and is shown (the tab starts the work that follows a run)."""

    # ------------------------------------------------------------------ starting and stopping

    def hold_runs(self) -> None:
        """The page opens on another tab (a link's tab=): runs wait until Explore is first shown
        (on_shown). A sample nobody looks at would take the device from the tab the link asked for
        first (an Inspect link waited 12-41 s behind Explore's default run)."""
        self.held = True

    def on_shown(self) -> None:
        """Explore is on screen with a model loaded: a run held back (hold_runs) starts now, at the
        knobs as they are then."""
        if self.held:
            self.held = False
            if self.auto_run and self.session.model is not None:
                self.start_run()

    def start_run(self, *, wait: bool = False) -> bool:
        """Validate the knobs and start sampling (superseding any run in progress).

        Returns False, with the session's `error` set and the previous result untouched, when the
        knobs or the template are invalid.

        Callable from any thread: a server started with --num-threads runs each widget change's
        watchers (so this) on a thread of Panel's pool, several changes at once. Reading the knobs
        and making the run the current one happen under one lock, so the run made last read the
        knobs last: a param's value is set before its watchers run, so that run sees every change
        made before it. Without the lock two changes interleaved (read A, read B, run B, run A)
        and the stale run A superseded B: the last change never showed a result."""
        s = self.session
        with self._start_lock:
            try:
                config = s.sampler_config()
                canvas = s.canvas()
                self._admit_run(s.model, config, canvas)
                job = self._runs.new_job()  # refused (LimitExceeded) when the session has its share going
            except ValueError as e:
                s.error = str(e)
                return False
            s.error = ""
            self._run_superseded()
            model = s.model
            self._waiting.schedule(START_GRACE, lambda: setattr(s, "status", "waiting for the device …"))
            self._in_flight, self._scrub_pending = job, False
            self._runs.enqueue(lambda job: self._run_request(job, model, config, canvas), job=job)
        if wait:  # outside the lock: a change made meanwhile supersedes this run at once
            self._runs.wait(job)
        return True

    def _admit_run(self, model, config, canvas) -> None:
        """The run's model calls and recorded rows against the server's limits (LimitExceeded): the
        sidebar bounds them, but the operator may set the limits lower."""
        rows = run_plan(model, config, canvas).max_steps
        share = self.session.share
        share.limits.check_calls("this run", run_calls(max(rows, 1), config.cfg_scale > 0))
        share.reserve("explore.run", run_bytes(rows + 1, canvas.length), "this run")

    def wait_for_run_on_its_way(self) -> bool:
        """Scrubbing: when a run is on its way, note that the knobs changed and return True (it ends,
        then the newest knobs run: _end); otherwise False (start the run now). Under the start lock, so a
        change that misses the ending run's check starts a run of its own."""
        with self._start_lock:
            if not self.scrub or self._in_flight is None:
                return False
            self._scrub_pending = True
            return True

    def _ended(self, job) -> bool:
        """`job` has ended: whether knobs changed while it was on its way (scrubbing), to run them now."""
        with self._start_lock:
            if job is not self._in_flight:
                return False
            self._in_flight = None
            pending, self._scrub_pending = self._scrub_pending, False
            return pending

    def stop_run(self) -> None:
        with self._start_lock:
            self._scrub_pending = False  # Stop means stop: no run of the knobs changed meanwhile
        self._runs.cancel()
        self._run_superseded()

    def roll_seed(self) -> None:
        self.session.quiet = True
        try:
            self.session.seed = random.randrange(2**31 - 1)
        finally:
            self.session.quiet = False
        self.start_run()

    @param.depends("run", watch=True)
    def _run_clicked(self):
        self.start_run()

    @param.depends("stop", watch=True)
    def _stop_clicked(self):
        self.stop_run()

    @param.depends("new_seed", watch=True)
    def _new_seed_clicked(self):
        self.roll_seed()

    @property
    def shown_step(self) -> int:
        """The row the text and confidence views show: the newest while a run streams in (the scrubber
        follows it on the live tick), else the scrubber's step."""
        if self.frames is None:
            return 0
        last = self.frames.n_rows - 1
        return last if self.running else min(self.step, last)

    # ------------------------------------------------------------------ on the device, then streaming in

    def _run_request(self, job, model, config, canvas) -> SampleRequest:
        """This session's run for the device queue; its callbacks run on the device thread and hand
        everything to the UI thread through dispatch."""
        dispatch = self.session.dispatch
        plan = run_plan(model, config, canvas)  # what the views draw and the sampler runs

        def on_start():
            # (a uniform-state run draws its first noise as it starts: its first record brings row 0, Frames.add_record)
            frames = Frames(plan.canvas.tokens, plan.canvas.fixed, model.config.mask_id,
                            glyph_table(model.tokenizer), plan.process)
            frames.expected_rows, frames.rows_known = plan.rows, plan.rows_exact
            dispatch(lambda: self._begin(job, frames, config))

        def on_failed(error):  # a readable notice, never a traceback in the page (the queue logs it)
            message = f"sampling failed: {error}"
            dispatch(lambda: self._end(job, None, message))

        return SampleRequest(job, model, config, plan=plan,
                             on_step=lambda record: self._push(job, record), on_start=on_start,
                             on_done=lambda traj: dispatch(lambda: self._end(job, traj, "")),
                             on_stopped=lambda: dispatch(lambda: self._end(job, None, "stopped")),
                             on_failed=on_failed, owner=id(self.session))

    def _push(self, job, record) -> None:
        """From the sampler thread: queue a step and ask the UI thread for one flush (coalesced), at once
        for a run's first rows, else when the next live tick may be due (_flush_wait)."""
        with self._pending_lock:
            self._pending.append((job, record))
            if self._flush_queued:
                return
            self._flush_queued = True
        wait = self._flush_wait(job)
        if wait > 0:
            call_later(self.session.dispatch, wait, self._flush)
        else:
            self.session.dispatch(self._flush)

    def _flush_wait(self, job) -> float:
        """Seconds until queued steps of `job` are worth a flush: none before its first sampled row is shown
        (or for a run not shown yet), else until LIVE_INTERVAL has passed since the last tick or flush.
        A flush between ticks only adds rows to the frames, yet each is a callback on the page's loop (its
        document locked, the page's queue drained): a flush per step was 64 callbacks a run, a fifth of the
        dashboard's own work per run on a model that costs almost nothing, and a class multiplies them."""
        frames = self.frames
        if job is not self._shown_job or frames is None or frames.n_rows < 2:
            return 0.0
        return max(0.0, max(self._shown_at, self._flushed_at) + LIVE_INTERVAL - time.monotonic())

    def _flush(self) -> None:
        """On the UI thread: append queued steps of the current run to its frames, then notify views;
        a run not shown yet (_begin) is shown now, with whatever rows it has, in the same message."""
        with self._pending_lock:
            pending, self._pending, self._flush_queued = self._pending, [], False
        starting = self._take_start()
        added = self._add_rows(pending)
        now = time.monotonic()
        if added:
            self._flushed_at = now
        if starting is not None:
            self.session.status, self._shown_at = starting, now
            rows = self.frames.n_rows
            self.param.update(running=True, run_id=self.run_id + 1, n_rows=rows, step=rows - 1)
        elif added and self._tick_due(now):
            # views draw the new rows, and the scrubber follows on the same tick (one update for both:
            # apart, the scrubber stood at step 0 while the text said "step 13 of 13")
            self._shown_at = now
            self.param.update(n_rows=self.frames.n_rows, step=self.frames.n_rows - 1)

    def _add_rows(self, pending) -> int:
        """Add the current run's queued steps to its frames; how many. Steps of a run whose _begin is
        still queued behind this flush are put back for it."""
        added, early = 0, []
        for job, record in pending:
            if not self._runs.is_current(job):
                continue
            if job is not self._shown_job:
                early.append((job, record))
                continue
            self.frames.add_record(record)
            added += 1
        if early:
            with self._pending_lock:
                self._pending[:0] = early
        return added

    def _tick_due(self, now: float) -> bool:
        """Whether new rows are worth a message now: the first sampled row at once, then at most every
        LIVE_INTERVAL, but not when the run's end (which shows every row at once) is due sooner than
        that at its pace so far: a tick just before the end costs the page a redraw for nothing."""
        rows = self.frames.n_rows
        if rows <= 2:
            return True
        if now - self._shown_at < LIVE_INTERVAL:
            return False
        left = self.frames.expected_rows - rows  # <= 0: a threshold run past its estimate, end unknown
        return left <= 0 or left * (now - self._begun_at) / (rows - 1) >= LIVE_INTERVAL

    def _begin(self, job, frames, config) -> None:
        """The device has started the run: it is shown by the flush of its first row, or after
        START_GRACE by a flush of its own, whichever comes first (see START_GRACE)."""
        if not self._runs.is_current(job):
            return
        self._waiting.cancel()
        self._begun_at = time.monotonic()
        self._starting = (job, frames, run_status(self.session.model, config, frames))
        with self._pending_lock:
            early = bool(self._pending)  # steps a flush queued before this begin kept for it (_flush)
        if early:
            self._flush()
        call_later(self.session.dispatch, START_GRACE, self._flush)

    def _take_start(self) -> str | None:
        """Make the begun, unshown run (if still current) the one views read; its header line."""
        starting, self._starting = self._starting, None
        if starting is None or not self._runs.is_current(starting[0]):
            return None
        self._shown_job, self.frames, self.trajectory = starting[0], starting[1], None
        return starting[2]

    def _end(self, job, traj, message: str) -> None:
        self._flush()
        if job is not self._runs.current:
            return
        knobs_moved = self._ended(job)
        self._show_end(traj, message)
        if knobs_moved and message != "stopped":  # scrubbing: the knobs changed while it was on its way
            self.start_run()

    def _show_end(self, traj, message: str) -> None:
        """The ended run's last rows, its header line and what follows it (_run_finished)."""
        self._waiting.cancel()  # a run that ended (failed, stopped) before it began waits no more
        rows = self.frames.n_rows if self.frames is not None else self.n_rows
        self.param.update(n_rows=rows, running=False, step=max(rows - 1, 0))  # every row shown at the end
        s = self.session
        if traj is None:
            if message == "stopped":
                s.status = "stopped"
            else:
                s.status, s.error = "failed", message
            return
        self.trajectory = traj
        s.status = run_summary(traj)
        self._run_finished(traj)

    def close(self) -> None:
        """Cancel the run and drop its rows now (30 closed tabs of 256 x 256 frames add up on a lab server)."""
        self._runs.cancel()
        self.frames = None
        self.session.share.release("explore.run")
        super().close()
