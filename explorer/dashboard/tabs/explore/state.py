"""The Explore tab's state: the session's run as it streams in, the per-position confidence shown
beside it, and quality vs steps computed after it (no Panel here; view.py draws it).

Runs go through the device's shared queue (runtime/queue.py), batched with other sessions'
compatible runs; each session still gets exactly its solo result (at the default fp32). The quality
sweep and the mean confidence are runtime Tasks: they take turns with the runs on the device, and
a knob change cancels a sweep whose cache key no longer matches. Everything comes back to the UI
thread through the session's dispatch.
"""
from __future__ import annotations

import logging
import os
import random
import threading
import time

import param

from ....experiments import QUALITY_METRICS
from ....names import STRATEGIES
from ...frames import Frames, glyph_table
from ...runtime import checkpoints
from ...runtime.cache import SWEEPS
from ...runtime.confidence import mean_confidence_table
from ...runtime.dispatch import Later, call_later
from ...runtime.limits import call_seconds, run_bytes, run_calls, sweep_size, table_bytes
from ...runtime.queue import SampleRequest
from ...runtime.tasks import Task, TaskCancelled, Worker
from ...session import KNOBS, expected_rows, rows_known, run_template, sample_canvas
from ..base import TabState

log = logging.getLogger(__name__)

# Per-position confidence: every decided position at the shown step, with the confidence it was committed
# at (the default: it fills as the run goes, whatever the steps); the proposals of that one step; or
# the model's mean over validation text at ratio t.
CONFIDENCE_VIEWS = ("when committed", "this step", "mean at t (validation)")
MEAN_VIEW = CONFIDENCE_VIEWS[2]
AUTO_SWEEP_SECONDS = 10.0  # the quality sweep starts by itself after a run only when estimated cheaper
AUTO_RUN_MAX_PARAMS = 50_000_000  # auto-run stays on for models up to this size on a CPU
# A live run is shown at most this often (its first rows and its end at once): every view redraws on
# the same tick, so the page gets one message per tick. Bokeh lays out and repaints the page after
# every message; one per step per view kept Chromium busy ~1.5 s of a 32-step run here, on the cores
# the sampler needs (benchmarks/bench_dashboard.py).
LIVE_INTERVAL = 0.25
# A run's start canvas waits up to this long for its first sampled row, so the page gets the two (and the
# header's "sampling ..." line) in one message instead of three; a first step slower than this (a big
# model) shows the start canvas first. "waiting for the device" is said only of a run not begun by then.
START_GRACE = 0.15
STEPS_GRID = (1, 2, 4, 8, 16, 32, 64)  # the quality sweep's x axis (steps up to the canvas's length)
AUTO_SWEEP_ENV = "MDLM_EXPLORER_AUTO_SWEEP"


