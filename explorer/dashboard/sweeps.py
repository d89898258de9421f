"""Quality vs steps for the dashboard: explorer.experiments.sweep run in the background, cached per
(checkpoint, knobs), cancelled when the knobs change. The sweep itself lives in experiments.py.
"""
from __future__ import annotations

import logging
import os

import param

from ..experiments import QUALITY_METRICS
from ..sampling.config import STRATEGIES
from .runtime import checkpoints
from .runtime.cache import SWEEPS
from .runtime.tasks import Worker

log = logging.getLogger(__name__)

STEPS_GRID = (1, 2, 4, 8, 16, 32, 64)
cache_get, cache_put = SWEEPS.get, SWEEPS.put  # key -> (table, summary), shared by every session


AUTO_SWEEP_ENV = "MDLM_EXPLORER_AUTO_SWEEP"


def auto_sweep_default() -> bool:
    """Whether a new session computes quality vs steps after each run: on, unless the server was
    started with --no-auto-sweep (MDLM_EXPLORER_AUTO_SWEEP=0). A class of many sessions on one CPU
    turns it off: each sweep costs many runs' worth of device time. Compute still works."""
    return os.environ.get(AUTO_SWEEP_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class SweepState(param.Parameterized):
    """The quality-vs-steps part of ExplorerState (kept apart to keep each file short)."""

    sweep_strategies = param.ListSelector(default=["confidence", "random"], objects=list(STRATEGIES),
                                          label="Strategies", doc="Strategies compared in quality vs steps")
    sweep_x = param.Selector(default="steps", objects=["steps", "nfe"], label="x axis",
                             doc="Plot against denoising steps or model calls (NFE)")
    sweep_metric = param.Selector(default="auto", objects=["auto", *QUALITY_METRICS], label="Quality metric",
                                  doc="auto: pattern quality for patterns, gen-PPL with an AR judge, "
                                      "else the valid-word fraction")
    sweep_samples = param.Integer(4, bounds=(1, 64), label="Samples per point",
                                  doc="Samples per (steps, strategy) point: more = tighter bands, slower")
    sweep_auto = param.Boolean(True, label="Compute after each run",
                               doc="Start the quality-vs-steps sweep when a run finishes (cached)")
    compute_sweep = param.Event(label="Compute", doc="Compute quality vs steps for the current knobs")
    stop_sweep = param.Event(label="Stop", doc="Stop the quality-vs-steps sweep")

    sweep_progress = param.Integer(0, bounds=(0, 100))
    sweep_status = param.String("")
    sweep_error = param.String("")
    sweep_result = param.Parameter(default=None, doc="(table, summary) DataFrames from experiments.sweep")
    sweep_running = param.Boolean(False)

    def _init_sweeps(self, device) -> None:
        self._sweeps = Worker("sweep", device)
        self._judge_name = None

    def sweep_key(self):
        cfg = self.sampler_config().to_dict()
        for varied in ("steps", "strategy"):
            cfg.pop(varied)
        path = getattr(self.model, "path", None)
        mtime = path.stat().st_mtime_ns if path is not None and path.exists() else None
        return (self.model_info.get("name"), mtime, tuple(sorted(cfg.items())), self.length, self.template,
                tuple(self.sweep_strategies), self.sweep_samples, self._judge_name)

    def start_sweep(self, *, wait: bool = False) -> bool:
        """Show the cached sweep for these knobs, or compute it in the background."""
        if self.model is None or not self.sweep_strategies:
            return False
        if self.model.config.kind != "diffusion":
            self.sweep_status = "quality vs steps compares diffusion samplers: pick a diffusion model"
            return False
        try:
            key, config, canvas = self.sweep_key(), self.sampler_config(), self.canvas()
        except ValueError as e:
            self.sweep_error = str(e)
            return False
        self.sweep_error = ""
        cached = cache_get(key)
        if cached is not None:
            self._sweeps.cancel()
            self.sweep_result, self.sweep_progress, self.sweep_running = cached, 100, False
            self.sweep_status = "from cache"
            return True
        # the template as typed (stripped as start_canvas strips it): the sweep parses it as the sampler does
        template = self.template.strip() or None
        args = (self.model, config, canvas, template, list(self.sweep_strategies), self.sweep_samples, self.seed, key)
        self.sweep_progress, self.sweep_running, self.sweep_status = 0, True, "computing …"
        self._sweeps.submit(lambda job: self._sweep_job(job, *args), wait=wait)
        return True

    def _sweep_job(self, job, model, config, canvas, template, strategies, n_samples, seed, key) -> None:
        from ..experiments import SweepCancelled, sweep

        grid = [s for s in STEPS_GRID if s <= max(canvas.n_generate, 1)] or [1]

        def progress(done, total):
            self.dispatch(lambda: self._sweep_progress(job, done, total))

        try:
            judge = checkpoints.load(self._judge_name, self.device) if self._judge_name else None
            result = sweep(model, config, {"steps": grid, "strategy": strategies}, n_samples=n_samples,
                           seed=seed, length=canvas.length, template=template, judge=judge,
                           progress=progress, cancel=lambda: job.cancelled,
                           include_ar=judge is not None and template is None)
        except SweepCancelled:
            return self.dispatch(lambda: self._sweep_done(job, None, "cancelled"))
        except Exception as e:  # a readable notice beside the plot
            log.exception("sweep failed")
            message = f"sweep failed: {e}"  # built now: Python clears `e` when the except block ends
            return self.dispatch(lambda: self._sweep_done(job, None, message))
        cache_put(key, result)
        self.dispatch(lambda: self._sweep_done(job, result, ""))

    def _sweep_progress(self, job, done: int, total: int) -> None:
        if self._sweeps.is_current(job):
            self.sweep_progress = int(100 * done / max(total, 1))
            self.sweep_status = f"{done} of {total} samples"

    def _sweep_done(self, job, result, message: str) -> None:
        if job is not self._sweeps.current:
            return
        self.sweep_running = False
        if result is None:
            self.sweep_status = message if message == "cancelled" else ""
            self.sweep_error = "" if message == "cancelled" else message
            return
        self.sweep_result, self.sweep_progress, self.sweep_status = result, 100, "done"

    def _cancel_sweep(self) -> None:
        if getattr(self, "_sweeps", None) is not None and self.sweep_running:
            self._sweeps.cancel()
            self.sweep_running, self.sweep_status = False, "cancelled (knobs changed)"

    def _after_run(self) -> None:
        if self.sweep_auto:
            self.start_sweep()

    def _choose_judge(self) -> None:
        self._judge_name = checkpoints.find_judge(self.model, self.param.checkpoint.objects) if self.model else None

    @param.depends("compute_sweep", watch=True)
    def _compute_clicked(self):
        self.start_sweep()

    @param.depends("stop_sweep", watch=True)
    def _stop_sweep_clicked(self):
        self._cancel_sweep()

    @param.depends("sweep_strategies", "sweep_samples", watch=True)
    def _sweep_knobs_changed(self):
        self._cancel_sweep()
        if self.sweep_auto and not self.running:
            self.start_sweep()
