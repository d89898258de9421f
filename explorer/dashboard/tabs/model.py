"""The Model tab: the loaded checkpoint's metadata as a page (architecture, size, corpus, commands,
curves, NELBO), and training a small model live from the browser (seed 002: loss curves, LR
schedules cosine / linear / constant), saved under a new name into checkpoints/ so the other tabs
can sample from it.

Training runs on a Worker thread (explorer.train.Trainer, the CLI's loop); its records reach the UI
through explorer.dispatch, batched to a few updates a second. One training per session; Stop and
closing the session both save. A server operator switches it off with MDLM_EXPLORER_ALLOW_TRAINING=0
and caps the trainings running at once across sessions with MDLM_EXPLORER_MAX_TRAININGS (default 2).
Training uses the process's torch threads (`serve --threads`); nothing is downloaded.
"""
from __future__ import annotations

import html
import logging
import os
import re
import shlex
import time
from dataclasses import fields
from pathlib import Path

import panel as pn
import param

from ...names import LR_SCHEDULES
from ..runtime import checkpoints
from ..runtime.cache import TRAINING_LOCK, TRAINING_NAMES
from ..runtime.queue import device_queue
from ..runtime.tasks import Worker
from .base import TabState

log = logging.getLogger(__name__)

ALLOW_ENV = "MDLM_EXPLORER_ALLOW_TRAINING"
MAX_ENV = "MDLM_EXPLORER_MAX_TRAININGS"  # trainings at once in one server process (all sessions)
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
UPDATE_INTERVAL = 0.3  # seconds between UI updates while training: a few a second, not one per step
# Tiny models on a CPU: fp32 measured ~2x faster than bf16 autocast here; save only at the end.
PRESETS = {
    "patterns": dict(corpus="patterns", block_size=24, n_layer=2, n_head=4, n_embd=64, time_conditioning="adaln",
                     weighting="uniform", batch_size=64, lr=3e-3, warmup_steps=50, eval_every=100,
                     eval_sequences=256, max_steps=2000),  # ~45 ms a step: about 1.5 min
    "shakespeare": dict(corpus="shakespeare", block_size=64, n_layer=2, n_head=4, n_embd=96, batch_size=32,
                        lr=2e-3, warmup_steps=100, eval_every=200, eval_sequences=64, max_steps=2000),  # ~3 min
}
PRESET_LABELS = {"patterns": "patterns (tiny model, ~1-2 min)", "shakespeare": "Shakespeare (small model, ~3 min)"}


