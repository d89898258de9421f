"""Inspect's several texts and t in one figure (the notebooks' stacked rows: "The Forward Process" at
t = 0, 0.2, ..., 1 and its one sequence at 0.2, 0.5, 0.8 with accuracy each, "Training with the ELBO"'s
three quotes at t = 0.5 and 0.4, the guide's one sentence at every t): each text masked at each t from
the tab's mask seed, with the model's predictions, as a runtime Task. Every row is exactly the tab's
predictions for that text and t alone (predict.py, whose cache they share).

A link carries the lists as `inspect.ts=0,0.2,0.4` and `inspect.texts=First Citizen:|To be, or not`;
both are capped (MAX_TS, MAX_TEXTS) so a link cannot ask for unbounded work.
"""
from __future__ import annotations

import math

from ....runtime.tasks import Task, TaskCancelled
from ..predict import cached_prediction, predict

MAX_TS = 11  # 0, 0.1, ..., 1.0
MAX_TEXTS = 5
TEXT_SEP = "|"  # between texts: survives a link's encoding (%7C) and is no character of the shipped models


def parse_ts(text: str) -> tuple[float, ...]:
    """'0, 0.2,0.4' -> (0.0, 0.2, 0.4): masking ratios in [0, 1], duplicates dropped, at most MAX_TS
    (ValueError naming the bad item otherwise)."""
    out: list[float] = []
    for item in (s.strip() for s in str(text).split(",")):
        if not item:
            continue
        try:
            t = float(item)
        except ValueError:
            raise ValueError(f"{item!r} is not a number") from None
        if not math.isfinite(t) or not 0.0 <= t <= 1.0:
            raise ValueError(f"{item!r} is not a masking ratio from 0 to 1")
        if t not in out:
            out.append(t)
    if len(out) > MAX_TS:
        raise ValueError(f"{len(out)} values of t; at most {MAX_TS}")
    return tuple(out)


def parse_texts(text: str) -> tuple[str, ...]:
    """'First Citizen: | To be' -> the texts between '|', their outer spaces and newlines dropped, empty
    ones left out, at most MAX_TEXTS (ValueError otherwise)."""
    out = tuple(s.strip() for s in str(text).split(TEXT_SEP) if s.strip())
    if len(out) > MAX_TEXTS:
        raise ValueError(f"{len(out)} texts; at most {MAX_TEXTS} (separated by {TEXT_SEP!r})")
    return out


def format_ts(ts) -> str:
    return ",".join(f"{t:g}" for t in ts)


class SeveralPredictions:
    """`task.result`: {"rows": [predictions of one (text, t), text by text, t by t], "texts", "ts",
    "mask_seed", "k"}, each row what predict.predict gives for it alone."""

    def __init__(self, tab, device, dispatch):
        self.tab = tab
        self.task = Task("several texts and t", device, dispatch)

    def refresh(self) -> bool:
        """Show the rows for the tab's texts and t now (from the cache when all are there, else
        computed in the background); False when there is nothing to show."""
        tab = self.tab
        if not tab.active or not tab.usable() or not tab.several_on():
            self.task.clear()
            return False
        texts, ts = tab.several_texts(), tab.several_ts()
        if not texts:
            self.task.clear()
            return False
        model, seed, k = tab.model, tab.mask_seed, tab.k
        asked = {"texts": texts, "ts": ts, "mask_seed": seed, "k": k}
        pairs = [(text, t) for text in texts for t in ts]
        cached = [cached_prediction(model, text, t, seed, k) for text, t in pairs]
        if all(row is not None for row in cached):
            self.task.show({**asked, "rows": cached}, "from cache")
        else:
            self.task.start(lambda job, report: _rows(job, report, model, pairs, seed, k, asked),
                            status=f"predicting {len(pairs)} rows …")
        return True


def _rows(job, report, model, pairs, seed: int, k: int, asked: dict) -> dict:
    rows = []
    for i, (text, t) in enumerate(pairs):
        if job.cancelled:
            raise TaskCancelled(None)
        rows.append(predict(model, text, t, seed, k))
        report(i + 1, len(pairs))
    return {**asked, "rows": rows}
