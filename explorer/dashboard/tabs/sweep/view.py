"""The Sweep tab's views: the knobs, each sweep's run / stop / progress bar, the quality and speed figures
(explorer.plots), the summary, the quality grid of "Sampling Strategies & Speed Tradeoffs" and the temperature
comparison of "Generation: Iterative Unmasking".

The sweeps run in state.py; these views only draw the (table, summary) DataFrames they return.
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import panel as pn
import param

from ....experiments import METRIC_DIRECTION, pick_metric
from ....metrics import looks_collapsed
from ....plots import LABELS, RANGES, quality_speed_plot, speed_plot
from ....sampling.knobs import KNOBS
from ...downloads import download_button, plot_html, plot_png, table_csv
from ...ui.base import (
    TABLE_CSS,
    checkbox,
    figure_first,
    flex_item,
    notice,
    rule,
    section,
    show_notice,
    side_by_side,
    watch_presentation,
)
from ...ui.legend import BELOW, legend_columns, short_stars
from ...ui.palette import FONT
from ...ui.safe import literal
from .state import SweepTabState, SweepTask

log = logging.getLogger(__name__)

# em, not px: the samples grow with the pane at projector type (12 px at the 14 px base type)
CELL_CSS = ("font-family: monospace; white-space: pre-wrap; word-break: break-all; font-size: 0.86em; "
            "line-height: 1.25; max-height: 9em; overflow-y: auto")
# The summary's knob columns, from the schema (sampling/knobs.py): those a sweep varied, named choices first
# (what to do), then the numbers, the step count last (the x axis); the seed is never varied
KNOB_COLUMNS = (*(k.name for k in KNOBS.values() if k.choices),
                *(k.name for k in KNOBS.values() if not k.choices and k.name not in ("steps", "seed")), "steps")


def format_score(metric: str, value) -> str:
    if value is None or not np.isfinite(value):
        return "–"
    if metric in ("pattern_quality", "pattern_quality_p2", "word_validity"):
        return f"{value:.0%}"
    if metric == "distinct_symbols" and float(value).is_integer():
        return f"{int(value)}"  # a count: 2, not 2.00
    return f"{value:.1f}" if metric == "gen_ppl" else f"{value:.2f}"


# A grid of short samples (patterns) keeps each on one line, its period in view, its type shrunk to the
# column: wrapped at projector type, a 24-symbol row of 1024 px's five columns broke mid-period. Monospace
# characters are about 0.6 em wide; cqw is the grid's container's width (grid_html).
ONE_LINE_CHARS = 48


def one_line_css(n_columns: int, chars: int) -> str:
    ems = max(n_columns, 1) * (chars + 2) * 0.6
    return f"font-family: monospace; white-space: pre; font-size: min(0.86em, calc(100cqw / {ems:.1f})); line-height: 1.25"


def _cell(text: str, score: str, collapsed: bool = False, css: str = CELL_CSS) -> str:
    mark = ' class="collapsed" style="vertical-align: top; background: #fdecea"' if collapsed else \
        ' style="vertical-align: top"'
    return f'<td{mark}><div style="{css}">{literal(text)}</div><b>{score}</b></td>'


def collapsed_rows(rows: pd.DataFrame) -> pd.Series:
    """Which samples are a collapse (metrics.looks_collapsed on the text, or the sampler's one-symbol flag)."""
    flagged = rows["collapsed"].fillna(0).astype(bool) if "collapsed" in rows else False
    return rows["text"].fillna("").map(lambda t: bool(t) and looks_collapsed(t)) | flagged


def grid_score(metric: str, rows: pd.DataFrame, collapsed: pd.Series) -> float:
    """A column's mean with its collapsed samples failed, not scored: 0 on a share-of-success metric in
    [0, 1] (a one-symbol tiling scores 100% on the notebook's pattern quality), left out of any other."""
    values = rows[metric].astype(float)
    if METRIC_DIRECTION.get(metric) == 1 and RANGES.get(metric) == (0, 1):
        return float(values.where(~collapsed, 0.0).mean())
    return float(values[~collapsed].mean()) if (~collapsed).any() else float("nan")


def grid_html(table: pd.DataFrame, metric: str) -> str:
    """The quality grid of "Sampling Strategies & Speed Tradeoffs": one column per step count, one row per
    sample, each cell the text and its score (the same seeds in every column: only the step count differs).
    A collapsed sample is marked and scored "collapsed", and its column's mean does not count it a success."""
    diff = table[table["sampler"] == "diffusion"]
    diff = diff.assign(_collapsed=collapsed_rows(diff))
    steps = sorted(diff["steps"].dropna().unique())
    head = "".join(f"<th>{int(s)} step{'s' if s != 1 else ''}</th>" for s in steps)
    chars = int(diff["text"].fillna("").map(len).max()) if len(diff) else 0
    css = one_line_css(len(steps), chars) if chars <= ONE_LINE_CHARS else CELL_CSS
    rows = []
    for i in sorted(diff["sample"].dropna().unique()):
        cells = []
        for s in steps:
            r = diff[(diff["steps"] == s) & (diff["sample"] == i)]
            if not len(r):
                cells.append("<td></td>")
                continue
            gone = bool(r["_collapsed"].iloc[0])
            score = "collapsed" if gone else format_score(metric, float(r[metric].iloc[0]))
            cells.append(_cell(r["text"].iloc[0], score, gone, css))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    means = []
    for s in steps:
        col = diff[diff["steps"] == s]
        n = int(col["_collapsed"].sum())
        extra = f" ({n} collapsed)" if n else ""
        means.append(f"<td><b>mean {format_score(metric, grid_score(metric, col, col['_collapsed']))}</b>{extra}</td>")
    better = {1: ", higher is better", -1: ", lower is better"}.get(METRIC_DIRECTION.get(metric, 0), "")
    caption = (f"<caption style='caption-side: top'>score: {literal(LABELS.get(metric, metric))}{better}; "
               "collapsed: one symbol fills the sample (counted as a failure)</caption>")
    return (f'<div style="container-type: inline-size"><table class="quality-grid" style="table-layout: fixed; '
            f'width: 100%">{caption}<tr>{head}</tr>{"".join(rows)}<tr>{"".join(means)}</tr></table></div>')


def temperature_html(table: pd.DataFrame, summary: pd.DataFrame, metric: str) -> str:
    """The temperature comparison of "Generation: Iterative Unmasking": per temperature its samples and mean
    scores, entropy and distinct-2 always beside the chosen metric (what a temperature does is read from them,
    not said)."""
    extra = [m for m in ("entropy", "distinct_2") if f"{m}_mean" in summary and m != metric]
    head = "".join(f"<th style='white-space: nowrap'>{literal(m.replace('_', '-'))}</th>" for m in (metric, *extra))
    rows = []
    for _, s in summary[summary["sampler"] == "diffusion"].iterrows():
        texts = table[(table["sampler"] == "diffusion") & (table["temperature"] == s["temperature"])]["text"]
        samples = "".join(f'<div style="{CELL_CSS}; margin-bottom: 4px">{literal(t)}</div>' for t in texts)
        scores = "".join(f"<td>{format_score(m, float(s[f'{m}_mean']))}</td>" for m in (metric, *extra))
        rows.append(f"<tr><td><b>{s['temperature']:g}</b></td><td>{samples}</td>{scores}</tr>")
    return (f'<table class="temperature-table" style="width: 100%"><tr><th style="width: 8em">temperature</th>'
            f'<th>samples</th>{head}</tr>{"".join(rows)}</table>')


def summary_frame(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The summary as people read it: the varied knobs, n, metric mean ± std, NFE, speed."""
    diff = summary[summary["sampler"] == "diffusion"]
    knobs = [k for k in KNOB_COLUMNS if k in summary and (k == "steps" or diff[k].nunique(dropna=False) > 1)]
    out = summary[["sampler", *knobs, "n"]].copy()
    if "threshold" in out:  # threshold decoding ignores the step count: do not show one
        out["steps"] = out["steps"].astype(object).where(out["threshold"].isna(), None)
    for m, digits in ((metric, 3), ("nfe", 1), ("tokens_per_s", 0), ("ms_per_sample", 1)):
        if f"{m}_mean" in summary:
            mean, std = summary[f"{m}_mean"], summary[f"{m}_std"]
            out[m] = [("–" if pd.isna(a) else f"{a:.{digits}f}") + ("" if pd.isna(b) else f" ± {b:.{digits}f}")
                      for a, b in zip(mean, std)]
    return out.astype(object).where(out.notna(), "–")


def _labelled(label: str, widget, session):
    """Button groups show no label of their own; this one follows the session's type size."""
    name = pn.pane.HTML(label, margin=(5, 10, 0, 10))
    watch_presentation(session, panes=[name])
    return pn.Column(name, widget)


class TaskBar(pn.viewable.Viewer):
    """Run / Stop, the progress bar, the expected cost before a run and the status or notice after."""

    task = param.ClassSelector(class_=SweepTask)
    session = param.Parameter(doc="the browser session, whose presentation type size the bar follows")
    css = param.String("sweep-main", doc="CSS class prefix of its widgets (browser tests find them by it)")

    def __init__(self, **params):
        super().__init__(**params)
        t = self.task
        self.run = pn.widgets.Button.from_param(t.param.run, color="primary", width=90,
                                                css_classes=[f"{self.css}-run"])
        self.stop = pn.widgets.Button.from_param(t.param.stop, color="warning", width=80,
                                                 css_classes=[f"{self.css}-stop"])
        self.progress = pn.indicators.Progress(value=0, max=100, width=220, height=14, bar_color="primary",
                                               css_classes=["sweep-progress"])
        self.status = pn.pane.HTML("", margin=(5, 10), css_classes=[f"{self.css}-status"])
        self.notice = notice("danger")
        t.param.watch(lambda *e: self._update(), ["progress", "status", "error", "estimate", "running"])
        self._update()
        if self.session is not None:  # at projector type Run and Stop had stayed small
            watch_presentation(self.session, panes=[self.status], widgets=(self.run, self.stop))

    def _update(self):
        t = self.task
        self.progress.value, self.progress.active = t.progress, t.running
        self.stop.disabled = not t.running
        # a cached result shown says "from cache"; its estimate ("cached: ...") would say it twice
        repeat = t.status == "from cache" and t.estimate.startswith("cached")
        parts = [p for p in (t.status, "" if t.running or repeat else t.estimate) if p]
        self.status.object = literal(" · ".join(parts))
        show_notice(self.notice, t.error)

    def __panel__(self):
        return pn.Column(pn.FlexBox(self.run, self.stop, self.progress, self.status, align_items="center"), self.notice,
                         sizing_mode="stretch_width")


class SweepTabView(pn.viewable.Viewer):
    """The Sweep tab: quality and speed vs steps, the quality grid, the temperature comparison."""

    tab = param.ClassSelector(class_=SweepTabState)

    def __init__(self, **params):
        super().__init__(**params)
        tab = self.tab
        self.note = notice("warning")
        side = flex_item(1, 420)  # side by side where both fit, else one under the other
        self.quality_plot = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=380, styles=side,
                                              css_classes=["sweep-quality-plot"])
        self.speed_plot = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=380, styles=side,
                                            css_classes=["sweep-speed-plot"])
        self.summary = pn.pane.DataFrame(None, index=False, sizing_mode="stretch_width", max_height=300,
                                         stylesheets=[TABLE_CSS], css_classes=["sweep-summary"])
        self.plot_notice = notice("danger")
        self.metric_notice = notice("info", css_classes=["sweep-metric-notice"])
        self.grid = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["sweep-grid-table"])
        self.temps = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["sweep-temps-table"])
        self._figures = {}
        tab.param.watch(lambda *e: self._note(), ["note", "no_ar"])
        tab.param.watch(lambda *e: self._draw_main(), ["x", "metric", "speed_metric"])
        tab.param.watch(lambda *e: (self._draw_grid(), self._draw_temps()), ["metric"])
        tab.session.param.watch(lambda *e: self._draw_main(), ["presentation"])
        tab.main.param.watch(lambda *e: self._draw_main(), ["result"])
        tab.grid.param.watch(lambda *e: self._draw_grid(), ["result"])
        tab.temps.param.watch(lambda *e: self._draw_temps(), ["result"])
        self._note()
        self._draw_main()
        self._draw_grid()
        self._draw_temps()

    def _note(self):
        # a missing baseline alone is information (its box is greyed); text scored without gen-PPL, a warning
        self.note.alert_type = "info" if self.tab.no_ar and "gen-PPL" not in self.tab.note else "warning"
        show_notice(self.note, self.tab.note)

    def _draw_main(self):
        result = self.tab.main.result
        self.plot_notice.visible = False
        if result is None:
            self._metric_note(None)
            self.quality_plot.object = self.speed_plot.object = self.summary.object = None
            self._figures = {}
            return
        summary = result[1]
        metric = pick_metric(summary, self.tab.metric)
        self._metric_note(metric)
        try:
            self._figures = self._make_figures(summary, metric)
        except Exception as e:  # a notice beside the plots; the session must survive a plotting bug
            log.exception("sweep plot failed")
            show_notice(self.plot_notice, f"cannot plot: {e}")
            return
        self.quality_plot.object = self._figures.get("quality")
        self.speed_plot.object = self._figures.get("speed")
        self.summary.object = summary_frame(summary, metric) if metric else None

    def _metric_note(self, metric: str | None) -> None:
        """A metric asked for (the select, a link) that the sweep did not measure: the figure shows another,
        and says so, where the select alone named the one asked for."""
        wanted = self.tab.metric
        other = wanted != "auto" and metric is not None and metric != wanted
        show_notice(self.metric_notice, (
            f"{LABELS.get(wanted, wanted)} is not measured for this model (patterns are scored by pattern "
            f"quality; gen-PPL needs an AR judge of the same alphabet): the figure shows "
            f"{LABELS.get(metric, metric)}") if other else "")

    def _make_figures(self, summary, metric) -> dict:
        """Quality without the tokens/s second axis (the speed figure stands beside it), styled as the
        Explore tab's (legend below, presentation fonts)."""
        tab, font = self.tab, FONT[self.tab.session.presentation]
        style = dict(**BELOW, legend_cols=2, fontsize={
            "title": font["title"], "labels": font["plot"], "xticks": font["plot"], "yticks": font["plot"],
            "legend": font["plot"]})
        figures = {}
        if metric is not None:
            # the stars' short name (the section's caption states the rule), in as many legend columns as
            # fit half a 1366-pixel page: the rule in words ran past its edge ("... the best pattern qu")
            plot = short_stars(quality_speed_plot(summary, metric, x=tab.x, speed=False, height=380))
            cols = 1 if tab.session.presentation else legend_columns([el.label for el in plot])
            figures["quality"] = plot.opts(**{**style, "legend_cols": cols})
        if f"{tab.speed_metric}_mean" in summary:
            figures["speed"] = speed_plot(summary, x=tab.x, metric=tab.speed_metric, height=380).opts(**style)
        return figures

    def _score_metric(self, task: SweepTask):
        return pick_metric(task.result[1], self.tab.metric) if task.result is not None else None

    def _draw_grid(self):
        metric = self._score_metric(self.tab.grid)
        self.grid.object = grid_html(self.tab.grid.result[0], metric) if metric else ""

    def _draw_temps(self):
        metric = self._score_metric(self.tab.temps)
        result = self.tab.temps.result
        self.temps.object = temperature_html(result[0], result[1], metric) if metric else ""

    # ------------------------------------------------------------------ layout

    def _controls(self):
        p, W = self.tab.param, pn.widgets
        w = [W.CheckButtonGroup.from_param(p.strategies), W.CheckButtonGroup.from_param(p.schedules),
             W.TextInput.from_param(p.steps_grid, width=170, css_classes=["sweep-steps-grid"]),
             W.TextInput.from_param(p.temperatures, width=150),
             W.TextInput.from_param(p.thresholds, width=150, placeholder="e.g. 0.7, 0.9"),
             W.IntInput.from_param(p.samples, width=120), checkbox(p.include_ar),
             W.RadioButtonGroup.from_param(p.x), W.Select.from_param(p.metric, width=180),
             W.RadioButtonGroup.from_param(p.speed_metric)]
        s = self.tab.session
        watch_presentation(s, widgets=w)
        axes = dict(zip(("strategies", "schedules", "thresholds"), (w[0], w[1], w[4])))

        def grey(*events):  # the inputs the loaded model's run does not read, and a baseline there is not
            for name, widget in axes.items():
                widget.disabled = name in self.tab.unread
            w[6].disabled = self.tab.no_ar
        grey()
        self.tab.param.watch(grey, ["unread", "no_ar"])
        # rows that wrap: at projector type they ran past a 1024-pixel window's edge
        return pn.Column(
            pn.FlexBox(_labelled("Strategies", w[0], s), _labelled("Schedules", w[1], s)),
            pn.FlexBox(*w[2:6], pn.Column(pn.Spacer(height=18), w[6]), align_items="flex-end"),
            pn.FlexBox(_labelled("x axis", w[7], s), w[8], _labelled("Speed", w[9], s), align_items="flex-end"),
            sizing_mode="stretch_width")

    def _downloads(self):
        """Lazy buttons (downloads.py): the files are made only when clicked, off the UI thread."""
        def table(i):
            return lambda: None if self.tab.main.result is None else table_csv(self.tab.main.result[i])

        def figure(name, export):
            return lambda: None if self._figures.get(name) is None else export(self._figures[name])
        files = [("Table CSV", "sweep_table.csv", table(0)), ("Summary CSV", "sweep_summary.csv", table(1)),
                 ("Quality HTML", "sweep_quality.html", figure("quality", plot_html)),
                 ("Quality PNG", "sweep_quality.png", figure("quality", plot_png)),
                 ("Speed HTML", "sweep_speed.html", figure("speed", plot_html)),
                 ("Speed PNG", "sweep_speed.png", figure("speed", plot_png))]
        s = self.tab.session
        buttons = [download_button(label, name, make, session=s) for label, name, make in files]

        def ready(*events):  # as Explore's: lit once there is a sweep to download, not "nothing yet" on a click
            for button in buttons:
                button.disabled = self.tab.main.result is None
        ready()
        self.tab.main.param.watch(ready, "result")
        return pn.FlexBox(*buttons, css_classes=["sweep-downloads"])

    def _plot_widths(self) -> None:
        """At projector type each plot takes the whole width, one under the other: side by side, the quality
        plot's title and legend ran past its half of a 1366-pixel page. The summary shows every row."""
        pres = self.tab.session.presentation
        for plot in (self.quality_plot, self.speed_plot):
            plot.styles = {**plot.styles, **({"flex": "1 1 100%"} if pres else flex_item(1, 420))}
        self.summary.max_height = None if pres else 300

    def __panel__(self):
        p = self.tab.param
        plots = side_by_side(self.quality_plot, self.speed_plot)
        figure_first(self.tab.session, self.plot_notice, self.metric_notice, plots)  # projector: above the controls
        self._plot_widths()
        self.tab.session.param.watch(lambda *e: self._plot_widths(), ["presentation"])
        main = pn.Column(
            section("### Quality and speed vs steps\nOne curve per strategy × schedule × temperature (for a "
                    "uniform-state model, which reads no strategy or schedule: per temperature); "
                    "bands ±1 std, ★ the sweet spot (fewest steps reaching 90% of the best of the metric "
                    "plotted). The cells share their model calls while sampling; each cell's speed is one of "
                    "its generations run again by itself, timed alone."),
            self._controls(), TaskBar(task=self.tab.main, session=self.tab.session), self.plot_notice,
            self.metric_notice,
            plots, self.summary, self._downloads(), sizing_mode="stretch_width")
        inputs = [pn.widgets.TextInput.from_param(p.grid_steps, width=170),
                  pn.widgets.IntInput.from_param(p.grid_samples, width=120),
                  pn.widgets.TextInput.from_param(p.temp_values, width=190),
                  pn.widgets.IntInput.from_param(p.temp_steps, width=100),
                  pn.widgets.IntInput.from_param(p.temp_samples, width=110)]
        # at projector type the grid's and the comparison's inputs and tables had stayed small
        watch_presentation(self.tab.session, panes=(self.summary, self.grid, self.temps), widgets=inputs)
        grid = pn.Column(
            section("### Quality grid\nThe same seeds at each step count (first strategy chosen above; a uniform-state "
                    "model reads none)."),
            pn.FlexBox(*inputs[:2]),
            TaskBar(task=self.tab.grid, session=self.tab.session, css="sweep-grid"), self.grid,
            sizing_mode="stretch_width")
        temps = pn.Column(
            section("### Temperature comparison\nSamples and mean scores per temperature, at the same seeds. "
                    "Read gen-PPL beside entropy and distinct-2: a low gen-PPL with low entropy "
                    "is repetition, not quality."),
            pn.FlexBox(*inputs[2:]),
            TaskBar(task=self.tab.temps, session=self.tab.session, css="sweep-temps"), self.temps,
            sizing_mode="stretch_width")
        return pn.Column(self.note, main, rule(), grid, rule(), temps,
                         sizing_mode="stretch_width", name="sweep-tab")