def training_allowed() -> bool:
    return os.environ.get(ALLOW_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def name_problem(name: str, existing) -> str:
    """Why `name` cannot be the new checkpoint's name ('' = it can): plain, new, never a shipped one."""
    if not name:
        return "give the new checkpoint a name"
    if not NAME_RE.fullmatch(name):
        return (f"{name!r} is not a plain name: use only letters, digits, '-' and '_' (at most 64), "
                "no dots, slashes or spaces")
    if name in existing:
        return f"checkpoints/{name}.safetensors already exists: choose a new name (nothing is ever overwritten)"
    return ""


def suggest_name(preset: str, existing) -> str:
    """my-<preset>, my-<preset>-2, ...: the first that is free."""
    base, n = f"my-{preset}", 1
    while (f"{base}-{n}" if n > 1 else base) in existing or (f"{base}-{n}" if n > 1 else base) in TRAINING_NAMES:
        n += 1
    return f"{base}-{n}" if n > 1 else base


def find_shakespeare() -> Path | None:
    """A verified Tiny Shakespeare on this server (runtime.checkpoints.local_shakespeare); never downloads."""
    return checkpoints.local_shakespeare()


def cli_command(cfg, name: str) -> str:
    """The `run.py train` command that reproduces this run (stored in the checkpoint's commands)."""
    from ...train import TrainConfig

    default = TrainConfig()
    flags = []
    for f in fields(TrainConfig):
        value = getattr(cfg, f.name)
        if value != getattr(default, f.name) and f.name not in ("device", "save_every"):
            flags += ["--" + f.name.replace("_", "-"), str(value)]
    return "python run.py " + shlex.join(["train", "--out", name, *flags]) + "  # started from the dashboard"


def free_name(name: str, existing) -> str:
    """`name`, or name-2, name-3 ... if a file of that name appeared while training (another process)."""
    n, candidate = 1, name
    while candidate in existing:
        n += 1
        candidate = f"{name}-{n}"
    return candidate


class ModelState(TabState):
    """The metadata of the session's model, and one live training run with its curves."""

    URL_PARAMS = ("preset", "lr_schedule")

    preset = param.Selector(default="patterns", objects=list(PRESETS), label="Preset",
                            doc="What to train: the patterns toy (tiny model) or Tiny Shakespeare (small model)")
    lr_schedule = param.Selector(default="cosine", objects=list(LR_SCHEDULES), label="LR schedule",
                                 doc="Learning rate after warmup: cosine or linear decay to 10%, or constant")
    train_steps = param.Integer(2000, bounds=(10, 20000), label="Steps", doc="Optimizer steps (Stop saves earlier)")
    new_name = param.String("", label="Save as", doc="Name of the new checkpoint in checkpoints/ (letters, digits, - _)")
    train = param.Event(label="Train", doc="Start training a new model with these settings")
    stop_training = param.Event(label="Stop and save", doc="Stop training and save the model as it is now")
    sample_saved = param.Event(label="Sample from it", doc="Load the model just saved in every tab")

    # Results, set on the UI thread only.
    meta = param.Dict(default={}, doc="Metadata of the session's model (checkpoint.read_metadata)")
    training = param.Boolean(False)
    train_status = param.String("")
    train_error = param.String("", doc="Why training could not start or failed ('' = none)")
    saved = param.String("", doc="Name of the checkpoint this session saved last")
    run_id = param.Integer(0, doc="Bumped when a training starts: live curves clear")
    n_records = param.Integer(0, doc="Bumped when records arrive: live curves draw the new ones")

    def __init__(self, explorer, **params):
        super().__init__(explorer, **params)
        self.allowed = training_allowed()
        self.train_points: list[tuple[int, float, float]] = []  # (step, loss, lr) of this session's run
        self.val_points: list[tuple[int, float]] = []
        self._worker, self._closing, self._name = Worker("train", explorer.device), False, None
        self.new_name = suggest_name(self.preset, explorer.param.checkpoint.objects)
        self.on_model_changed()

    def on_model_changed(self) -> None:
        model = self.session.model
        self.meta = dict(getattr(model, "meta", None) or {}) if model is not None else {}

    def train_config(self, find_data: bool = True):
        """The TrainConfig of the chosen preset, schedule and steps (ValueError says what is missing).
        find_data=False: without looking for the corpus file (enough to draw the LR schedule)."""
        from ...train import TrainConfig

        opts = dict(PRESETS[self.preset], lr_schedule=self.lr_schedule, max_steps=self.train_steps)
        opts["warmup_steps"] = min(opts["warmup_steps"], max(1, self.train_steps // 10))
        opts["eval_every"] = min(opts["eval_every"], max(1, self.train_steps // 5))
        device = self.session.device
        # the device queue's precision (serve --precision), as every other model call of the dashboard
        opts.update(device=str(device), precision=device_queue(device).precision,
                    save_every=self.train_steps + 1)  # saved once, at the end or on Stop
        if self.preset == "shakespeare" and find_data:
            path = find_shakespeare()
            if path is None:
                raise ValueError("Tiny Shakespeare is not on this server: run `python run.py train --corpus "
                                 "shakespeare ...` once with network access to cache it, or train on patterns")
            opts["data"] = str(path)
        return TrainConfig(**opts)

    # ------------------------------------------------------------------ starting and stopping

    def start_training(self, *, wait: bool = False) -> bool:
        """Validate the name and settings, then train in the background. False (with a notice) if not."""
        problem = self._start_problem()
        if problem:
            self.train_error = problem
            return False
        name = self.new_name.strip()
        try:
            cfg = self.train_config()
        except ValueError as e:
            self.train_error = str(e)
            return False
        with TRAINING_LOCK:
            limit = int(os.environ.get(MAX_ENV, "2") or 2)
            if name in TRAINING_NAMES or len(TRAINING_NAMES) >= limit:
                busy = f"{name!r} is being trained in another session" if name in TRAINING_NAMES else \
                    f"this server already runs {len(TRAINING_NAMES)} training(s), its limit: try again later"
                self.train_error = busy
                return False
            TRAINING_NAMES.add(name)
        self._name, self._closing = name, False
        self.train_points, self.val_points = [], []
        self.param.update(training=True, train_error="", saved="", run_id=self.run_id + 1, n_records=0,
                          train_status=f"starting {self.preset} training as {name} …")
        self._worker.submit(lambda job: self._train_job(job, cfg, name), wait=wait)
        return True

    def _start_problem(self) -> str:
        if not self.allowed:
            return f"training from the browser is switched off on this server ({ALLOW_ENV}=0)"
        if self.training:
            return "a training run is going: stop it before starting another"
        return name_problem(self.new_name.strip(), checkpoints.available())

    def stop(self) -> None:
        """Stop the run; the job saves what it has (with its held-out NELBO) and says so."""
        if self.training:
            self._worker.cancel()
            self.train_status = "stopping: saving and measuring the held-out NELBO …"

    def close(self) -> None:
        """The session is gone: stop the run; it saves without measuring and reports to nobody."""
        self._closing = True
        self._worker.cancel()

    @param.depends("train", watch=True)
    def _train_clicked(self):
        self.start_training()

    @param.depends("stop_training", watch=True)
    def _stop_clicked(self):
        self.stop()

    @param.depends("sample_saved", watch=True)
    def _sample_clicked(self):
        if self.saved and self.saved in self.session.param.checkpoint.objects:
            self.session.checkpoint = self.saved  # the session loads it; every tab samples from it

    @param.depends("preset", watch=True)
    def _preset_chosen(self):
        self.train_steps = PRESETS[self.preset]["max_steps"]
        if not self.training and self.new_name.startswith("my-"):
            self.new_name = suggest_name(self.preset, checkpoints.available())

    # ------------------------------------------------------------------ the training job (worker thread)

    def _report(self, callback) -> None:
        """Hand a result to the UI thread, unless the session has closed (no page to update)."""
        if not self._closing:
            self.session.dispatch(callback)

    def _train_job(self, job, cfg, name: str) -> None:
        from ...checkpoint import CheckpointError, checkpoints_dir
        from ...data.corpus import CorpusError
        from ...train import Trainer

        try:
            try:
                trainer = Trainer(cfg, checkpoints_dir() / f"{name}.safetensors", command=cli_command(cfg, name))
            except (ValueError, CorpusError, CheckpointError, OSError) as e:
                message = f"could not start training: {e}"  # made here: `e` is unbound after the block
                return self._report(lambda: self._finished(job, "", message))
            n_params = trainer.model.n_params
            self._report(lambda: self._started(job, n_params))
            self._run_trainer(job, trainer)
            saved, note = self._save(job, trainer, name)
            self._report(lambda: self._finished(job, saved, "", note))
        except Exception as e:  # a notice in the page, the traceback in the server log
            log.exception("training %s failed", name)
            message = f"training failed: {e}"
            self._report(lambda: self._finished(job, "", message))
        finally:
            with TRAINING_LOCK:
                TRAINING_NAMES.discard(name)

    def _run_trainer(self, job, trainer) -> None:
        """Step until done or stopped, sending the records in batches every UPDATE_INTERVAL seconds."""
        batch, last = [], time.monotonic()
        for record in trainer.run():
            batch.append(record)
            if job.cancelled:
                break
            if time.monotonic() - last >= UPDATE_INTERVAL:
                sent, batch, last = batch, [], time.monotonic()
                self._report(lambda sent=sent: self._records(job, sent))
        if batch:
            self._report(lambda: self._records(job, batch))

    def _save(self, job, trainer, name: str) -> tuple[str, str]:
        """Save under `name` (or a free variant if that file appeared meanwhile): with the held-out
        NELBO, except when the session closed (nobody waits for it)."""
        metrics = None
        if not self._closing:
            self._report(lambda: self._status(job, "measuring the held-out NELBO, then saving …"))
            metrics = trainer.final_metrics()
        final = free_name(name, checkpoints.available())
        path = trainer.save(metrics, path=trainer.out.with_name(f"{final}.safetensors"))
        log.info("saved %s at step %d", path, trainer.state["step"])
        note = "" if final == name else f" ({name} appeared meanwhile, so it was saved as {final})"
        if metrics and "nelbo_nats_per_char" in metrics:
            note += f" · NELBO {metrics['nelbo_nats_per_char']:.3f} nats/char"
        return final, note

    # ------------------------------------------------------------------ results (UI thread)

    def _current(self, job) -> bool:
        return job is self._worker.current

    def _status(self, job, text: str) -> None:
        if self._current(job):
            self.train_status = text

    def _started(self, job, n_params: int) -> None:
        if self._current(job):
            self.train_status = f"training {n_params:,} parameters on {self.preset} …"

    def _records(self, job, records) -> None:
        if not self._current(job):
            return
        for r in records:
            if r["type"] == "train":
                self.train_points.append((r["step"], r["loss"], r["lr"]))
            else:
                self.val_points.append((r["step"], r["nats_per_char"]))
        self.train_status = self._progress_text(records)
        self.n_records = len(self.train_points) + len(self.val_points)

    def _progress_text(self, records) -> str:
        step, loss, lr = self.train_points[-1] if self.train_points else (0, float("nan"), 0.0)
        speeds = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
        val = f" · val {self.val_points[-1][1]:.3f}" if self.val_points else ""
        speed = f" · {speeds[-1]:,.0f} chars/s" if speeds else ""
        return f"step {step:,} of {self.train_steps:,} · loss {loss:.3f}{val} · lr {lr:.2e}{speed}"

    def _finished(self, job, saved: str, error: str, note: str = "") -> None:
        if not self._current(job):
            return
        self.training = False
        if not saved:
            self.param.update(train_status="", train_error=error)
            return
        names = checkpoints.available()
        self.session.param.checkpoint.objects = names  # the new one can be chosen in the sidebar now
        step = self.train_points[-1][0] if self.train_points else 0
        self.param.update(saved=saved, train_error="",
                          train_status=f"saved checkpoints/{saved}.safetensors at step {step:,}{note}")
        if self.new_name.strip() in names:
            self.new_name = suggest_name(self.preset, names)


# ---------------------------------------------------------------------- views


def _curves_csv(meta: dict) -> str:
    from ..downloads import table_csv
    from ..views.model_page import curves_frame

    return table_csv(curves_frame(meta))


class CheckpointPage(pn.viewable.Viewer):
    """The session model's metadata: tables on the left, its stored curves and LR schedule on the right."""

    state = param.ClassSelector(class_=ModelState)

    def __init__(self, **params):
        from ..downloads import download_button
        from ..ui.base import watch_presentation
        from ..views.model_page import PAGE_CSS, loss_figure, lr_figure

        super().__init__(**params)
        self.summary = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[PAGE_CSS],
                                    css_classes=["model-summary"])
        # Figures made once; a new model only changes their data and titles (a new Bokeh model per
        # checkpoint would be heavier, and Panel links its loading.css from the CDN for one).
        fig, self.train_src, self.val_src = loss_figure("Loss during training", prefix="stored")
        lr_fig, self.plan_src, self.used_src = lr_figure("Learning-rate schedule", height=200, prefix="stored")
        self.curves_fig, self.lr_fig = fig, lr_fig
        self.curves = pn.pane.Bokeh(fig, sizing_mode="stretch_width", css_classes=["model-curves"])
        self.schedule = pn.pane.Bokeh(lr_fig, sizing_mode="stretch_width")
        self.csv = download_button("Curves (CSV)", "curves.csv", lambda: _curves_csv(self.state.meta))
        self._draw()
        watch_presentation(self.state.session, (self.curves_fig, self.lr_fig), (self.summary,))

    @param.depends("state.meta", watch=True)
    def _draw(self):
        from ..views.model_page import stored_curves_data, stored_schedule_data, summary_html

        meta, name = self.state.meta, self.state.session.model_info.get("name", "")
        if not meta:
            self.summary.object = "<i>loading a model …</i>"
            return
        self.summary.object = f"<div class='meta-page'>{summary_html(meta, name)}</div>"
        self.csv.filename = f"{name}-curves.csv"
        self.train_src.data, self.val_src.data = stored_curves_data(meta)
        cfg = self._stored_config(meta)
        steps = (meta.get("training_state") or {}).get("step") or 0
        self.plan_src.data, self.used_src.data = stored_schedule_data(cfg, steps)
        self.curves_fig.title.text = f"{name}: loss during training"
        self.lr_fig.title.text = (f"{name}: learning-rate schedule ({cfg.lr_schedule})" if cfg is not None
                                  else f"{name}: no learning-rate schedule stored")

    @staticmethod
    def _stored_config(meta: dict):
        """The checkpoint's TrainConfig, or None when it stores none (or another version's)."""
        from ...train import TrainConfig

        stored = meta.get("train_config") or {}
        try:
            return TrainConfig.from_dict(stored) if "lr_schedule" in stored else None
        except (TypeError, ValueError):
            return None

    def __panel__(self):
        right = pn.Column(self.curves, self.schedule, self.csv, sizing_mode="stretch_width",
                          styles={"flex": "3 1 0"}, min_width=420)
        left = pn.Column(self.summary, styles={"flex": "2 1 0"}, min_width=360)
        return pn.Row(left, right, sizing_mode="stretch_width", css_classes=["model-page"])


class TrainingPanel(pn.viewable.Viewer):
    """Preset, schedule, steps, name, Train / Stop; the live loss curve and the LR schedule (drawn as
    soon as it is chosen, then the LR actually used drawn over it). Only new points are streamed."""

    state = param.ClassSelector(class_=ModelState)

    def __init__(self, **params):
        from ..ui.base import watch_presentation
        from ..views.model_page import loss_figure, lr_figure

        super().__init__(**params)
        p = self.state.param
        self.preset = pn.widgets.RadioButtonGroup.from_param(p.preset, options=dict(
            (PRESET_LABELS[k], k) for k in PRESETS), css_classes=["train-preset"])
        self.schedule = pn.widgets.RadioButtonGroup.from_param(p.lr_schedule, css_classes=["train-schedule"])
        self.steps = pn.widgets.IntInput.from_param(p.train_steps, width=140, css_classes=["train-steps"])
        self.name_input = pn.widgets.TextInput.from_param(p.new_name, width=240, css_classes=["train-name"])
        self.start = pn.widgets.Button.from_param(p.train, color="primary", css_classes=["train-start"])
        self.stop = pn.widgets.Button.from_param(p.stop_training, color="warning", css_classes=["train-stop"])
        self.sample = pn.widgets.Button.from_param(p.sample_saved, color="success", css_classes=["train-sample"])
        self.status = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["train-status"])
        self.error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self.done = pn.pane.Alert("", alert_type="success", visible=False, sizing_mode="stretch_width")
        fig, self.train_src, self.val_src = loss_figure("Live training loss", height=320)
        lr_fig, self.plan_src, self.used_src = lr_figure("Learning-rate schedule")
        self.loss_pane = pn.pane.Bokeh(fig, sizing_mode="stretch_width", css_classes=["train-loss"])
        self.lr_pane = pn.pane.Bokeh(lr_fig, sizing_mode="stretch_width", css_classes=["train-lr"])
        self._drawn = (0, 0)
        self._plan()
        self._notices()
        watch_presentation(self.state.session, (fig, lr_fig), (self.status,))

    @param.depends("state.preset", "state.lr_schedule", "state.train_steps", watch=True)
    def _plan(self):
        from ..views.model_page import schedule_frame

        table = schedule_frame(self.state.train_config(find_data=False))
        self.plan_src.data = {"step": table.step.to_numpy(), "lr": table.lr.to_numpy()}

    @param.depends("state.run_id", watch=True)
    def _clear(self):
        self.train_src.data = {"step": [], "loss": [], "smooth": []}
        self.val_src.data = {"step": [], "loss": []}
        self.used_src.data = {"step": [], "lr": []}
        self._drawn = (0, 0)

    @param.depends("state.n_records", watch=True)
    def _stream(self):
        """Append the points that arrived since the last draw (one patch per UI update)."""
        from ..views.model_page import ema

        n_train, n_val = self._drawn
        new, vals = self.state.train_points[n_train:], self.state.val_points[n_val:]
        if new:
            steps, losses, lrs = (list(c) for c in zip(*new))
            start = self.train_src.data["smooth"][-1] if n_train else None
            self.train_src.stream({"step": steps, "loss": losses, "smooth": list(ema(losses, start=start))})
            self.used_src.stream({"step": steps, "lr": lrs})
        if vals:
            self.val_src.stream({"step": [v[0] for v in vals], "loss": [v[1] for v in vals]})
        self._drawn = (n_train + len(new), n_val + len(vals))

    @param.depends("state.train_status", "state.train_error", "state.saved", "state.training", watch=True)
    def _notices(self):
        s = self.state
        self.status.object = f"<span class='train-status-text'>{html.escape(s.train_status)}</span>"
        self.error.param.update(object=s.train_error, visible=bool(s.train_error))
        text = (f"Saved **{s.saved}** in checkpoints/: it is in the sidebar's checkpoint list now, for every tab."
                if s.saved else "")
        self.done.param.update(object=text, visible=bool(s.saved) and not s.training)
        self.sample.visible = bool(s.saved) and not s.training
        self.start.disabled, self.stop.disabled = s.training, not s.training
        for w in (self.preset, self.schedule, self.steps, self.name_input):
            w.disabled = s.training

    def __panel__(self):
        if not self.state.allowed:
            return pn.pane.Alert(f"Training from the browser is switched off on this server ({ALLOW_ENV}=0). "
                                 "Train with `python run.py train` instead.", alert_type="info",
                                 sizing_mode="stretch_width", css_classes=["train-disabled"])
        controls = pn.Column(
            pn.pane.HTML("<b>What to train</b>"), self.preset, pn.pane.HTML("<b>Learning-rate schedule</b>"),
            self.schedule, pn.Row(self.steps, self.name_input), pn.Row(self.start, self.stop), self.status,
            self.error, self.done, self.sample, styles={"flex": "2 1 0"}, min_width=360)
        plots = pn.Column(self.loss_pane, self.lr_pane, sizing_mode="stretch_width", styles={"flex": "3 1 0"},
                          min_width=420)
        return pn.Row(controls, plots, sizing_mode="stretch_width", css_classes=["train-panel"])


class ModelTab(pn.viewable.Viewer):
    """The checkpoint page, then training live."""

    state = param.ClassSelector(class_=ModelState)

    def __panel__(self):
        from ..ui.base import rule

        intro = ("<h2>Train a small model live</h2><p>Seed 002: the masked-diffusion loss (the ELBO's "
                 "weighted masked-LM loss) falling as the model learns, under a cosine, linear or constant "
                 "learning-rate schedule. Stop saves; the new checkpoint can then be sampled in every tab.</p>")
        return pn.Column(CheckpointPage(state=self.state), rule(), pn.pane.HTML(intro),
                         TrainingPanel(state=self.state), sizing_mode="stretch_width", css_classes=["model-tab"])


def build(explorer):
    """(ModelState, its view) for the app's tab list."""
    state = ModelState(explorer)
    return state, ModelTab(state=state)
