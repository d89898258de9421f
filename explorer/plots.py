"""Figures of sweep results (HoloViews, bokeh backend), shared by the CLI and the dashboard.

Inputs are the DataFrames of explorer.experiments (the aggregate: `<metric>_mean`, `_std` columns);
colours are chosen here and nowhere upstream. Nothing heavy happens at import: holoviews is
imported inside the functions.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .sampling.knobs import KNOBS

# A summary's knob columns when it does not name them (one read back from a CSV): the schema's knobs, named
# choices first, then the numbers (sampling/knobs.py); the seed is never varied
KNOB_ORDER = (*(k.name for k in KNOBS.values() if k.choices),
              *(k.name for k in KNOBS.values() if not k.choices and k.name != "seed"))

PALETTE = ("#1565c0", "#e65100", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#5d4037", "#ad1457")
LABELS = {"pattern_quality": "pattern quality", "gen_ppl": "gen-PPL (AR judge)", "gen_nll": "gen NLL (nats/char)",
          "entropy": "unigram entropy (nats)", "word_validity": "valid-word fraction", "distinct_2": "distinct-2",
          "distinct_3": "distinct-3", "tokens_per_s": "tokens / s", "ms_per_sample": "ms per sample",
          "pattern_quality_p2": "pattern quality (period >= 2)", "distinct_symbols": "distinct symbols per sample",
          "collapsed": "share of one-symbol samples", "ref_distance": "distance from held-out text (bars)",
          "steps": "denoising steps", "nfe": "forward passes (NFE)"}
SAMPLER = "sampler"


def _hv():
    """holoviews with the bokeh backend loaded (a script has not called hv.extension; the dashboard has)."""
    import holoviews as hv

    if "bokeh" not in hv.Store.renderers:
        import holoviews.plotting.bokeh  # noqa: F401  registers the backend
    if hv.Store.current_backend != "bokeh":
        hv.Store.set_current_backend("bokeh")
    # Canvas, not HoloViews' default WebGL: these plots hold at most a few thousand points, which a canvas
    # draws at once, while a browser whose WebGL is software (a virtual machine, a remote desktop, the
    # headless Chromium that exports PNGs) spent seconds of CPU on each Inspect page's curves.
    from holoviews.plotting.bokeh.renderer import BokehRenderer

    BokehRenderer.webgl = False
    return hv


def render_bokeh(obj):
    """The bokeh figure of a HoloViews object, rendered into a Document of its own.

    hv.render, and the bokeh renderer's get_plot even when given a document, attach the plot to
    bokeh's curdoc() unless the renderer is in server mode, and then set that document's theme.
    curdoc() is process-wide: bokeh's patch_curdoc stack is one global list. So while a served session
    ran a callback on the server's thread, a figure rendered on another thread (a download, a saved
    plot) re-themed that session's document outside its lock. That raised "_pending_writes should be
    non-None" (a download failed; tests/unit/dashboard/test_downloads.py failed now and then under pytest -n 2).
    A server-mode copy of the renderer attaches the plot to the document it is given; the
    process-wide renderer is left as it is."""
    from bokeh.document import Document

    renderer = _hv().renderer("bokeh").instance(mode="server")
    return renderer.get_plot(obj, doc=Document()).state


def _x_column(summary: pd.DataFrame, x: str) -> str:
    return x if x in summary.columns else f"{x}_mean"  # x = "nfe": the cell's mean NFE


def _groups(rows: pd.DataFrame, by: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    """(legend label, rows) per curve; one knob gives its bare value as the label."""
    if not by:
        strategy = f" ({rows['strategy'].iloc[0]})" if "strategy" in rows and rows["strategy"].nunique() == 1 else ""
        return [("diffusion" + strategy, rows)]
    out = []
    for key, g in rows.groupby(list(by), dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        # names speak for themselves ("random", "threshold"); numbers need their knob ("temperature=0.7")
        parts = [str(v) if isinstance(v, str) else f"{k}={v:g}" if pd.notna(v) else f"{k}=none"
                 for k, v in zip(by, key) if not (k == "decoding" and v == "schedule")]
        out.append((", ".join(parts) or ("schedule" if "decoding" in by else "diffusion"), g))
    return out


def _default_by(summary: pd.DataFrame, x: str) -> list[str]:
    """Every varied knob except the x axis (and steps, the points along an NFE axis) that takes more
    than one value among the diffusion cells."""
    knobs = summary.attrs.get("knobs") or [c for c in KNOB_ORDER if c in summary.columns]
    diff = summary[summary[SAMPLER] == "diffusion"] if SAMPLER in summary else summary
    return [k for k in knobs if k not in (x, "steps") and diff[k].nunique(dropna=False) > 1]


def _dims(metric: str, x: str):
    hv = _hv()

    return (hv.Dimension(x, label=LABELS.get(x.removesuffix("_mean"), x)),
            hv.Dimension(metric, label=LABELS.get(metric, metric)),
            hv.Dimension("tokens_per_s", label=LABELS["tokens_per_s"]))


# The values each metric can take. A ±1 std band is clipped to them: a quality in [0, 1] drew bands past 1
# (the sweep of "Sampling Strategies & Speed Tradeoffs": confidence at 16 steps, 0.92 ± 0.26), and
# gen-PPL's below 1.
INF = float("inf")
RANGES = {"pattern_quality": (0, 1), "pattern_quality_p2": (0, 1), "word_validity": (0, 1), "distinct_2": (0, 1),
          "distinct_3": (0, 1), "collapsed": (0, 1), "gen_ppl": (1, INF), "gen_nll": (0, INF), "entropy": (0, INF),
          "distinct_symbols": (0, INF), "ref_distance": (0, INF), "tokens_per_s": (0, INF), "ms_per_sample": (0, INF)}


def band(metric: str, mean: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the mean ± 1 std band, within the values `metric` can take (RANGES; unknown: unclipped)."""
    lo, hi = RANGES.get(metric, (-INF, INF))
    return np.clip(mean - std, lo, hi), np.clip(mean + std, lo, hi)