def auto_sweep_default() -> bool:
    """Whether a new session computes quality vs steps after each run: on, unless the server was
    started with --no-auto-sweep (MDLM_EXPLORER_AUTO_SWEEP=0). A class of many sessions on one CPU
    turns it off: each sweep costs many runs' worth of device time. Compute still works."""
    return os.environ.get(AUTO_SWEEP_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def sweep_grid(n_generate: int) -> list[int]:
    """The quality sweep's step counts: STEPS_GRID up to the positions the canvas generates."""
    return [n for n in STEPS_GRID if n <= max(n_generate, 1)] or [1]


def run_summary(traj) -> str:
    """What the header says of a finished run: steps, model calls (NFE), positions decoded per call
    (what parallel decoding buys) and wall time."""
    return (f"{traj.n_steps} steps, {traj.nfe} model calls ({traj.tokens_per_forward:.1f} per call), "
            f"{traj.seconds * 1000:.0f} ms")


def held_out_reference(model, judge, length: int, template: str | None, n: int = 16):
    """Held-out text of the canvas's length for the quality sweep's reference row, which gives text its
    `ref_distance` (what ranks text: gen-PPL alone crowns `the the the`). None for patterns, without a
    judge, for a template (its given text would be scored too) or without held-out data here."""
    if judge is None or template or model.config.kind != "diffusion":
        return None
    try:
        return checkpoints.validation_tokens(model, length, n).numpy()
    except ValueError:
        return None


def run_status(model, config, frames) -> str:
    """What the header says while a run streams: only what is known before it ends (a threshold run's
    model calls are not: issue 15 saw "sampling 32 steps" over a 256-call threshold run)."""
    n = frames.expected_rows - 1
    if model is not None and model.config.kind == "ar":
        return f"sampling {n} characters left to right, one model call each …"
    if config.threshold is not None:
        return f"sampling until every position clears the threshold {config.threshold:g} (one model call per step) …"
    return f"sampling {n} steps …"


class ExploreState(TabState):
    """The run the session's knobs produced (`frames` while it streams, `trajectory` once finished),
    the confidence view's choice, and quality vs steps; `start_run` and `start_sweep` start them."""

    URL_PARAMS = ("confidence_view", "confidence_t", "sweep_strategies", "sweep_x", "sweep_metric", "sweep_samples")

    run = param.Event(label="Run", doc="Sample now with these knobs")
    stop = param.Event(label="Stop", doc="Stop the running sample")
    new_seed = param.Event(label="New seed", doc="Draw a fresh random seed and sample")
    auto_run = param.Boolean(True, label="Auto-run on change", doc="Sample again whenever a knob changes")

    step = param.Integer(0, bounds=(0, None), label="Step", doc="Step shown in the text and confidence views")
    confidence_view = param.Selector(default=CONFIDENCE_VIEWS[0], objects=list(CONFIDENCE_VIEWS),
                                     label="Show", doc="Scores of this step's proposals, or the model's mean "
                                     "per-position confidence at masking ratio t on validation text")
    confidence_t = param.Number(0.5, bounds=(0.05, 0.95), step=0.05, label="t",
                                doc="Masking ratio for the mean per-position confidence")

    sweep_strategies = param.ListSelector(default=["confidence", "random"], objects=list(STRATEGIES),
                                          label="Strategies", doc="Strategies compared in quality vs steps")
    sweep_x = param.Selector(default="steps", objects=["steps", "nfe"], label="x axis",
                             doc="Plot against denoising steps or model calls (NFE)")
    sweep_metric = param.Selector(default="auto", objects=["auto", *QUALITY_METRICS], label="Quality metric",
                                  doc="auto: pattern quality (period >= 2) for patterns; for text the distance "
                                      "from held-out text when it is on this machine, else gen-PPL with an AR "
                                      "judge, else the valid-word fraction")
    sweep_samples = param.Integer(4, bounds=(1, 64), label="Samples per point",
                                  doc="Samples per (steps, strategy) point: more = tighter bands, slower")
    sweep_auto = param.Boolean(True, label="Compute after each run",
                               doc="Start the quality-vs-steps sweep when a run finishes (cached)")
    compute_sweep = param.Event(label="Compute", doc="Compute quality vs steps for the current knobs")
    stop_sweep = param.Event(label="Stop", doc="Stop the quality-vs-steps sweep")

    more_n = param.Integer(5, bounds=(2, 16), label="Samples",
                           doc="How many samples at once, at the sidebar's knobs (seed 001's showcases)")
    more = param.Event(label="Sample more", doc="Draw that many samples at the current knobs, in one batch")

    # Results: set by the state itself (on the UI thread), read by the views.
    run_id = param.Integer(0, doc="Bumped when a run starts: views clear")
    n_rows = param.Integer(0, doc="Rows of the current run shown so far (a live tick): views draw the new ones")
    running = param.Boolean(False)
    trajectory = param.Parameter(default=None, doc="The last finished run (explorer.sampling.Trajectory)")

    def __init__(self, session, **params):
        params.setdefault("sweep_auto", auto_sweep_default())  # `serve --no-auto-sweep` turns it off for all
        super().__init__(session, **params)
        self.frames = None
        share = session.share  # every job and result counts against the session's limits (limits.py)
        self._runs = Worker("run", session.device, share)  # runs go to the device's shared queue
        # quality vs steps: (table, summary); the mean per-position confidence at t: a DataFrame
        self.quality = Task("quality sweep", session.device, session.dispatch, share)
        self.confidence = Task("mean confidence", session.device, session.dispatch, share)
        self.samples = Task("more samples", session.device, session.dispatch, share)  # texts of one batched run
        self._pending, self._pending_lock, self._flush_queued = [], threading.Lock(), False
        self._shown_at = self._begun_at = 0.0  # when n_rows last ticked; when the device began the run
        self._starting = None  # (job, frames, header line) of a run begun on the device, not yet shown
        self._shown_job = None  # the run whose frames `frames` are: only its steps are added to them
        self._waiting = Later(session.dispatch)  # "waiting for the device", unless the run begins first
        self._judge_name = None
        session.param.watch(lambda *events: self._knob_changed(), list(KNOBS))
        session.param.watch(lambda *events: self._model_loaded(), "loaded")
        session.param.watch(lambda *events: self._refresh_mean_confidence(), "length")

    # ------------------------------------------------------------------ runs

    def start_run(self, *, wait: bool = False) -> bool:
        """Validate the knobs and start sampling (superseding any run in progress).

        Returns False, with the session's `error` set and the previous result untouched, when the
        knobs or the template are invalid."""
        s = self.session
        try:
            config = s.sampler_config()
            canvas = s.canvas()
            self._admit_run(s.model, config, canvas)
            job = self._runs.new_job()  # refused (LimitExceeded) when the session has its share going
        except ValueError as e:
            s.error = str(e)
            return False
        s.error = ""
        self._cancel_sweep()
        model = s.model
        self._waiting.schedule(START_GRACE, lambda: setattr(s, "status", "waiting for the device …"))
        self._runs.enqueue(lambda job: self._run_request(job, model, config, canvas), wait=wait, job=job)
        return True

    def _admit_run(self, model, config, canvas) -> None:
        """The run's model calls and recorded rows against the server's limits (LimitExceeded): the
        sidebar bounds them, but the operator may set the limits lower."""
        rows = expected_rows(model, config, canvas) - 1 if rows_known(model, config) else canvas.n_generate
        share = self.session.share
        share.limits.check_calls("this run", run_calls(max(rows, 1), config.cfg_scale > 0))
        share.reserve("explore.run", run_bytes(rows + 1, canvas.length), "this run")

    def _run_request(self, job, model, config, canvas) -> SampleRequest:
        """This session's run for the device queue; its callbacks run on the device thread and hand
        everything to the UI thread through dispatch."""
        dispatch = self.session.dispatch

        def on_start():
            frames = Frames(canvas.tokens, canvas.fixed, model.config.mask_id, glyph_table(model.tokenizer))
            frames.expected_rows = expected_rows(model, config, canvas)
            frames.rows_known = rows_known(model, config)
            dispatch(lambda: self._begin(job, frames, config))

        def on_failed(error):  # a readable notice, never a traceback in the page (the queue logs it)
            message = f"sampling failed: {error}"
            dispatch(lambda: self._end(job, None, message))

        return SampleRequest(job, model, config, canvas.length, run_template(model, canvas),
                             on_step=lambda record: self._push(job, record), on_start=on_start,
                             on_done=lambda traj: dispatch(lambda: self._end(job, traj, "")),
                             on_stopped=lambda: dispatch(lambda: self._end(job, None, "stopped")),
                             on_failed=on_failed, owner=id(self.session))

    def _push(self, job, record) -> None:
        """From the sampler thread: queue a step and ask the UI thread for one flush (coalesced)."""
        with self._pending_lock:
            self._pending.append((job, record))
            if self._flush_queued:
                return
            self._flush_queued = True
        self.session.dispatch(self._flush)

    def _flush(self) -> None:
        """On the UI thread: append queued steps of the current run to its frames, then notify views;
        a run not shown yet (_begin) is shown now, with whatever rows it has, in the same message."""
        with self._pending_lock:
            pending, self._pending, self._flush_queued = self._pending, [], False
        starting = self._take_start()
        added, early = 0, []
        for job, record in pending:
            if not self._runs.is_current(job):
                continue
            if job is not self._shown_job:  # its _begin is still queued behind this flush: keep them for it
                early.append((job, record))
                continue
            self.frames.add_record(record)
            added += 1
        if early:
            with self._pending_lock:
                self._pending[:0] = early
        now = time.monotonic()
        if starting is not None:
            self.session.status, self._shown_at = starting, now
            rows = self.frames.n_rows
            self.param.update(running=True, run_id=self.run_id + 1, n_rows=rows, step=rows - 1)
        elif added and self._tick_due(now):
            # views draw the new rows, and the scrubber follows on the same tick (one update for both:
            # issue 15 saw it at step 0 while the text said "step 13 of 13")
            self._shown_at = now
            self.param.update(n_rows=self.frames.n_rows, step=self.frames.n_rows - 1)

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
        if self.sweep_auto:
            self._auto_sweep(traj)

    def sweep_estimate(self, traj) -> float:
        """Seconds of model calls the quality sweep would take, from the run that just ended: its time
        per row-call times the rows the sweep computes. On a CPU a batched row costs about what a single
        one does (shakespeare, 256 characters: 38 ms per call alone, 38 ms per row in the sweep)."""
        frames = self.frames
        generate = int((frames.tokens[0] == frames.mask_id).sum()) if frames is not None else traj.length
        rows = self.sweep_samples * len(self.sweep_strategies) * sum(sweep_grid(generate))
        return rows * traj.seconds / max(traj.nfe * traj.batch_size, 1)

    def _auto_sweep(self, traj) -> None:
        """After a run: the sweep if it is cached or cheap (AUTO_SWEEP_SECONDS), else say what it
        would cost and leave it to the Compute button (issue 15: a 60-sample sweep kept a 2-core
        laptop busy for 50 s after every run)."""
        try:
            cached = SWEEPS.get(self.sweep_key()) is not None
        except ValueError:
            cached = False
        estimate = self.sweep_estimate(traj)
        if cached or estimate <= AUTO_SWEEP_SECONDS or not self.sweep_strategies:
            self.start_sweep(by_itself=True)
            return
        self.quality.clear()
        self.quality.status = (f"not computed after this run: about {estimate:.0f} s of model calls on this "
                               f"device; press Compute")

    @property
    def shown_step(self) -> int:
        """The row the text and confidence views show: the newest while a run streams in (the scrubber
        follows it on the live tick), else the scrubber's step."""
        if self.frames is None:
            return 0
        last = self.frames.n_rows - 1
        return last if self.running else min(self.step, last)

    def stop_run(self) -> None:
        self._runs.cancel()
        self._cancel_sweep()

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

    def _knob_changed(self):
        self._cancel_sweep()  # its cache key no longer matches these knobs
        s = self.session
        if s.quiet or s.model is None:
            return
        if self.auto_run:
            self.start_run()
        else:
            s.error = ""

    def _model_loaded(self) -> None:
        """A model is loaded and the knobs fitted: forget the last model's results, then run."""
        s = self.session
        self._judge_name = checkpoints.find_judge(s.model, s.param.checkpoint.objects) if s.model else None
        self.confidence.clear()
        self.quality.clear()
        s.share.release("explore.quality")
        if s.model_info.get("n_params", 0) > AUTO_RUN_MAX_PARAMS and s.device.type == "cpu":
            self.auto_run = False  # a big model on a CPU: sample when asked, not per knob
        self._refresh_mean_confidence()
        if self.auto_run:
            self.start_run()

    # ------------------------------------------------------------------ mean confidence at t

    @param.depends("confidence_view", "confidence_t", watch=True)
    def _refresh_mean_confidence(self):
        """The model's mean per-position confidence at ratio t on held-out text (one computation and
        one cache for the whole dashboard: runtime/confidence.py)."""
        model = self.session.model
        if self.confidence_view != MEAN_VIEW or model is None:
            return
        if model.config.kind != "diffusion":
            self.confidence.error = "the validation mean is measured on masked text: pick a diffusion model"
            return
        t, length = round(float(self.confidence_t), 3), self.session.length
        self.confidence.start(lambda job, report: mean_confidence_table(model, t, length))

    # ------------------------------------------------------------------ quality vs steps

    def sweep_key(self):
        s = self.session
        cfg = s.sampler_config().to_dict()
        for varied in ("steps", "strategy"):
            cfg.pop(varied)
        path = getattr(s.model, "path", None)
        mtime = path.stat().st_mtime_ns if path is not None and path.exists() else None
        return (s.model_info.get("name"), mtime, tuple(sorted(cfg.items())), s.length, s.template, s.chat,
                tuple(self.sweep_strategies), self.sweep_samples, self._judge_name)

    def start_sweep(self, *, wait: bool = False, by_itself: bool = False) -> bool:
        """Show the cached sweep for these knobs, or compute it in the background. Refused, with a
        notice, over the server's limits (limits.py). by_itself: not a click on Compute (after a run,
        a knob of the sweep changed): a sweep over the auto-start limit says so and waits for Compute."""
        s = self.session
        if s.model is None or not self.sweep_strategies:
            return False
        if s.model.config.kind != "diffusion":
            self.quality.status = "quality vs steps compares diffusion samplers: pick a diffusion model"
            return False
        try:
            key, config, canvas = self.sweep_key(), s.sampler_config(), s.canvas()
            cached = SWEEPS.get(key)
            if cached is not None:
                self.quality.show(cached, "from cache")
                return True
            template = s.prompt_template() or None  # as typed (stripped as start_canvas strips it)
            if not self._admit_sweep(config, canvas, template, by_itself):
                return False
        except ValueError as e:  # LimitExceeded too
            self.quality.error = str(e)
            return False
        args = (s.model, config, canvas, template, list(self.sweep_strategies), self.sweep_samples, s.seed, key)
        return self.quality.start(lambda job, report: self._sweep(job, report, *args), status="computing …",
                                  wait=wait) is not None

    def _admit_sweep(self, config, canvas, template, by_itself: bool) -> bool:
        """The sweep's model calls and table against the server's limits (LimitExceeded); False, with
        the estimate as the panel's status, when it is too large to start `by_itself`."""
        share, n = self.session.share, self.sweep_samples
        with_ar = self._judge_name is not None and template is None  # as _sweep samples it
        vary = {"steps": sweep_grid(canvas.n_generate), "strategy": list(self.sweep_strategies)}
        calls, samples = sweep_size(vary, n, canvas.length, config, ar=with_ar)
        share.limits.check_calls("this quality sweep", calls)
        if by_itself:
            seconds = self._sweep_seconds(calls, canvas.length)
            if not share.limits.starts_by_itself(seconds):
                self.quality.clear()
                self.quality.status = share.limits.waiting_note(calls, seconds, "Compute")
                return False
        share.reserve("explore.quality", table_bytes(samples + 16, canvas.length), "this quality sweep")  # + reference
        return True

    def _sweep_seconds(self, calls: int, length: int) -> float:
        """What a sweep of `calls` model calls (counted per sample) should take: at the last run's pace
        per call (sweep_estimate says why that holds on a CPU), else at the model's size."""
        traj = self.trajectory
        if traj is not None and traj.nfe:
            return calls * traj.seconds / max(traj.nfe * traj.batch_size, 1)
        return calls * call_seconds(self.session.model_info.get("n_params", 0), length)

    def _sweep(self, job, report, model, config, canvas, template, strategies, n_samples, seed, key):
        """The Task's work (on its worker): experiments.sweep over steps x strategies, then cached."""
        from ....experiments import (  # the sweep code loads only when one runs
            SweepCancelled,
            sweep,
        )

        grid = sweep_grid(canvas.n_generate)
        judge = checkpoints.load(self._judge_name, self.session.device) if self._judge_name else None
        reference = held_out_reference(model, judge, canvas.length, template)
        try:
            result = sweep(model, config, {"steps": grid, "strategy": strategies}, n_samples=n_samples,
                           seed=seed, length=canvas.length, template=template, judge=judge, reference=reference,
                           progress=lambda done, total: report(done, total, f"{done} of {total} samples"),
                           cancel=lambda: job.cancelled, include_ar=judge is not None and template is None)
        except SweepCancelled:
            raise TaskCancelled() from None
        SWEEPS.put(key, result)
        return result

    def _cancel_sweep(self) -> None:
        self.quality.cancel("cancelled (knobs changed)")

    @param.depends("more", watch=True)
    def sample_more(self, *, wait: bool = False) -> bool:
        """`more_n` samples at the session's knobs and template in one batched run of the real sampler
        (row i draws its own noise from the run's seed); their texts become `samples.result`."""
        s = self.session
        try:
            if s.model is None:
                raise ValueError("no model is loaded yet")
            model, config, canvas, n = s.model, s.sampler_config(), s.canvas(), self.more_n
            rows = expected_rows(model, config, canvas) - 1 if rows_known(model, config) else canvas.n_generate
            s.share.limits.check_calls(f"{n} samples", run_calls(max(rows, 1), config.cfg_scale > 0) * n)
            s.share.reserve("explore.samples", table_bytes(n, canvas.length), f"{n} samples")
        except ValueError as e:  # LimitExceeded too
            self.samples.error = str(e)
            return False
        work = lambda job, report: sample_canvas(model, config, canvas, batch_size=n, record=False).texts()  # noqa: E731
        return self.samples.start(work, status=f"sampling {n} …", wait=wait) is not None

    @param.depends("compute_sweep", watch=True)
    def _compute_clicked(self):
        self.start_sweep()

    @param.depends("stop_sweep", watch=True)
    def _stop_sweep_clicked(self):
        self.quality.cancel()

    @param.depends("sweep_strategies", "sweep_samples", watch=True)
    def _sweep_knobs_changed(self):
        self._cancel_sweep()
        if self.sweep_auto and not self.running:
            self.start_sweep(by_itself=True)  # a link sets these too: a large sweep waits for Compute

    def close(self) -> None:
        """Cancel the run and the background work; drop this session's rows now (30 closed tabs of
        256 x 256 frames add up on a lab server)."""
        self._runs.cancel()
        self.quality.close()
        self.confidence.close()
        self.samples.close()
        self.frames = None
        for slot in ("explore.run", "explore.quality", "explore.samples"):
            self.session.share.release(slot)
