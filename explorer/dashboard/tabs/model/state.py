"""The Model tab's state: the session model's metadata, and one small model trained live from the browser.

Training ("Training with the ELBO": loss curves per LR schedule, explorer/names.py) runs as a runtime.tasks.Task
bound to the session's device, so it takes turns with every session's runs and uses the device queue's
precision; explorer.train.Trainer is the CLI's loop. Its records reach the UI thread through the Task's
dispatch, a few batches a second, and are kept here as plain lists for the view to draw. One training
per session; Stop and closing the session both save, under a new name in checkpoints/ that every tab
of this user's sessions can then sample from (runtime/owners.py: other users do not see it, and each
keeps at most MDLM_EXPLORER_USER_CHECKPOINTS of them, default 3). A served dashboard trains only when
its operator allows it (`serve --allow-training`, or MDLM_EXPLORER_ALLOW_TRAINING=1): each run costs a
core for minutes and a file on the server. Outside a server (a script, a notebook) it is on unless
MDLM_EXPLORER_ALLOW_TRAINING=0. MDLM_EXPLORER_MAX_TRAININGS caps the trainings running at once across
sessions (default 2). Nothing is downloaded.
"""
from __future__ import annotations

import logging
import os
import re
import shlex
import time
from dataclasses import fields

import numpy as np
import param

from ....checkpoint import checkpoints_dir
from ....names import LR_SCHEDULES
from ....train import TrainConfig, Trainer
from ... import checkpoints
from ...runtime import owners
from ...runtime.cache import TRAINING_LOCK, TRAINING_NAMES
from ...runtime.queue import device_queue
from ...runtime.tasks import Task
from ..base import TabState
from .meta import schedule_columns

log = logging.getLogger(__name__)

ALLOW_ENV = "MDLM_EXPLORER_ALLOW_TRAINING"
MAX_ENV = "MDLM_EXPLORER_MAX_TRAININGS"  # trainings at once in one server process (all sessions)
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
UPDATE_INTERVAL = 0.3  # seconds between UI updates while training: a few a second, not one per step
EARLIER_MAX = 4  # earlier runs kept for the overlay ("Training with the ELBO" compares three schedules)
# Tiny models on a CPU: fp32 is ~2x faster than bf16 autocast; save only at the end.
PRESETS = {
    "patterns": dict(corpus="patterns", block_size=24, n_layer=2, n_head=4, n_embd=64, time_conditioning="adaln",
                     weighting="uniform", batch_size=64, lr=3e-3, warmup_steps=50, eval_every=100,
                     eval_sequences=256, max_steps=2000),  # ~45 ms a step: about 1.5 min
    "shakespeare": dict(corpus="shakespeare", block_size=64, n_layer=2, n_head=4, n_embd=96, batch_size=32,
                        lr=2e-3, warmup_steps=100, eval_every=200, eval_sequences=64, max_steps=2000),  # ~3 min
}


OFF_TEXT = ("training from the browser is off on this server: its operator turns it on with "
            f"`python run.py serve --allow-training` (or {ALLOW_ENV}=1)")


def training_allowed(served: bool) -> bool:
    """MDLM_EXPLORER_ALLOW_TRAINING when set (1/0, true/false, yes/no, on/off); unset, off for a served
    session (a class server stays locked down unless its operator says otherwise) and on elsewhere."""
    value = os.environ.get(ALLOW_ENV, "").strip().lower()
    if not value:
        return not served
    return value not in ("0", "false", "no", "off")


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
    """my-<preset>, my-<preset>-2, ...: the first that is neither a file nor being trained."""
    base, n = f"my-{preset}", 1
    while (f"{base}-{n}" if n > 1 else base) in existing or (f"{base}-{n}" if n > 1 else base) in TRAINING_NAMES:
        n += 1
    return f"{base}-{n}" if n > 1 else base


def free_name(name: str, existing) -> str:
    """`name`, or name-2, name-3 ... if a file of that name appeared while training (another process)."""
    n, candidate = 1, name
    while candidate in existing:
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def cli_command(cfg: TrainConfig, name: str) -> str:
    """The `run.py train` command that reproduces this run (stored in the checkpoint's commands)."""
    default = TrainConfig()
    flags = []
    for f in fields(TrainConfig):
        value = getattr(cfg, f.name)
        if value != getattr(default, f.name) and f.name not in ("device", "save_every"):
            flags += ["--" + f.name.replace("_", "-"), str(value)]
    return "python run.py " + shlex.join(["train", "--out", name, *flags]) + "  # started from the dashboard"