# Speed curves of different groups often coincide point for point (a packed sweep's cells share model calls):
# each group's own dash keeps the one drawn first visible under the next
SPEED_DASHES = ("solid", "dashed", "dotted", "dashdot")


def _curve_elements(label, rows, xcol, metric, color, dims, speed: bool, dash: str = "solid") -> list:
    """Mean curve with a ±1 std band, and (optionally) tokens/s on the second axis, for one group."""
    hv = _hv()

    xd, yd, sd = dims
    rows = rows.sort_values(xcol)
    x, mean = rows[xcol].to_numpy(float), rows[f"{metric}_mean"].to_numpy(float)
    std = np.nan_to_num(rows[f"{metric}_std"].to_numpy(float))  # one sample: no band
    low, high = band(metric, mean, std)
    els = [hv.Area((x, low, high), xd, [yd, hv.Dimension(f"{yd.name}_band_top", label=f"{yd.label} + 1 std")]).opts(
               color=color, alpha=0.15, line_alpha=0),
           hv.Curve((x, mean), xd, yd, label=label).opts(color=color, line_width=2.5, line_dash=dash),
           hv.Scatter((x, mean, std), xd, [yd, "std"]).opts(color=color, size=7, tools=["hover"])]
    if speed and "tokens_per_s_mean" in rows:
        tps = rows["tokens_per_s_mean"].to_numpy(float)
        els.append(hv.Curve((x, tps), xd, sd, label=f"{label}: tokens/s").opts(
            color=color, line_dash="dashed", line_width=1.5))
    return els


def _baseline_elements(summary, name, label, xs, xcol, metric, dims, speed, color) -> list:
    """A flat line across the x range for the AR baseline / held-out reference (no steps of their own);
    on an NFE axis the AR baseline is a single point at NFE = length instead."""
    hv = _hv()

    rows = summary[summary[SAMPLER] == name]
    if rows.empty or f"{metric}_mean" not in rows or not np.isfinite(rows[f"{metric}_mean"].iloc[0]):
        return []
    xd, yd, sd = dims
    y = float(rows[f"{metric}_mean"].iloc[0])
    if xcol == "nfe_mean" and name == "ar":
        nfe = float(rows["nfe_mean"].iloc[0])
        return [hv.Scatter(([nfe], [y]), xd, yd, label=label).opts(color=color, size=11, marker="diamond")]
    span = [float(np.nanmin(xs)), float(np.nanmax(xs))]
    els = [hv.Curve((span, [y, y]), xd, yd, label=label).opts(color=color, line_dash="dotted", line_width=2)]
    if speed and name == "ar" and "tokens_per_s_mean" in rows:
        tps = float(rows["tokens_per_s_mean"].iloc[0])
        els.append(hv.Curve((span, [tps, tps]), xd, sd, label=f"{label}: tokens/s").opts(
            color=color, line_dash="dashdot", line_width=1.5))
    return els


