"""The one place Inspect asks the model for predictions: metrics.topk_predictions for one text at ratio
t and the mask the forward view draws from the mask seed, labelled with what it was asked and cached
process-wide (runtime.cache.INSPECT). The tab's predictions at t and its several texts and t both read
it, so one (text, t, mask seed, k) is computed once and shows the same numbers in either view."""
from __future__ import annotations

from ....metrics import topk_predictions
from ...runtime.cache import INSPECT, model_key
from .masking import draw_mask, positions


def prediction_key(model, text: str, t: float, mask_seed: int, k: int) -> tuple:
    return ("preds", model_key(model), text, float(t), int(mask_seed), int(k))


def cached_prediction(model, text: str, t: float, mask_seed: int, k: int) -> dict | None:
    """The cached predictions for these arguments, or None."""
    return INSPECT.get(prediction_key(model, text, t, mask_seed, k))


def predict(model, text: str, t: float, mask_seed: int, k: int) -> dict:
    """metrics.topk_predictions of `text` at the mask draw_mask gives (t, mask seed), with its text, t
    and k added, cached; a model call unless cached."""
    def make() -> dict:
        mask = draw_mask(positions(model, text), t, mask_seed)  # the mask the forward view draws
        # the seed draws a uniform-state model's noise tokens too (masking.draw_noised: the forward view's)
        result = topk_predictions(model, text, float(t), mask=mask, k=k, seed=mask_seed)
        result["text"], result["t"], result["k"] = text, float(t), k
        return result
    return INSPECT.get_or_make(prediction_key(model, text, t, mask_seed, k), make)