class LiveProgress:
    """The latest train step, validation figure and speed of a run (worker thread), as one status line."""

    def __init__(self, total: int):
        self.total, self.step, self.loss, self.lr = total, 0, float("nan"), 0.0
        self.val: float | None = None
        self.speed: float | None = None

    def add(self, record: dict) -> None:
        if record["type"] == "train":
            self.step, self.loss, self.lr = record["step"], record["loss"], record["lr"]
            self.speed = record.get("tokens_per_s", self.speed)
        else:
            self.val = record["nats_per_char"]

    def text(self) -> str:
        val = f" · val {self.val:.3f}" if self.val is not None else ""
        speed = f" · {self.speed:,.0f} chars/s" if self.speed is not None else ""
        return f"step {self.step:,} of {self.total:,} · loss {self.loss:.3f}{val} · lr {self.lr:.2e}{speed}"


class TrainingTask(Task):
    """Browser training as a Task: its result is {name, step, note} of the checkpoint saved."""

    def done_status(self, result) -> str:
        return f"saved checkpoints/{result['name']}.safetensors at step {result['step']:,}{result['note']}"


class ModelState(TabState):
    """The metadata of the session's model, and one live training run with its curves."""

    URL_PARAMS = ("preset", "lr_schedule")

    preset = param.Selector(default="patterns", objects=list(PRESETS), label="Preset",
                            doc="What to train: the patterns toy (tiny model) or Tiny Shakespeare (small model)")
    lr_schedule = param.Selector(default=LR_SCHEDULES[0], objects=list(LR_SCHEDULES), label="LR schedule",
                                 doc="Learning rate after warmup (explorer.train.lr_at): cosine or linear decay "
                                     "to 10% of the peak, or constant")
    train_steps = param.Integer(2000, bounds=(10, 20000), label="Steps", doc="Optimizer steps (Stop saves earlier)")
    new_name = param.String("", label="Save as", doc="Name of the new checkpoint in checkpoints/ (letters, digits, - _)")
    train = param.Event(label="Train", doc="Start training a new model with these settings")
    stop_training = param.Event(label="Stop and save", doc="Stop training and save the model as it is now")
    sample_saved = param.Event(label="Sample from it", doc="Load the model just saved in every tab")
    clear_earlier = param.Event(label="Clear earlier runs", doc="Remove the earlier runs drawn beside this one")

    # Results, set on the UI thread only (the training's progress, status and error are its Task's).
    meta = param.Dict(default={}, doc="Metadata of the session's model (checkpoint.read_metadata)")
    saved = param.String("", doc="Name of the checkpoint this session saved last")
    run_id = param.Integer(0, doc="Bumped when a training starts: live curves clear")
    n_records = param.Integer(0, doc="Bumped when records arrive: live curves draw the new ones")
    earlier_id = param.Integer(0, doc="Bumped when `earlier` changes: the earlier runs' curves are redrawn")

    def __init__(self, session, owner: str | None = None, **params):
        """owner: who the session's user is on a server (runtime/owners.session_owner), None outside one."""
        super().__init__(session, **params)
        self.owner = owner
        self.allowed = training_allowed(served=owner is not None)
        self.train_points: list[tuple[int, float, float]] = []  # (step, loss, lr) of this session's run
        self.val_points: list[tuple[int, float]] = []  # (step, held-out nats/char)
        # The session's earlier runs, oldest first (at most EARLIER_MAX), drawn beside the live one so
        # that cosine, linear and constant runs can be compared as "Training with the ELBO" does: dicts of label,
        # train [(step, loss)], val [(step, nats/char)] and lr [(step, lr)]
        self.earlier: list[dict] = []
        self._run_label = ""
        self._closing = False
        self.task = TrainingTask("train", session.device, self.dispatch)
        self.task.label = "training"  # its notices read "training failed: …" (the worker keeps "train")
        self.task.param.watch(self._saved, "result")
        self.new_name = suggest_name(self.preset, checkpoints.available(owner=None))  # others' names are taken too
        self.on_model_changed()

    def dispatch(self, callback) -> None:
        """Run `callback` on the UI thread: the session's dispatch (read when called), or nothing once
        the session closed (no page to update). The training's results and the view's drawing both
        come this way."""
        if not self._closing:
            self.session.dispatch(callback)

    def on_model_changed(self) -> None:
        model = self.session.model
        self.meta = dict(getattr(model, "meta", None) or {}) if model is not None else {}

    def train_config(self, find_data: bool = True) -> TrainConfig:
        """The TrainConfig of the chosen preset, schedule and steps (ValueError says what is missing).
        find_data=False: without looking for the corpus file (enough to draw the LR schedule)."""
        opts = dict(PRESETS[self.preset], lr_schedule=self.lr_schedule, max_steps=self.train_steps)
        opts["warmup_steps"] = min(opts["warmup_steps"], max(1, self.train_steps // 10))
        opts["eval_every"] = min(opts["eval_every"], max(1, self.train_steps // 5))
        device = self.session.device
        # the device queue's precision (serve --precision), as every other model call of the dashboard
        opts.update(device=str(device), precision=device_queue(device).precision,
                    save_every=self.train_steps + 1)  # saved once, at the end or on Stop
        if self.preset == "shakespeare" and find_data:
            path = checkpoints.local_shakespeare()  # a verified copy on this server; never downloads
            if path is None:
                raise ValueError("Tiny Shakespeare is not on this server: run `python run.py train --corpus "
                                 "shakespeare ...` once with network access to cache it, or train on patterns")
            opts["data"] = str(path)
        return TrainConfig(**opts)

    def planned_schedule(self) -> dict[str, np.ndarray]:
        """Columns (step, lr) of the schedule these settings will use, before any training."""
        return schedule_columns(self.train_config(find_data=False))[0]

    # ------------------------------------------------------------------ starting and stopping (UI thread)

    def start_training(self, *, wait: bool = False) -> bool:
        """Validate the name and settings, then train in the background. False (the Task's error says
        why) if not."""
        name, preset = self.new_name.strip(), self.preset
        problem, cfg = self._start_problem(name), None
        if not problem:
            try:
                cfg = self.train_config()
            except ValueError as e:
                problem = str(e)
        problem = problem or self._claim(name)
        if problem:
            self.task.error = problem
            return False
        self._keep_run()
        self._run_label = f"{self.lr_schedule} · {preset} · {cfg.max_steps:,} steps"
        self.train_points, self.val_points = [], []
        self.param.update(saved="", run_id=self.run_id + 1, n_records=0)
        self.task.start(lambda job, report: self._train(job, report, cfg, name, preset),
                        status=f"starting {preset} training as {name} …", wait=wait)
        return True

    def _start_problem(self, name: str) -> str:
        if not self.allowed:
            return OFF_TEXT
        if self.task.running:
            return "a training run is going: stop it before starting another"
        return name_problem(name, checkpoints.available(owner=None))  # one folder: every user's names are taken

    def _claim(self, name: str) -> str:
        """Register `name` as being trained in this process ('' = done), within the server's limit and
        the user's quota (checked together, so two of a user's sessions cannot both take the last place)."""
        with TRAINING_LOCK:
            limit = int(os.environ.get(MAX_ENV, "2") or 2)
            if name in TRAINING_NAMES:
                return f"{name!r} is being trained in another session"
            if len(TRAINING_NAMES) >= limit:
                return f"this server already runs {len(TRAINING_NAMES)} training(s), its limit: try again later"
            problem = owners.quota_problem(self.owner)
            if problem:
                return problem
            TRAINING_NAMES.add(name)
            owners.start(name, self.owner)
        return ""

    def stop(self) -> None:
        """Stop the run; the work saves what it has (with its held-out NELBO) and then reports."""
        if self.task.running:
            # the job only, not Task.cancel: the task stays running until the checkpoint is saved
            self.task.worker.cancel()
            self.task.status = "stopping: saving and measuring the held-out NELBO …"

    def close(self) -> None:
        """The session is gone: stop the run; it saves without measuring and reports to nobody."""
        self._closing = True
        self.task.worker.cancel()

    def _keep_run(self) -> None:
        """The run drawn so far joins the earlier runs (the oldest goes beyond EARLIER_MAX)."""
        if not self.train_points:
            return
        run = {"label": self._run_label, "train": [(s, loss) for s, loss, _ in self.train_points],
               "val": list(self.val_points), "lr": [(s, lr) for s, _, lr in self.train_points]}
        self.earlier = [*self.earlier, run][-EARLIER_MAX:]
        self.earlier_id += 1

    @param.depends("clear_earlier", watch=True)
    def _clear_earlier(self):
        self.earlier = []
        self.earlier_id += 1

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
            self.session.show_tab = "Explore"  # where its samples appear: the button must show them

    @param.depends("preset", watch=True)
    def _preset_chosen(self):
        self.train_steps = PRESETS[self.preset]["max_steps"]
        if not self.task.running and self.new_name.startswith("my-"):
            self.new_name = suggest_name(self.preset, checkpoints.available(owner=None))

    # ------------------------------------------------------------------ the training (the Task's worker)

    def _train(self, job, report, cfg: TrainConfig, name: str, preset: str) -> dict:
        """Train, send the records as they come, save; the result names the checkpoint saved."""
        try:
            trainer = Trainer(cfg, checkpoints_dir() / f"{name}.safetensors", command=cli_command(cfg, name))
            report(0, cfg.max_steps, f"training {trainer.model.n_params:,} parameters on {preset} …")
            self._run_trainer(job, report, trainer)
            return self._save(report, trainer, name)
        finally:
            with TRAINING_LOCK:
                TRAINING_NAMES.discard(name)
                owners.finish(name)

    def _run_trainer(self, job, report, trainer: Trainer) -> None:
        """Step until done or stopped, sending the records in batches every UPDATE_INTERVAL seconds."""
        progress, batch, last = LiveProgress(trainer.cfg.max_steps), [], time.monotonic()
        for record in trainer.run():
            batch.append(record)
            progress.add(record)
            if job.cancelled:  # (checking it also lends the device to waiting runs)
                break
            if time.monotonic() - last >= UPDATE_INTERVAL:
                self._send(job, report, batch, progress)
                batch, last = [], time.monotonic()
        if batch:
            self._send(job, report, batch, progress)

    def _send(self, job, report, batch: list[dict], progress: LiveProgress) -> None:
        self.task.dispatch(lambda: self._records(job, batch))
        report(progress.step, progress.total, progress.text())

    def _save(self, report, trainer: Trainer, name: str) -> dict:
        """Save under `name` (or a free variant if that file appeared meanwhile): with the held-out
        NELBO, except when the session closed (nobody waits for it)."""
        metrics = None
        if not self._closing:
            report(trainer.state["step"], trainer.cfg.max_steps, "measuring the held-out NELBO, then saving …")
            metrics = trainer.final_metrics()
        final = free_name(name, checkpoints.available(owner=None))
        # recorded first: the file is never listed to other users, not even for a moment
        owners.record(final, self.owner)
        try:
            path = trainer.save(metrics, path=trainer.out.with_name(f"{final}.safetensors"))
        except BaseException:
            owners.record(final, None)
            raise
        log.info("saved %s at step %d", path, trainer.state["step"])
        note = "" if final == name else f" ({name} appeared meanwhile, so it was saved as {final})"
        if metrics and "nelbo_nats_per_char" in metrics:
            note += f" · NELBO {metrics['nelbo_nats_per_char']:.3f} nats/char"
        return {"name": final, "step": trainer.state["step"], "note": note}

    # ------------------------------------------------------------------ results (UI thread)

    def _records(self, job, records: list[dict]) -> None:
        if job is not self.task.worker.current:
            return  # a run this session started before (its last batch after a new start)
        for r in records:
            if r["type"] == "train":
                self.train_points.append((r["step"], r["loss"], r["lr"]))
            else:
                self.val_points.append((r["step"], r["nats_per_char"]))
        self.n_records = len(self.train_points) + len(self.val_points)

    def _saved(self, event) -> None:
        """The Task finished with a checkpoint: list it in the sidebar and offer "Sample from it"."""
        if event.new is None:
            return
        names = checkpoints.available(owner=self.owner)
        self.session.param.checkpoint.objects = names  # the new one can be chosen in the sidebar now
        self.saved = event.new["name"]
        if self.new_name.strip() in names:
            self.new_name = suggest_name(self.preset, names)