def _threshold_lines(rows, by, xs, metric, dims, start: int) -> list:
    """Threshold decoding has no step count: on a steps axis each threshold cell is a flat dotted line
    at its mean quality, labelled with the NFE it actually used."""
    hv = _hv()

    xd, yd, _ = dims
    span, els = [float(np.nanmin(xs)), float(np.nanmax(xs))], []
    for i, (_, r) in enumerate(rows.iterrows()):
        extra = ", ".join(str(r[k]) for k in by if k != "threshold")
        label = f"threshold {r['threshold']:g}{' ' + extra if extra else ''} (NFE {r['nfe_mean']:.1f})"
        y = float(r[f"{metric}_mean"])
        els.append(hv.Curve((span, [y, y]), xd, yd, label=label).opts(
            color=PALETTE[(start + i) % len(PALETTE)], line_dash="dotted", line_width=2))
    return els


def _diffusion_curves(diff: pd.DataFrame, x: str, xcol: str, by: list, metric: str, dims, speed: bool):
    """Curves per group, and the x values they span. With threshold cells: on x = NFE they form one more
    curve per group (across thresholds, column `decoding`); on x = steps they are flat lines."""
    thr = diff["threshold"].notna() if "threshold" in diff else pd.Series(False, index=diff.index)
    by = [k for k in by if k != "threshold"]
    if x == "nfe" and thr.any():
        diff = diff.assign(decoding=np.where(thr, "threshold", "schedule"))
        curves, flat, by = diff, diff.iloc[:0], [*by, "decoding"]
    else:
        curves, flat = diff[~thr], diff[thr]
    els, groups = [], _groups(curves, by)
    for i, (label, rows) in enumerate(groups):
        dash = SPEED_DASHES[i % len(SPEED_DASHES)] if metric in ("tokens_per_s", "ms_per_sample") else "solid"
        els += _curve_elements(label, rows, xcol, metric, PALETTE[i % len(PALETTE)], dims, speed, dash)
    if not flat.empty:
        els += _threshold_lines(flat, by, curves[xcol].to_numpy(float), metric, dims, len(groups))
    if "decoding" in curves and (curves["decoding"] == "threshold").any():
        t = curves[curves["decoding"] == "threshold"]  # name each threshold point by its gamma
        els.append(_hv().Labels((t[xcol].to_numpy(float), t[f"{metric}_mean"].to_numpy(float),
                                 [f"γ={v:g}" for v in t["threshold"]]), [dims[0], dims[1]], "gamma").opts(
            text_font_size="9pt", text_baseline="bottom"))
    return els, curves[xcol].to_numpy(float)


def _fixed_ticks(dim: str, ticks: list[float]):
    """A bokeh hook putting the main `dim` ("x" or "y") axis's ticks, and its grid lines, at `ticks`. x: every
    step count, since holoviews ignores `xticks` on a log axis, whose default ticker labels only 1, 5, 10 ...
    on these short ranges; y: log_ticks on a log axis (the twin speed axis on the right keeps its own)."""
    def hook(plot, element):
        from bokeh.models import Axis, FixedTicker, LogTickFormatter, NumeralTickFormatter

        fig = plot.state
        ticker = FixedTicker(ticks=ticks)
        for axis in fig.xaxis if dim == "x" else [a for a in fig.left if isinstance(a, Axis)]:
            axis.ticker = ticker
            if isinstance(axis.formatter, LogTickFormatter) and plain_numbers(ticks):
                axis.formatter = NumeralTickFormatter(format="0.[00]")  # 1, 2, 4: not 10^0, 10^0.3; 1, 10: not 10^0, 10^1
        for grid in fig.xgrid if dim == "x" else fig.ygrid:
            grid.ticker = ticker
    return hook


