"""Inspect's HoloViews figures: the mask-fraction check of the forward process, accuracy and mean
confidence vs t on validation text, and the mean confidence by position at t."""
from __future__ import annotations

import numpy as np

from ....plots import _hv
from ...ui.palette import FONT
from .markup import CORRECT, WRONG
from .masking import FRACTION_DRAWS


def _fontsize(presentation: bool) -> dict:
    f = FONT[presentation]
    return {"title": f["title"], "labels": f["plot"], "xticks": f["plot"], "yticks": f["plot"], "legend": f["plot"]}


def fraction_plot(table, t: float, actual: float | None, presentation: bool = False):
    """Seed 003's masking statistics: the fraction masked vs t (mean ± std over draws), y = t, and
    this text's own fraction at the current t."""
    hv = _hv()
    kd, vd = hv.Dimension("t", label="masking ratio t"), hv.Dimension("fraction", label="fraction masked", range=(0, 1))
    spread = hv.ErrorBars((table["t"], table["masked_fraction"], table["std"]), kd, [vd, "std"]).opts(
        line_color=CORRECT)
    actual_pts = hv.Scatter(([t], [actual if actual is not None else np.nan]), kd, vd, label="this text").opts(
        color=WRONG, marker="diamond", size=14)
    return (hv.Curve(([0, 1], [0, 1]), kd, vd, label="expected (y = t)").opts(color="#777", line_dash="dashed")
            * hv.Curve((table["t"], table["masked_fraction"]), kd, vd, label=f"mean of {FRACTION_DRAWS} draws").opts(
                color=CORRECT, line_width=2) * spread * actual_pts
            * hv.VLine(t).opts(color="#999", line_width=1)).opts(
        title="Forward process: fraction masked vs t", legend_position="top_left", height=300, responsive=True,
        fontsize=_fontsize(presentation), show_grid=True, toolbar=None)


def accuracy_plot(table, t: float, presentation: bool = False):
    """Seeds 002/003: argmax accuracy at masked positions vs t, with the mean top-1 probability."""
    hv = _hv()
    empty = table is None or not len(table)
    xs = [] if empty else table["t"]
    kd = hv.Dimension("t", label="masking ratio t", range=(0, 1))
    vd = hv.Dimension("value", label="accuracy, confidence", range=(0, 1))
    acc = [] if empty else table["accuracy"]
    conf = [] if empty else table["mean_confidence"]
    return (hv.Curve((xs, acc), kd, vd, label="accuracy (top-1)").opts(color=CORRECT, line_width=3)
            * hv.Scatter((xs, acc), kd, vd).opts(color=CORRECT, size=8, tools=["hover"])
            * hv.Curve((xs, conf), kd, vd, label="mean confidence").opts(color=WRONG, line_width=2, line_dash="dashed")
            * hv.Scatter((xs, conf), kd, vd).opts(color=WRONG, size=7, marker="square", tools=["hover"])
            * hv.VLine(t).opts(color="#999", line_width=1)).opts(
        title="Accuracy vs masking ratio (validation)", legend_position="top_right", height=300, responsive=True,
        fontsize=_fontsize(presentation), show_grid=True, toolbar=None)


def positions_plot(table, t: float, presentation: bool = False):
    """Seed 002: the mean max-probability at each position when it is masked, at ratio t (the t the
    table was measured at, when it says)."""
    hv = _hv()
    conf = np.zeros(0) if table is None else table["confidence"].to_numpy(dtype=float)
    edges = np.arange(len(conf) + 1) - 0.5
    shown = t if table is None else table.attrs.get("t", t)
    title = (f"Mean confidence by position, t = {shown:.2f} (validation)" if table is not None
             else "Mean confidence by position (computing …)")
    return hv.Histogram((edges, np.nan_to_num(conf)), kdims=[hv.Dimension("position")],
                        vdims=[hv.Dimension("confidence", label="mean max-probability", range=(0, 1))]).opts(
        color=CORRECT, line_color=None, alpha=0.8, title=title, height=260, responsive=True,
        xlim=(-0.5, max(len(conf), 1) - 0.5),
        fontsize=_fontsize(presentation), show_grid=True, toolbar=None, tools=["hover"])
