"""Inspect's HoloViews figures: the mask-fraction check of the forward process, accuracy and mean
confidence vs t on validation text, and the mean confidence by position at t."""
from __future__ import annotations

import numpy as np

from ....plots import _hv
from ...ui.palette import FONT
from .markup import CORRECT, SHOWN_AS, WRONG
from .masking import FRACTION_DRAWS


def _fontsize(presentation: bool) -> dict:
    f = FONT[presentation]
    return {"title": f["title"], "labels": f["plot"], "xticks": f["plot"], "yticks": f["plot"], "legend": f["plot"]}


def fraction_plot(table, t: float, actual: float | None, presentation: bool = False):
    """The masking statistics of "The Forward Process": the fraction masked vs t (mean ± std over draws), y = t,
    and this text's own fraction at the current t."""
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
    """Argmax accuracy at masked positions vs t, with the mean top-1 probability ("Training with the ELBO",
    "The Forward Process")."""
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


def positions_plot(table, t: float, presentation: bool = False, missing: bool = False):
    """As in "Training with the ELBO": the mean max-probability at each position when it is masked, at ratio t
    (the t the table was measured at, when it says). missing: there is no held-out text to measure it on
    (the title says so instead of "computing")."""
    hv = _hv()
    conf = np.zeros(0) if table is None else table["confidence"].to_numpy(dtype=float)
    edges = np.arange(len(conf) + 1) - 0.5
    shown = t if table is None else table.attrs.get("t", t)
    title = (f"Mean confidence by position, t = {shown:.2f} (validation)" if table is not None
             else "Mean confidence by position (no held-out text on this server)" if missing
             else "Mean confidence by position (computing …)")
    return hv.Histogram((edges, np.nan_to_num(conf)), kdims=[hv.Dimension("position")],
                        vdims=[hv.Dimension("confidence", label="mean max-probability", range=(0, 1))]).opts(
        color=CORRECT, line_color=None, alpha=0.8, title=title, height=260, responsive=True,
        xlim=(-0.5, max(len(conf), 1) - 0.5),
        fontsize=_fontsize(presentation), show_grid=True, toolbar=None, tools=["hover"])


def ratios_plot(table, presentation: bool = False):
    """"The Forward Process" §4.4: how often each masking ratio is trained on, BERT's fixed 15% against
    diffusion's t ~ U(0, 1), as histograms of real draws (metrics.training_ratios)."""
    hv = _hv()
    edges = np.linspace(0, 1, 41)
    overlays = []
    for (scheme, rows), color in zip(table.groupby("scheme", sort=False), (WRONG, CORRECT)):
        counts, _ = np.histogram(rows["masked_fraction"], bins=edges)
        share = counts / max(len(rows), 1)
        overlays.append(hv.Histogram((edges, share), kdims=[hv.Dimension("fraction", label="masking ratio of a training row")],
                                     vdims=[hv.Dimension("share", label="share of training rows")], label=scheme).opts(
            color=color, alpha=0.6, line_color=None))
    return hv.Overlay(overlays).opts(
        title="Masking ratios trained on: BERT vs diffusion", legend_position="top_right", height=260,
        responsive=True, fontsize=_fontsize(presentation), show_grid=True, toolbar=None)


def nucleus_plot(result: dict | None, position: int | None, p: float, presentation: bool = False, shown: int = 24):
    """The top-p exercise of "Generation: Iterative Unmasking", at one masked position of the text: the model's
    most likely tokens, sorted, those the nucleus keeps in blue with their renormalised probability, the rest
    struck off."""
    from ....metrics import nucleus

    hv = _hv()
    if result is None or position is None or not len(result["table"]):
        return hv.Bars([], "token", "p").opts(title="Top-p: no masked position yet", height=280, responsive=True,
                                             toolbar=None)
    row = list(result["table"]["position"]).index(position)
    head_p = result["head_p"][row]
    kept = nucleus(head_p, p)
    names = [f"{i + 1}. {SHOWN_AS.get(n, n)}" for i, n in enumerate(result["head_names"][row][:shown])]
    renorm = np.where(kept, head_p / head_p[kept].sum(), 0.0)
    data = [(n, float(q), float(r), "kept" if k else "cut") for n, q, r, k in
            zip(names, head_p[:shown], renorm[:shown], kept[:shown])]
    more = f" (+{int(kept.sum()) - shown} more kept)" if kept.sum() > shown else ""
    bars = hv.Bars(data, [hv.Dimension("token", label="candidate (most likely first)")],
                   [hv.Dimension("p", label="probability"), "renormalised", "fate"]).opts(
        color="fate", cmap={"kept": CORRECT, "cut": "#bbbbbb"}, tools=["hover"], xrotation=60)
    return bars.opts(title=f"Top-p = {p:.2f} at position {position}: {int(kept.sum())} token(s) kept, "
                           f"mass {float(head_p[kept].sum()):.3f}{more}", height=300, responsive=True,
                     fontsize=_fontsize(presentation), show_grid=True, toolbar=None, show_legend=False)