def _speed_axis(span: tuple[float, float] | None):
    """A bokeh hook for the tokens/s axis: short numbers (500k, 1.2m), not Bokeh's 5.000e+5; and where it is
    the second axis, a log scale over `span` (low, high), ticked at log_ticks. tokens/s falls as 1/steps, and
    one step is ten times the next point: on a linear axis every curve past 2 steps lay flat at the bottom.
    HoloViews sets one scale for every y axis; the extra axis's scale and range are set here."""
    def hook(plot, element):
        from bokeh.models import Axis, FixedTicker, LogScale, NumeralTickFormatter

        fig = plot.state
        for axis in [*fig.left, *fig.right]:  # (the legend may be there too)
            if not isinstance(axis, Axis) or axis.axis_label != LABELS["tokens_per_s"]:
                continue
            axis.formatter = NumeralTickFormatter(format="0.[0]a")
            name = axis.y_range_name
            if span is not None and name in fig.extra_y_ranges:
                fig.extra_y_scales = {**fig.extra_y_scales, name: LogScale()}
                fig.extra_y_ranges[name].start, fig.extra_y_ranges[name].end = span
                axis.ticker = FixedTicker(ticks=log_ticks(*span))
    return hook


def within_a_decade(ticks: Sequence[float]) -> bool:
    """Whether positive ticks span less than a factor of ten: there a log axis's powers-of-ten labels
    (10^0, 10^1) name at most one tick, and plain numbers read better."""
    values = [v for v in ticks if v > 0]
    return bool(values) and max(values) < 10 * min(values)


def plain_numbers(ticks: Sequence[float]) -> bool:
    """Whether a log axis's fixed ticks read better as plain numbers than as powers of ten: within a
    decade (where 10^k names at most one tick), or all of them from 0.01 to 100,000, as step counts and
    scores are. Bokeh's LogTickFormatter writes plain numbers when a tick is not a power of ten, but
    10^0 and 10^1 for a grid of 1 and 10 steps."""
    values = [v for v in ticks if v > 0]
    return within_a_decade(values) or (bool(values) and all(0.01 <= v < 1e5 for v in values))


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks for a log axis over [low, high]: 1, 2, 5 x each power of ten, or every digit where that leaves
    fewer than three. Bokeh's LogTicker gives up on spans under about two decades and ticks them linearly:
    the Sweep tab's tokens/s axis (12k-310k) had 50k-350k bunched at its top and nothing below 50k."""
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for mantissas in ((1, 2, 5), range(1, 10)):
        # float("3e-1"), not 3 * 10.0**-1 = 0.30000000000000004
        ticks = [v for k in decades for m in mantissas if low <= (v := float(f"{m}e{k}")) <= high]
        if len(ticks) >= 3:
            return ticks
    return ticks


def _speed_span(summary: pd.DataFrame):
    """(low, high) of the tokens/s curves with some room, or None when there are none to log (the twin axis
    draws the means only, no bands)."""
    return _positive_span(summary, "tokens_per_s", room=1.4, bands=False)


def _positive_span(summary: pd.DataFrame, metric: str, room: float = 1.0, bands: bool = True):
    """(low, high) of a metric's positive means (and their +-1 std bands), widened by `room` each way, or None."""
    if f"{metric}_mean" not in summary:
        return None
    mean = summary[f"{metric}_mean"].to_numpy(float)
    std = summary[f"{metric}_std"].to_numpy(float) if bands and f"{metric}_std" in summary else np.zeros_like(mean)
    values = np.concatenate([mean, mean - np.nan_to_num(std), mean + np.nan_to_num(std)])
    values = values[np.isfinite(values) & (values > 0)]
    return (float(values.min()) / room, float(values.max()) * room) if len(values) else None


SWEET_SPOT_FRAC = 0.9  # the notebook's rule: the fewest steps whose mean reaches 90% of the curve's best


def sweet_spot_rule(metric: str, x: str = "steps") -> str:
    """The rule the stars follow, in words, as the legend names them (the caption alone did not say which
    metric: a star picked on another reading sat below 90% of the drawn curve's best)."""
    unit = {"nfe": "NFE"}.get(x, x)
    return f"sweet spot: fewest {unit} reaching {SWEET_SPOT_FRAC:.0%} of the best {LABELS.get(metric, metric)}"


