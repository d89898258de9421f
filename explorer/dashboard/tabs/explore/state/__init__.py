"""The Explore tab's state: the session's run as it streams in, the per-position confidence shown
beside it, quality vs steps computed after it, and several samples at once (no Panel here; the views
draw it).

ExploreState is made of four parts, each a TabState with its own knobs, results and background work,
one module each: run.py (the run and its live streaming), confidence.py (the confidence view and the
validation mean), quality.py (the quality sweep) and samples.py (several seeds and prompts at once). They share the tab's
one parameter namespace, so the URL, the sidebar and the views name every knob as before
(`explore.sweep_x`); what ties them together is below, and only here. Everything comes back to the UI
thread through the session's dispatch.
"""
from __future__ import annotations

from ....session import KNOBS
from .confidence import CONFIDENCE_VIEWS, MEAN_VIEW, ConfidenceState
from .quality import (
    AUTO_SWEEP_ENV,
    AUTO_SWEEP_SECONDS,
    STEPS_GRID,
    QualityState,
    auto_sweep_default,
    held_out_reference,
    sweep_grid,
)
from .run import LIVE_INTERVAL, START_GRACE, RunState, run_status, run_summary
from .samples import MAX_PROMPTS, MAX_SAMPLES, SamplesState

__all__ = ["MAX_PROMPTS", "MAX_SAMPLES", "AUTO_RUN_MAX_PARAMS", "AUTO_SWEEP_ENV", "AUTO_SWEEP_SECONDS", "CONFIDENCE_VIEWS", "LIVE_INTERVAL",
           "MEAN_VIEW", "START_GRACE", "STEPS_GRID", "ExploreState", "auto_sweep_default", "held_out_reference",
           "run_status", "run_summary", "sweep_grid"]

AUTO_RUN_MAX_PARAMS = 50_000_000  # auto-run stays on for models up to this size on a CPU


class ExploreState(RunState, ConfidenceState, QualityState, SamplesState):
    """The run the session's knobs produced (`frames` while it streams, `trajectory` once finished),
    the confidence view's choice, quality vs steps and several samples; `start_run`, `start_sweep` and
    `sample_several` start them."""

    URL_PARAMS = ("confidence_view", "confidence_t", "sweep_strategies", "sweep_x", "sweep_metric", "sweep_samples",
                  "samples", "prompts")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        session.param.watch(lambda *events: self._knob_changed(), list(KNOBS))
        session.param.watch(lambda *events: self._model_loaded(), "loaded")
        session.param.watch(lambda *events: self._refresh_mean_confidence(), "length")

    def _run_superseded(self) -> None:
        self.cancel_sweep()  # a new run (or none) makes the device's time the run's, not the old sweep's

    def _run_finished(self, traj) -> None:
        if self.several_on():  # the several samples follow the run they include, at the same knobs
            self.sample_several()
        if self.sweep_auto:
            self.auto_sweep(traj)

    def _knob_changed(self) -> None:
        self.cancel_sweep()  # its cache key no longer matches these knobs
        self.samples_task.clear()  # nor do the several samples: the next run's end starts them again
        s = self.session
        if s.quiet or s.model is None:
            return
        if self.auto_run and not self.held:
            if not self.wait_for_run_on_its_way():  # scrubbing: the run on its way ends first
                self.start_run()
        else:
            s.error = ""

    def _model_loaded(self) -> None:
        """A model is loaded and the knobs fitted: forget the last model's results, then run."""
        s = self.session
        self.reset_quality()
        self.confidence.clear()
        self.samples_task.clear()
        if s.model_info.get("n_params", 0) > AUTO_RUN_MAX_PARAMS and s.device.type == "cpu":
            self.auto_run = False  # a big model on a CPU: sample when asked, not per knob
        self._refresh_mean_confidence()
        if self.auto_run and not self.held:  # held: the run starts when Explore is first shown (on_shown)
            self.start_run()
