"""The dashboard's whole state: one param.Parameterized with every knob, the run it produced and the
background work it started. Views read it and widgets are made from its parameters; tests drive it
without a browser (`state.start_run(wait=True)`).

Threads: runs, sweeps and loads happen on worker threads (jobs.py); their results come back through
`self.dispatch`, so parameters are only ever set on the UI thread in a served session. Runs go
through the device's shared queue (jobs.DeviceQueue), batched with other sessions' compatible runs;
each session still gets exactly its solo result (at the default fp32; see jobs.py on bf16). Sweeps
and the mean confidence take turns with them.
"""
from __future__ import annotations

import logging
import random
import threading

import param

from ..checkpoint import CheckpointError
from ..sampling.config import SCHEDULES, STRATEGIES, SamplerConfig
from .runtime import checkpoints
from .runtime.cache import MEAN_CONFIDENCE
from .runtime.queue import SampleRequest, device_queue
from .runtime.tasks import Worker
from .runtime.dispatch import call_now
from .session import checkpoint_or_default, expected_rows, run_template, sample_canvas, start_canvas  # noqa: F401
from .sweeps import SweepState, auto_sweep_default

log = logging.getLogger(__name__)

KNOBS = ("steps", "temperature", "top_p", "top_k", "strategy", "schedule", "block_length", "threshold",
         "remask", "length", "seed", "template")
CONFIDENCE_VIEWS = ("this step", "mean at t (validation)")
AUTO_RUN_MAX_PARAMS = 50_000_000  # auto-run stays on for models up to this size on a CPU