def _sweet_spot_stars(diff: pd.DataFrame, metric: str, x: str, xcol: str, by: list, dims) -> list:
    """A black star on each curve at its sweet spot by the rule of "Sampling Strategies & Speed Tradeoffs"
    (experiments.sweet_spot: the fewest steps reaching 90% of that curve's best), applied to the plotted
    metric itself, so the star always satisfies the rule the legend states (sweet_spot_rule). Its hover says
    "Sweet spot ~N steps". Scheduled cells only: threshold decoding has no step count to save. None when the
    metric has no better direction (entropy, tokens/s). A metric a collapse can fool (pattern quality) may
    star a collapsed cell: the period->=2 reading, the default on patterns, is the one that cannot be fooled."""
    from .experiments import METRIC_DIRECTION, sweet_spot

    hv = _hv()
    col = f"{metric}_mean"
    if not METRIC_DIRECTION.get(metric):
        return []
    rows = diff[diff[col].notna() & diff[xcol].notna()]
    if "threshold" in rows:
        rows = rows[rows["threshold"].isna()]
    by = [k for k in by if k != "threshold"]
    unit = {"nfe": "NFE"}.get(x, x)
    spots = []
    for label, group in (_groups(rows, by) if len(rows) else []):
        spot_x = sweet_spot(group, metric, x=x, by=[], frac=SWEET_SPOT_FRAC).iloc[0][xcol]
        name = f"Sweet spot ~{spot_x:.0f} {unit}" + (f" ({label})" if by else "")
        spots.append((float(spot_x), float(group.loc[group[xcol] == spot_x, col].iloc[0]), name))
    if not spots:
        return []
    xd, yd, _ = dims
    return [hv.Scatter(tuple(map(list, zip(*spots))), xd, [yd, hv.Dimension("spot", label="sweet spot")],
                       label=sweet_spot_rule(metric, x)).opts(marker="star", size=16, color="#000000",
                                                              tools=["hover"], hover_tooltips="@spot")]


LOG_Y = ("gen_ppl", "tokens_per_s", "ms_per_sample")  # metrics drawn on a log axis (positive, over decades)


def quality_speed_plot(summary: pd.DataFrame, metric: str, *, x: str = "steps", by: Sequence[str] | None = None,
                       speed: bool = True, logx: bool = True, title: str | None = None,
                       width: int | None = None, height: int = 480):
    """Quality vs steps (or NFE) with ±1 std bands per group, tokens/s on a second y axis, the AR
    baseline / held-out reference as their own lines, and each curve's sweet spot starred.
    width=None stretches the figure to its container (a dashboard column, a browser window); an int
    fixes it (e.g. for a PNG of a known size); title="" draws none. Returns a HoloViews Overlay."""
    hv = _hv()

    xcol = _x_column(summary, x)
    diff = summary[summary[SAMPLER] == "diffusion"] if SAMPLER in summary else summary
    if diff.empty or f"{metric}_mean" not in diff:
        raise ValueError(f"no diffusion rows with {metric!r} to plot")
    by = _default_by(summary, x) if by is None else list(by)
    dims = _dims(metric, xcol)
    # no measured speed (a cancelled or cluster-less timing): no tokens/s axis, whose empty range repeated "0"
    speed = bool(speed) and _speed_span(summary) is not None
    els, xs = _diffusion_curves(diff, x, xcol, by, metric, dims, speed)
    els += _baseline_elements(summary, "ar", "AR baseline", xs, xcol, metric, dims, speed, "#212121")
    els += _baseline_elements(summary, "reference", "held-out text", xs, xcol, metric, dims, False, "#757575")
    els += _sweet_spot_stars(diff, metric, x, xcol, by, dims)
    ticks = np.unique(np.round(xs[np.isfinite(xs)], 1))
    hooks = [_speed_axis(_speed_span(summary) if speed else None)]
    hooks += [_fixed_ticks("x", [float(v) for v in ticks])] if len(ticks) <= 12 else []
    size = {"responsive": True} if width is None else {"width": int(width)}
    # gen-PPL spans 500 (one step) to 10 (64 steps): on a linear axis every curve past 4 steps is a flat
    # line at the bottom. Its log axis, and the speed axis beside it, show ratios instead.
    logy = metric in LOG_Y and bool((summary[f"{metric}_mean"].dropna() > 0).all())
    span = _positive_span(summary, metric) if logy else None
    hooks += [_fixed_ticks("y", log_ticks(*span))] if span is not None else []
    return hv.Overlay(els).opts(
        multi_y=bool(speed), logx=bool(logx and np.nanmin(xs) > 0), logy=logy, height=height, **size, show_grid=True,
        padding=0.05, legend_position="right",
        title=f"{LABELS.get(metric, metric)} vs {LABELS.get(x, x)}" if title is None else title, hooks=hooks)


