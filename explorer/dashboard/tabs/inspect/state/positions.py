"""Inspect's mean confidence by position: the model's mean per-position confidence at the tab's t on
validation text, as a runtime Task (mean_confidence.py: cached per model, t and length, shared with
Explore's view of it)."""
from __future__ import annotations

from ....mean_confidence import cached_mean_confidence, mean_confidence_table
from ....runtime.tasks import Task


class PositionConfidence:
    """`task.result`: mean_confidence.mean_confidence_table at t (attrs["t"]: the t it was measured at)."""

    def __init__(self, tab, device, dispatch):
        self.tab = tab
        self.task = Task("per-position confidence", device, dispatch)

    def refresh(self) -> None:
        """The cached table for the model at t and its context, else computed in the background."""
        tab = self.tab
        if not tab.active or tab.tokens is None or not tab.usable():
            return
        model, t = tab.model, float(tab.t)
        length = model.config.block_size
        cached = cached_mean_confidence(model, t, length)
        if cached is not None:
            self.task.show(cached, "from cache")
        else:
            self.task.start(lambda job, report: mean_confidence_table(model, t, length),
                            status="mean confidence by position …")
