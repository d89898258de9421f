"""The model's mean per-position confidence at masking ratio t on validation text: one sample size and
one process-wide cache (runtime/cache.py's MEAN_CONFIDENCE) for every view that shows it (Explore, Inspect)."""
from __future__ import annotations

from ..metrics import per_position_confidence
from . import checkpoints
from .runtime.cache import MEAN_CONFIDENCE, model_key

# Validation rows per table: each position is masked in about t * ROWS of them. 32 rows take ~2 s at
# 256 characters for the Shakespeare model on a busy CPU core (Inspect recomputes as its t slider
# moves), and at t = 0.5 average ~16 masked draws per position, enough for a readable per-position mean.
ROWS = 32
SEED = 0  # the same masks every time: a table is reproducible, and tables at two t are nested (metrics.py)


def _t(t: float) -> float:
    """t as measured and cached: two decimals (the sliders' resolution), at least 0.01 (at t = 0
    nothing is masked, so there would be nothing to average)."""
    return min(max(round(float(t), 2), 0.01), 1.0)


def _key(model, t: float, length: int) -> tuple:
    return (model_key(model), _t(t), int(length))


def cached_mean_confidence(model, t: float, length: int):
    """The cached table of mean_confidence_table, or None (cheap: for the UI thread)."""
    return MEAN_CONFIDENCE.get(_key(model, t, length))


def mean_confidence_table(model, t: float, length: int):
    """metrics.per_position_confidence on ROWS validation rows of `length` characters at ratio t
    (columns position, confidence, accuracy, n_masked; attrs["t"] is the t measured at), cached per
    (model, t, length). Costs model calls: run it on a Task. Raises ValueError when the checkpoint has
    no validation data here."""
    key = _key(model, t, length)

    def measure():
        tokens = checkpoints.validation_tokens(model, int(length), ROWS)
        table = per_position_confidence(model, tokens, t=key[1], seed=SEED)
        table.attrs["t"] = key[1]
        return table
    return MEAN_CONFIDENCE.get_or_make(key, measure)
