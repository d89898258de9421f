"""Inspect's predictions at t: the model's top-k candidates at each masked position of the tab's text,
masked at ratio t from the mask seed, as a runtime Task; cached process-wide (runtime.cache.INSPECT)."""
from __future__ import annotations

import numpy as np

from .....metrics import topk_predictions
from ....runtime.cache import INSPECT, model_key
from ....runtime.tasks import Task
from ..masking import positions


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
        model, t, k = tab.model, float(tab.t), tab.k
        mask = tab.mask(positions(model, text))  # drawn here: the prediction is at the mask the forward view draws
        key = ("preds", model_key(model), text, t, tab.mask_seed, k)
        cached = INSPECT.get(key)
        if cached is not None:
            self.task.show(cached, "from cache")
        else:
            self.task.start(lambda job, report: _predict(model, text, t, mask, k, key), status="predicting …")
        return True


def _predict(model, text: str, t: float, mask: np.ndarray, k: int, key: tuple) -> dict:
    """metrics.topk_predictions at the given mask, labelled with what it was asked, and cached."""
    result = topk_predictions(model, text, t, mask=mask, k=k)
    result["text"], result["t"], result["k"] = text, t, k
    INSPECT.put(key, result)
    return result
