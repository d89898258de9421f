"""Explore's per-position confidence: which of the three views is shown, and the one that costs model
calls, the model's mean confidence at masking ratio t on validation text, computed as a runtime Task."""
from __future__ import annotations

import param

from ....mean_confidence import mean_confidence_table
from ....runtime.tasks import Task
from ...base import TabState

# Every decided position at the shown step, with the confidence it was committed at (the default: it
# fills as the run goes, whatever the steps); the proposals of that one step; or the model's mean over
# validation text at ratio t.
CONFIDENCE_VIEWS = ("when committed", "this step", "mean at t (validation)")
MEAN_VIEW = CONFIDENCE_VIEWS[2]


class ConfidenceState(TabState):
    """The confidence view's choice and t; `confidence` is the Task whose result is the validation
    mean (a DataFrame: mean_confidence.mean_confidence_table), computed only while that view is chosen
    (again when the session's length changes: the tab watches it). The other two views read the run's
    frames (run.py)."""

    confidence_view = param.Selector(default=CONFIDENCE_VIEWS[0], objects=list(CONFIDENCE_VIEWS),
                                     label="Show", doc="Scores of this step's proposals, or the model's mean "
                                     "per-position confidence at masking ratio t on validation text")
    confidence_t = param.Number(0.5, bounds=(0.05, 0.95), step=0.05, label="t",
                                doc="Masking ratio for the mean per-position confidence")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        self.confidence = Task("mean confidence", session.device, session.dispatch, session.share)

    @param.depends("confidence_view", "confidence_t", watch=True)
    def _refresh_mean_confidence(self):
        """The model's mean per-position confidence at ratio t on held-out text (one computation and
        one cache for the whole dashboard: mean_confidence.py)."""
        model = self.session.model
        if self.confidence_view != MEAN_VIEW or model is None:
            return
        if model.config.kind != "diffusion":
            self.confidence.error = "the validation mean is measured on masked text: pick a diffusion model"
            return
        t, length = round(float(self.confidence_t), 3), self.session.length
        self.confidence.start(lambda job, report: mean_confidence_table(model, t, length))

    def close(self) -> None:
        self.confidence.close()
        super().close()
