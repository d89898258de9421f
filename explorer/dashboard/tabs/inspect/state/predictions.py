"""Inspect's predictions at t: the model's top-k candidates at each masked position of the tab's text,
masked at ratio t from the mask seed, as a runtime Task; cached process-wide (predict.py)."""
from __future__ import annotations

from ....runtime.tasks import Task
from ..predict import cached_prediction, predict


class Predictions:
    """`task.result`: metrics.topk_predictions for the text, t, mask and k the tab asked for, with
    that text, t and k (InspectState.stale compares them with the knobs now)."""

    def __init__(self, tab, device, dispatch):
        self.tab = tab
        self.task = Task("predictions", device, dispatch)

    def refresh(self) -> bool:
        """Show the cached predictions for (model, text, t, mask, k), or compute them in the background;
        False when there is nothing to predict (the tab not shown yet, no usable model, no text)."""
        tab = self.tab
        if not tab.active or not tab.usable():
            return False
        text = tab.shown_text()
        if not text:
            self.task.clear()
            return False
        model, t, seed, k = tab.model, float(tab.t), tab.mask_seed, tab.k
        cached = cached_prediction(model, text, t, seed, k)
        if cached is not None:
            self.task.show(cached, "from cache")
        else:
            self.task.start(lambda job, report: _predict(model, text, t, seed, k), status="predicting …")
        return True


def _predict(model, text: str, t: float, mask_seed: int, k: int) -> dict:
    """predict.predict on the Task's thread (a name of its own, for tests that hold it back)."""
    return predict(model, text, t, mask_seed, k)