class ExplorerState(SweepState):
    """Every knob of the dashboard, the run they produced, and the work in the background.

    Knob parameters mirror SamplerConfig (see `sampler_config`); `start_run`, `load`, `start_sweep`
    start background work; `frames` holds the current run's rows, `trajectory` the last finished run."""

    checkpoint = param.Selector(default=None, objects=[], allow_None=True, label="Checkpoint",
                                doc="Model to sample from (files in checkpoints/)")
    steps = param.Integer(32, bounds=(1, 256), label="Steps",
                          doc="Denoising steps: model calls per sample (1 = everything in one shot)")
    temperature = param.Number(1.0, bounds=(0.0, 2.0), step=0.05, label="Temperature",
                               doc="0 = always the most likely character; higher = more varied, more errors")
    top_p = param.Number(1.0, bounds=(0.05, 1.0), step=0.05, label="Top-p",
                         doc="Keep the most likely characters up to this probability mass (1 = off)")
    top_k = param.Integer(0, bounds=(0, 128), label="Top-k",
                          doc="Keep only the k most likely characters (0 = off)")
    strategy = param.Selector(default="confidence", objects=list(STRATEGIES), label="Strategy",
                              doc="Which masked positions to commit at each step")
    schedule = param.Selector(default="linear", objects=list(SCHEDULES), label="Schedule",
                              doc="How many positions to commit at each step")
    block_length = param.Integer(0, bounds=(0, 256), label="Block length",
                                 doc="Semi-autoregressive: fill blocks of this many positions left to right "
                                     "(0 = the whole canvas at once; the last block may be shorter)")
    threshold = param.Number(0.0, bounds=(0.0, 1.0), step=0.05, label="Threshold",
                             doc="Commit every position more confident than this (Fast-dLLM); 0 = off")
    remask = param.Number(0.0, bounds=(0.0, 1.0), step=0.05, label="Revision η",
                          doc="ReMDM revision rate: chance that committed characters are masked again")
    length = param.Integer(256, bounds=(1, 256), label="Length",
                           doc="Canvas length in characters; a template is padded with █ up to it")
    seed = param.Integer(0, bounds=(0, 2**31 - 1), label="Seed",
                         doc="Random seed: the same seed and knobs give the same text")
    template = param.String("", label="Prompt / infill template",
                            doc="Text to keep; █ = one character to generate, [___] = five. "
                                "Empty = generate everything")

    run = param.Event(label="Run", doc="Sample now with these knobs")
    stop = param.Event(label="Stop", doc="Stop the running sample")
    new_seed = param.Event(label="New seed", doc="Draw a fresh random seed and sample")
    auto_run = param.Boolean(True, label="Auto-run on change", doc="Sample again whenever a knob changes")
    presentation = param.Boolean(False, label="Presentation (large type)", doc="Larger type for projectors")

    step = param.Integer(0, bounds=(0, None), label="Step", doc="Step shown in the text and confidence views")
    confidence_view = param.Selector(default=CONFIDENCE_VIEWS[0], objects=list(CONFIDENCE_VIEWS),
                                     label="Show", doc="Scores of this step's proposals, or the model's mean "
                                     "per-position confidence at masking ratio t on validation text")
    confidence_t = param.Number(0.5, bounds=(0.05, 0.95), step=0.05, label="t",
                                doc="Masking ratio for the mean per-position confidence")

    # Results: set by the state itself (on the UI thread), read by the views.
    run_id = param.Integer(0, doc="Bumped when a run starts: views clear")
    n_rows = param.Integer(0, doc="Rows of the current run received so far: views draw the new ones")
    running = param.Boolean(False)
    trajectory = param.Parameter(default=None, doc="The last finished run (explorer.sampling.Trajectory)")
    status = param.String("")
    error = param.String("", doc="A readable notice for the last failed action ('' = none)")
    model_info = param.Dict(default={})
    loaded = param.Integer(0, doc="Bumped once a model is loaded and the knobs fitted to it (its context...)")
    mean_confidence = param.DataFrame(default=None, allow_None=True)
    confidence_error = param.String("", doc="Why the mean confidence at t is unavailable ('' = it is not)")

    def __init__(self, checkpoint: str | None = None, device: str = "auto", dispatch=call_now, *,
                 fallback: str | None = None, **params):
        from ..devices import describe_device, resolve_device

        params.setdefault("sweep_auto", auto_sweep_default())  # `serve --no-auto-sweep` turns it off for all
        super().__init__(**params)
        names = checkpoints.available()
        self.param.checkpoint.objects = names
        self.dispatch = dispatch
        self.device = resolve_device(device)
        self.device_name = describe_device(self.device)
        precision = device_queue(self.device).precision_label
        if precision != "fp32":  # the texts differ from fp32 ones: the page says why
            self.device_name += f", {precision} autocast"
        self.model = self.frames = None
        # runs go to the device's shared queue; the mean confidence and sweeps take turns with them
        self._runs, self._loads = Worker("run", device=self.device), Worker("load", device=self.device)
        self._conf = Worker("confidence", device=self.device)
        self._pending, self._pending_lock, self._flush_queued = [], threading.Lock(), False
        self._quiet = False  # set while the state changes its own knobs: no auto-run per change
        self._init_sweeps(self.device)
        self.tabs: dict = {}  # tab name -> its TabState (tabs/), filled when the app builds its tabs
        self.load_hooks: list = []  # hook(model) once a model is loaded, before its first run (urlstate.py)
        self._wanted, self._notice = checkpoint_or_default(checkpoint, names, fallback)
        self.error = self._notice  # on the page from the start; set again once the default is loaded

    # ------------------------------------------------------------------ knobs -> config

    def sampler_config(self) -> SamplerConfig:
        """The SamplerConfig these knobs describe (raises ValueError with a readable message)."""
        return SamplerConfig(steps=self.steps, temperature=float(self.temperature), top_k=self.top_k,
                             top_p=float(self.top_p), strategy=self.strategy, schedule=self.schedule,
                             block_length=self.block_length,
                             threshold=float(self.threshold) if self.threshold > 0 else None,
                             remask=float(self.remask), seed=self.seed)

    def canvas(self):
        """The starting canvas (template or blank) for the loaded model; ValueError if the template is bad."""
        if self.model is None:
            raise ValueError("no model is loaded yet")
        return start_canvas(self.model, self.template.strip(), self.length, self.seed)

    # ------------------------------------------------------------------ model loading

    def load(self, name: str | None = None, *, wait: bool = False) -> None:
        """Load `name` (default: the chosen / default checkpoint) in the background, then run."""
        name = name or self.checkpoint or self._wanted
        if name is None:
            self.error = self._notice or "no checkpoints found in checkpoints/: train one with `python run.py train`"
            return
        self.status = f"loading {name} …"
        self._loads.submit(lambda job: self._load_job(job, name), wait=wait)

    def _load_job(self, job, name: str) -> None:
        try:
            model = checkpoints.load(name, self.device)
            info = checkpoints.describe(model, name)
        except Exception as e:  # shown as a notice; the traceback goes to the server log...
            if isinstance(e, CheckpointError):  # ...unless it is the user's choice, not a bug
                log.warning("loading %r failed: %s", name, e)
            else:
                log.exception("loading %s failed", name)
            # the message is made here: Python unbinds `e` when the except block ends, before a
            # served session's loop runs the callback
            message = f"could not load {name}: {e}"
            self.dispatch(lambda: self._load_failed(job, message))
            return
        self.dispatch(lambda: self._loaded(job, name, model, info))

    def _loaded(self, job, name, model, info) -> None:
        if not self._loads.is_current(job):
            return
        self._quiet = True
        try:
            self.model, self.model_info = model, info
            if name not in self.param.checkpoint.objects:
                self.param.checkpoint.objects = [*self.param.checkpoint.objects, name]
            self.checkpoint = name
            context = model.config.block_size
            self.param.length.bounds = (1, context)
            self.param.block_length.bounds = (0, context)
            self.param.top_k.bounds = (0, model.config.mask_id)
            self.length = context
            self.top_k = min(self.top_k, model.config.mask_id)
            if info["n_params"] > AUTO_RUN_MAX_PARAMS and self.device.type == "cpu":
                self.auto_run = False  # a big model on a CPU: sample when asked, not per knob
            if self.template and model.tokenizer.unknown_chars(self.template.replace("[___]", "").replace("█", "")):
                self.template = ""  # a template for another model's alphabet
            for hook in list(self.load_hooks):  # e.g. a shared link's length, checked against this model
                hook(model)
        finally:
            self._quiet = False
        notice, self._notice = self._notice, ""
        self.status, self.error = f"{name} loaded", ""
        self._on_model_changed()
        self.loaded += 1
        if self.auto_run and not self.start_run():
            return  # the run's own error is the notice that matters now
        self.error = notice  # e.g. why ?checkpoint= was not used; after start_run, which clears errors

    def _load_failed(self, job, message: str) -> None:
        """Keep the model that was loaded, and put the selector back on it so the page does not claim
        the failed one is in use."""
        if not self._loads.is_current(job):
            return
        self._quiet = True
        try:
            self.checkpoint = self.model_info.get("name")
        finally:
            self._quiet = False
        notice, self._notice = self._notice, ""  # why this one was tried: still worth saying
        self._fail(f"{notice}. {message}" if notice else message)

    @param.depends("checkpoint", watch=True)
    def _checkpoint_chosen(self):
        if not self._quiet and self.checkpoint and self.checkpoint != self.model_info.get("name"):
            self.load(self.checkpoint)

    # ------------------------------------------------------------------ runs

    def start_run(self, *, wait: bool = False) -> bool:
        """Validate the knobs and start sampling (superseding any run in progress).

        Returns False, with `error` set and the previous result untouched, when the knobs or the
        template are invalid."""
        try:
            config = self.sampler_config()
            canvas = self.canvas()
        except ValueError as e:
            self.error = str(e)
            return False
        self.error = ""
        self._cancel_sweep()
        model = self.model
        self.status = "waiting for the device …"  # until the queue starts it (at once when idle)
        self._runs.enqueue(lambda job: self._run_request(job, model, config, canvas), wait=wait)
        return True

    def _run_request(self, job, model, config, canvas) -> SampleRequest:
        """This session's run for the device queue; its callbacks run on the device thread and hand
        everything to the UI thread through dispatch."""
        from .frames import Frames, glyph_table

        def on_start():
            frames = Frames(canvas.tokens, canvas.fixed, model.config.mask_id, glyph_table(model.tokenizer))
            frames.expected_rows = expected_rows(model, config, canvas)
            self.dispatch(lambda: self._begin(job, frames, config))

        def on_failed(error):  # a readable notice, never a traceback in the page (the queue logs it)
            message = f"sampling failed: {error}"
            self.dispatch(lambda: self._end(job, None, message))

        return SampleRequest(job, model, config, canvas.length, run_template(model, canvas),
                             on_step=lambda record: self._push(job, record), on_start=on_start,
                             on_done=lambda traj: self.dispatch(lambda: self._end(job, traj, "")),
                             on_stopped=lambda: self.dispatch(lambda: self._end(job, None, "stopped")),
                             on_failed=on_failed, owner=id(self))

    def _push(self, job, record) -> None:
        """From the sampler thread: queue a step and ask the UI thread for one flush (coalesced)."""
        with self._pending_lock:
            self._pending.append((job, record))
            if self._flush_queued:
                return
            self._flush_queued = True
        self.dispatch(self._flush)

    def _flush(self) -> None:
        """On the UI thread: append queued steps of the current run to its frames, then notify views."""
        with self._pending_lock:
            pending, self._pending, self._flush_queued = self._pending, [], False
        added = 0
        for job, record in pending:
            if self._runs.is_current(job) and self.frames is not None:
                self.frames.add_record(record)
                added += 1
        if added:  # views draw the new rows; `step` (the scrubber) is set once, when the run ends
            self.n_rows = self.frames.n_rows

    def _begin(self, job, frames, config) -> None:
        if not self._runs.is_current(job):
            return
        self.frames, self.trajectory = frames, None
        self.status = f"sampling {frames.expected_rows - 1} steps …"
        self.param.update(running=True, run_id=self.run_id + 1, n_rows=frames.n_rows, step=0)

    def _end(self, job, traj, message: str) -> None:
        self._flush()
        if job is not self._runs.current:
            return
        self.param.update(running=False, step=self.frames.n_rows - 1 if self.frames is not None else 0)
        if traj is None:
            if message == "stopped":
                self.status = "stopped"
            else:
                self.status, self.error = "failed", message
            return
        self.trajectory = traj
        self.status = f"{traj.n_steps} steps, {traj.nfe} model calls, {traj.seconds * 1000:.0f} ms"
        self._after_run()

    @property
    def shown_step(self) -> int:
        """The row the text and confidence views show: the newest while a run streams in (moving the
        scrubber every step would cost a widget update per step), else the scrubber's step."""
        if self.frames is None:
            return 0
        last = self.frames.n_rows - 1
        return last if self.running else min(self.step, last)

    def stop_run(self) -> None:
        self._runs.cancel()
        self._cancel_sweep()

    def roll_seed(self) -> None:
        self._quiet = True
        try:
            self.seed = random.randrange(2**31 - 1)
        finally:
            self._quiet = False
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

    @param.depends(*KNOBS, watch=True)
    def _knob_changed(self):
        self._cancel_sweep()  # its cache key no longer matches these knobs
        if self._quiet or self.model is None:
            return
        if self.auto_run:
            self.start_run()
        else:
            self.error = ""

    # ------------------------------------------------------------------ mean confidence at t

    def _on_model_changed(self) -> None:
        self._choose_judge()
        self.mean_confidence = None
        self._refresh_mean_confidence()

    @param.depends("confidence_view", "confidence_t", "length", watch=True)
    def _refresh_mean_confidence(self):
        """The model's mean per-position confidence at ratio t on validation text (metrics.py)."""
        if self.confidence_view != CONFIDENCE_VIEWS[1] or self.model is None:
            return
        if self.model.config.kind != "diffusion":
            self.confidence_error = "the validation mean is measured on masked text: pick a diffusion model"
            return
        model, t, length = self.model, round(float(self.confidence_t), 3), self.length
        self._conf.submit(lambda job: self._conf_job(job, model, t, length))

    def _conf_job(self, job, model, t, length) -> None:
        from ..metrics import per_position_confidence

        key = (str(getattr(model, "path", "")), id(model), t, length)
        table = MEAN_CONFIDENCE.get(key)
        try:
            if table is None:
                tokens = checkpoints.validation_tokens(model, length)
                table = per_position_confidence(model, tokens, t=t, seed=0)
                MEAN_CONFIDENCE.put(key, table)
        except Exception as e:  # e.g. the corpus file is missing: a notice, not a traceback
            log.exception("mean confidence failed")
            message = f"mean confidence unavailable: {e}"  # made here: `e` is unbound after the except block
            self.dispatch(lambda: setattr(self, "confidence_error", message))
            return
        self.dispatch(lambda: self._conf_done(job, table))

    def _conf_done(self, job, table) -> None:
        if self._conf.is_current(job):
            self.param.update(mean_confidence=table, confidence_error="")

    # ------------------------------------------------------------------ notices

    def _fail(self, message: str) -> None:
        self.status, self.error = "", message

    def close(self) -> None:
        """Cancel everything this session started (called when its browser tab closes)."""
        try:
            for worker in (self._runs, self._loads, self._conf):
                worker.cancel()
            self._cancel_sweep()
            for name, tab in self.tabs.items():
                try:
                    tab.close()
                except Exception:  # one tab's failure must not keep the others (or the rows) alive
                    log.exception("closing the %s tab failed", name)
        finally:
            # The model stays in the shared cache; this session's rows go now, not when the GC finds
            # the document (30 closed tabs of 256 x 256 frames add up on a lab server).
            self.model = self.frames = None