def speed_plot(summary: pd.DataFrame, *, x: str = "steps", by: Sequence[str] | None = None, logx: bool = True,
               title: str | None = None, width: int | None = None, height: int = 480, metric: str = "tokens_per_s"):
    """tokens/s (or metric="ms_per_sample") vs steps per group, with the AR baseline as its own line
    (the speed benchmark of "Sampling Strategies & Speed Tradeoffs")."""
    return quality_speed_plot(summary, metric, x=x, by=by, speed=False, logx=logx, title=title, width=width,
                              height=height)


def save_plot(obj, path: str | Path, resources: str = "inline") -> Path:
    """Standalone HTML (resources='inline' embeds BokehJS, ~3 MB, opens offline; 'cdn' is ~20 kB but
    needs the network), or PNG for a .png path (rendered by a headless Chromium, see save_png)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".png":
        return save_png(obj, path)
    # bokeh's file_html, not hv.save: hv.save goes through Panel's save, which switches the process-wide
    # resource mode while it renders, so a served page styled meanwhile would link Panel's CDN.
    from bokeh.embed import file_html
    from bokeh.resources import CDN, INLINE

    html = file_html(render_bokeh(obj), INLINE if resources == "inline" else CDN, path.stem)
    path.write_text(standalone_html(html), encoding="utf-8")
    return path


# A script a served page loads from its server (Panel adds its ES-module shim to every bokeh page once
# imported, by a path relative to the server); a standalone file has no server: the browser reported the
# file missing, and nothing in a plain bokeh figure needs it
_SERVER_SCRIPT = re.compile(r'<script[^>]*\ssrc="static/[^"]*"[^>]*>\s*</script>\n?')


def standalone_html(html: str) -> str:
    """`html` (bokeh's file_html) without the scripts it would load from a server's static/ path.

    Args: html, a standalone page. Returns the page, every such <script src="static/..."> removed."""
    return _SERVER_SCRIPT.sub("", html)


# Chromium builds by preference. Debian's headless shell (chromium-headless-shell) is Chromium's automation
# build, the same Blink and compositor without the desktop browser around it: pages come out in the same
# pixels for about a third less CPU (the browser tests: 190 against 310 s of Chromium's CPU).
CHROMIUMS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    """The first of CHROMIUMS on PATH, or None (playwright then looks for a Chromium of its own).

    Returns: the executable's path, or None."""
    import shutil

    return next((p for p in map(shutil.which, CHROMIUMS) if p), None)


def save_png(obj, path: str | Path, timeout_ms: int = 30_000) -> Path:
    """PNG through the machine's Chromium driven by playwright (bokeh's own export needs selenium):
    the inline HTML is opened headless and the rendered figure is screenshotted."""
    import tempfile

    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        html = save_plot(obj.opts(toolbar=None, clone=True), Path(tmp) / "figure.html", resources="inline")
        screenshot_html(html, path, ".bk-Figure, .bk-Canvas", timeout_ms)
    return path


def screenshot_html(page_file: Path, path: Path, selector: str, timeout_ms: int = 30_000) -> None:
    """Open a standalone figure page in headless Chromium and screenshot the first `selector` element
    into `path` (PNG). Shared by save_png and the dashboard's downloads."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise RuntimeError("PNG export needs playwright (pip install playwright); save as .html instead") from e
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 700}, device_scale_factor=2)
            page.goto(Path(page_file).as_uri())
            page.wait_for_selector(selector, timeout=timeout_ms)
            page.wait_for_timeout(500)  # let BokehJS finish drawing the canvas
            page.locator(selector).first.screenshot(path=str(path))
            browser.close()
    except Exception as e:  # playwright's errors carry the browser's own message
        raise RuntimeError(f"PNG export failed ({str(e).splitlines()[0]}); save as .html instead") from e
