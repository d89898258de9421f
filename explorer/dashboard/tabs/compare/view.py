"""The Compare tab's view: presets and run buttons on top, then one column per configuration: its
overrides (editable), its trajectory heatmap, its final text with the positions where it differs
from the other columns highlighted, and its metrics. State and runs: state.py.

Alignment: every heatmap has the same x range (positions; pan and zoom are linked) and the same
height, with rows on a normalised progress axis (0 = the start canvas, 1 = the final canvas). A
4-step run has 5 tall rows and a 32-step run 33 thin ones over the same height, so "halfway through
the run" is at the same height in every column: a fixed height per row would make the 4-step
heatmap a sliver beside the 32-step one, and the comparison would need scrolling.
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import Range1d

from ....experiments import METRIC_DIRECTION, RANKED_BY
from ....sampling.uniform import model_process
from ...downloads import download_button, trajectory_csv, trajectory_json
from ...runtime.limits import WAITING
from ...ui.base import figure_first, figure_pane, notice, show_notice, side_by_side, watch_presentation
from ...ui.heatmap import LEGEND_CSS, HeatmapFigure, legend_html, legends_html
from ...ui.palette import DIFF_COLOR, MASKED_TEXT, SAME_BG, SAME_COLOR, STATE_COLORS
from ...ui.safe import literal
from .state import (
    MAX_COLUMNS,
    METRIC_LABELS,
    PRESETS,
    CompareState,
    differing,
    split_columns,
)

TEXT_CSS = f"""
.canvas {{ font-family: ui-monospace, 'DejaVu Sans Mono', monospace; white-space: pre-wrap; word-break: break-all;
          line-height: 1.45; margin: 0; font-size: var(--text-size, 14px); }}
.d {{ background: {DIFF_COLOR}; font-weight: bold; text-decoration: underline; }}
.s {{ background: {SAME_BG}; text-decoration: underline double {SAME_COLOR}; }}
.m {{ color: {MASKED_TEXT}; }}
.f {{ color: {STATE_COLORS['fixed']}; text-decoration: underline dotted #777; }}
.caption {{ margin: 0 0 0.3em 0; font-size: var(--caption-size, 13px); color: #333; }}
table.metrics {{ border-collapse: collapse; font-size: var(--caption-size, 13px); }}
table.metrics td {{ padding: 1px 10px 1px 0; }}
.best {{ font-weight: bold; }}
"""
# A column's share of the row. At a fixed 280 px minimum, five columns needed about 1,800 px: on a 1366- or
# 1024-pixel projector the fifth (or the fourth and fifth) went onto a second row, under the first screen.
# Each of n columns takes 1/n of the row instead (280 px at most as its minimum, so few columns still wrap
# on a narrow window), and they wrap only where a column would be under MIN_COLUMN px (a phone).
MIN_COLUMN = 150


def column_styles(n: int) -> dict:
    """`styles` of one of `n` columns side by side: equal shares of the row, all n on one row down to
    MIN_COLUMN px each (12 px of each share left for the column's margins)."""
    return {"flex": "1 1 0", "min-width": f"max({MIN_COLUMN}px, min(280px, calc(100% / {n} - 12px)))"}


LEGEND_TEXTS = (" · differing characters in the texts: "
                f'<span style="background:{DIFF_COLOR}"><b><u>bold, underlined</u></b></span> '
                f'(or, where most differ, the agreeing ones: <span style="background:{SAME_BG}; '
                f'text-decoration: underline double {SAME_COLOR}">double underlined</span>)')


def differences_spans(text, marked: np.ndarray, fixed: np.ndarray, mark: str = "d", mask_glyph: str = "█") -> str:
    """The final text (a string, or one string per position: tokens) as spans: marked positions in
    class `mark` (d = differs, s = agrees), template positions underlined dotted."""
    classes = [mark if m else "f" if f else "m" if c == mask_glyph else "" for c, m, f in zip(text, marked, fixed)]
    parts, start = [], 0
    for i in range(1, len(text) + 1):
        if i == len(text) or classes[i] != classes[start]:
            chunk = literal("".join(text[start:i]))
            parts.append(f'<span class="{classes[start]}">{chunk}</span>' if classes[start] else chunk)
            start = i
    return '<p class="canvas">' + "".join(parts) + "</p>"


def differences_html(text: str, texts: list, index: int, fixed: np.ndarray, running: bool = False) -> str:
    """Caption and text. Where most positions differ (unrelated samples), the few that agree are
    marked instead: highlighting nearly every character would say nothing."""
    if not any(t is not None for j, t in enumerate(texts) if j != index):
        caption = ("the other column(s) are not finished: nothing to compare yet" if running
                   else "no other column has a text to compare with")
        marked, mark = np.zeros(len(text), dtype=bool), "d"
    else:
        diff = differing(texts)[index]
        n, L = int(diff.sum()), len(diff)
        if n <= L / 2:
            # short (the legend above says how each is marked): five columns side by side on a projector
            # wrapped a sentence to seven lines, pushing the texts below the first screen
            caption, marked, mark = f"{n} of {L} positions differ (highlighted)", diff, "d"
        else:
            caption = f"{n} of {L} positions differ · {L - n} agree (marked)"
            marked, mark = ~diff, "s"
    return f'<p class="caption">{caption}</p>' + differences_spans(text, marked, fixed, mark)


def best_values(results: list) -> dict:
    """metric -> the best value among the finished columns (only where they differ). A metric that a
    collapse can fool is never marked (RANKED_BY: a one-symbol pattern scores 1.0 on pattern quality
    but not on its period->=2 reading; `the the the` has the lowest gen-PPL but is far from held-out
    text): its collapse-proof reading marks the best column, where it was measured. A collapsed column
    (metrics.looks_collapsed: 'FFFEFFFF…' still scores 0.83 with period 'FFFEFF') takes no quality's best."""
    best = {}
    done = [r for r in results if r and not r.get("error")]
    for metric in (*METRIC_LABELS, "nfe", "seconds"):
        sign = METRIC_DIRECTION.get(metric, -1)  # nfe and time: fewer is better
        if RANKED_BY.get(metric, metric) != metric:
            continue
        every = [r["metrics"][metric] for r in done if metric in r["metrics"]]
        every = [v for v in every if np.isfinite(v)]
        ranked = done if metric in ("nfe", "seconds") else [r for r in done if not r["metrics"].get("collapsed")]
        values = [r["metrics"][metric] for r in ranked if np.isfinite(r["metrics"].get(metric, np.nan))]
        if sign and values and len(every) > 1 and max(every) != min(every):
            best[metric] = max(values) if sign > 0 else min(values)
    return best


def format_metric(metric: str, value: float) -> str:
    """A metric as the table shows it: counts as whole numbers (distinct symbols: 2, not 2.000)."""
    if float(value).is_integer() and metric in ("distinct_symbols", "nfe"):
        return f"{int(value)}"
    return f"{value:.2f}" if metric == "gen_ppl" else f"{value:.3f}"


def metrics_html(metrics: dict, best: dict, steps: int) -> str:
    """The column's metrics, its best values bold; a collapsed column says so first (its scores are not
    a success, whatever they read)."""
    collapsed = bool(metrics.get("collapsed"))
    rows = [(METRIC_LABELS[k], format_metric(k, metrics[k]), k) for k in METRIC_LABELS if k in metrics]
    rows += [("steps / NFE", f"{steps} / {metrics['nfe']}", "nfe"), ("time", f"{metrics['seconds'] * 1000:.0f} ms",
                                                                      "seconds")]
    ranked = lambda k: not collapsed or k in ("nfe", "seconds")  # noqa: E731
    cells = "".join(f'<tr><td>{name}</td><td class="{"best" if ranked(k) and best.get(k) == metrics.get(k) else ""}">'
                    f"{value}</td></tr>" for name, value, k in rows)
    flag = ('<tr class="collapsed"><td colspan="2"><b>collapsed</b>: one symbol fills the text; '
            "not ranked</td></tr>") if collapsed else ""
    return f'<table class="metrics">{flag}{cells}</table>'


class ColumnView(pn.viewable.Viewer):
    """One compared configuration: overrides editor, heatmap, text with differences, metrics."""

    tab = param.ClassSelector(class_=CompareState)
    index = param.Integer(0)

    def __init__(self, x_range, **params):
        super().__init__(**params)
        self.editor = pn.widgets.TextInput(label=f"Column {self.index + 1}", placeholder="session knobs, e.g. steps=8",
                                           sizing_mode="stretch_width", css_classes=["compare-editor"])
        self.editor.param.watch(self._edited, "value")
        self.remove = pn.widgets.Button(label="✕", width=40, align="end", description="Remove this column")
        self.remove.on_click(lambda event: self.tab.remove_column(self.index))
        self.heat = HeatmapFigure(progress=True, labels=False, x_range=x_range, height=300,
                                  tools="xpan,xwheel_zoom,box_zoom,reset", name="compare-heatmap",
                                  names=f"compare-{self.index + 1}")  # its own names (HeatmapFigure)
        self.figure = self.heat.figure
        # five columns on a 1024-pixel projector leave a heatmap about 120 px wide: Bokeh's six ticks over 64
        # positions ran together ("0 102030405060")
        self.figure.xaxis.ticker.desired_num_ticks = 4
        self.title = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 5), css_classes=["compare-title"])
        self.text = pn.pane.HTML("", stylesheets=[TEXT_CSS], sizing_mode="stretch_width", css_classes=["compare-text"])
        self.metrics = pn.pane.HTML("", stylesheets=[TEXT_CSS], css_classes=["compare-metrics"])
        self.result = None  # the result drawn (what the download buttons export)
        self.downloads = pn.Row(*self._download_buttons(), visible=False)
        heatmap = figure_pane(self.figure, "compare-heatmap")
        self.layout = pn.Column(
            self.title, pn.Row(self.editor, self.remove, sizing_mode="stretch_width"),
            heatmap, self.text, self.metrics, self.downloads, sizing_mode="stretch_width",
            styles=column_styles(2), css_classes=["compare-column"])
        # projector mode: the editor goes under the result (the title says the same), so the heatmap
        # starts 100 px higher and lies in a 768-pixel first screen with the lesson bar above it
        figure_first(self.tab.session, self.title, heatmap, self.text, self.metrics)

    def _download_buttons(self) -> list:
        """The column's trajectory as JSON and CSV, made only when clicked. Made once, here: a Panel
        widget created later, in a callback, links its stylesheet from the CDN (offline: an error)."""
        def export(write):
            r = self.result
            return write(r["traj"], r["tokenizer"]) if r and not r.get("error") else None

        n = self.index + 1
        s = self.tab.session
        return [download_button("JSON", f"compare-{n}.json", lambda: export(trajectory_json), session=s),
                download_button("CSV", f"compare-{n}.csv", lambda: export(trajectory_csv), session=s)]

    def _edited(self, event):
        specs = split_columns(self.tab.columns)
        if self.index < len(specs) and event.new.strip() != specs[self.index]:
            if not self.tab.set_column(self.index, event.new):
                self.editor.value = specs[self.index]  # the notice says why; the column is unchanged

    def show_spec(self, spec: str, removable: bool) -> None:
        if self.editor.value != spec:
            self.editor.value = spec
        self.remove.visible = removable

    def show(self, result, texts: list, best: dict, running: bool, model_shown: bool = True) -> None:
        """Draw this column's result (None: still running or not run yet). UI thread: the heatmap is
        a raw Bokeh model. model_shown=False leaves the model's name out of the title (every column
        ran the same one, which the line above the columns names)."""
        # every column is shown again whenever one finishes; a heatmap already showing its result is
        # left as it is (sent again, each finished column's rows cost the page a repaint per column done)
        drawn, self.result = self.result is result, result
        if result is None:
            self.title.object = "<b>sampling …</b>" if running else "<i>not run yet: pick a preset or press Run</i>"
            self._clear()
            return
        if result.get("error"):
            self.title.object = f'<b>{literal(result["label"])}</b>'
            self.text.object = f'<p class="canvas m">{literal(result["error"])}</p>'
            self._clear(text=False)
            return
        frames, cfg = result["frames"], result["config"]
        # not where the label already starts with it (a column's model=<name>): said twice, a title
        # ran onto a second line on a projector
        named = str(result["label"]).startswith(str(result["model"]))
        model = f' <small>({literal(result["model"])})</small>' if model_shown and not named else ""
        self.title.object = f'<b>{literal(result["label"])}</b>{model}'
        if not drawn:
            self.heat.show(frames)
        self.text.object = differences_html(result["pieces"], texts, self.index, frames.fixed, running)
        steps = result["traj"].n_steps if result["kind"] == "ar" else cfg.steps
        note = ("<small>gen-PPL here is judged by the model that wrote the text: low by construction</small>"
                if result["kind"] == "ar" and "gen_ppl" in result["metrics"] else "")
        self.metrics.object = metrics_html(result["metrics"], best, steps) + note
        self.downloads.visible = bool(self.downloads.objects)

    def _clear(self, text: bool = True) -> None:
        self.heat.show(None)
        if text:
            self.text.object = ""
        self.metrics.object = ""
        self.downloads.visible = False

    def __panel__(self):
        return self.layout


class CompareView(pn.viewable.Viewer):
    """Presets, run / stop / add column, the notice, then the columns side by side."""

    tab = param.ClassSelector(class_=CompareState)

    def __init__(self, **params):
        super().__init__(**params)
        t = self.tab
        self._toolbar()
        self.status = pn.pane.HTML("", css_classes=["compare-status"], margin=(5, 10))
        self.info = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10))
        self.stale = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), visible=False,
                                  css_classes=["compare-stale"])
        self.notice = notice("danger", css_classes=["compare-notice"])
        self.x_range = Range1d(-0.5, 255.5)  # shared: pan and zoom move every heatmap together
        self.columns = [ColumnView(self.x_range, tab=t, index=i) for i in range(MAX_COLUMNS)]
        self.legend = pn.pane.HTML(legend_html() + LEGEND_TEXTS, stylesheets=[LEGEND_CSS],
                                   sizing_mode="stretch_width", margin=(0, 10))
        t.param.watch(self._specs, "columns")
        t.param.watch(self._preset, "preset")
        t.param.watch(self._notice, ["error", "base_info", "stale"])
        t.task.param.watch(self._notice, ["status", "running", "error"])
        t.task.param.watch(self._results_changed, ["result", "running"])
        # a model loaded with no run of it yet: its key (a uniform-state model's cells are not [MASK]'s)
        t.session.param.watch(lambda *events: t.session.dispatch(self._key), "model_info")
        # and, with nothing run, empty heatmaps as wide as the canvas a run would fill (not 256 positions)
        t.session.param.watch(lambda *events: t.session.dispatch(self._empty_range), ["length", "model_info"])
        for draw in (self._specs, self._preset, self._notice, self._results):
            draw()
        cols = self.columns
        watch_presentation(t.session, figures=[c.figure for c in cols],
                           panes=[self.status, self.info, self.stale, self.legend, *(c.title for c in cols)],
                           text_panes=[pane for c in cols for pane in (c.text, c.metrics)],
                           # the toolbar and the column editors: at projector type they had stayed small
                           widgets=[*self.preset_buttons.values(), self.run, self.stop, self.add,
                                    *(w for c in cols for w in (c.editor, c.remove))])

    def _toolbar(self) -> None:
        """Preset buttons, Run, Stop and '+ column'."""
        t = self.tab
        # plain buttons, not a radio group: clicking the preset already shown runs it again
        # (no hover help: its popover would cover the neighbouring button)
        self.preset_buttons = {key: pn.widgets.Button(label=label) for key, (label, _) in PRESETS.items()}
        for key, button in self.preset_buttons.items():
            button.on_click(lambda event, key=key: t.apply_preset(key))
        self.presets = pn.FlexBox(*self.preset_buttons.values(), css_classes=["compare-presets"])  # wraps
        self.run = pn.widgets.Button.from_param(t.param.run, color="primary", width=90,
                                                css_classes=["compare-run"])
        self.stop = pn.widgets.Button.from_param(t.param.stop, color="warning", width=80)
        self.add = pn.widgets.Button(label="+ column", width=120, description="Compare one more configuration")
        self.add.on_click(lambda event: t.add_column())

    def _specs(self, *events):
        specs = split_columns(self.tab.columns)
        for i, column in enumerate(self.columns):
            column.layout.styles = {**column.layout.styles, **column_styles(len(specs))}
            column.layout.visible = i < len(specs)
            if i < len(specs):
                column.show_spec(specs[i], removable=len(specs) > 2)
        self.add.disabled = len(specs) >= MAX_COLUMNS

    def _preset(self, *events):
        """The preset shown is filled; 'custom' (edited columns) fills none."""
        for key, button in self.preset_buttons.items():
            button.color = "primary" if key == self.tab.preset else "light"

    def _notice(self, *events):
        """The notice (the columns' or the run's), the status and what every column shares (Panel
        panes, which lock the document themselves)."""
        t, task = self.tab, self.tab.task
        notice = t.error or task.error
        # a link too large to start by itself waits for Run: said as Sweep and Explore say it, not as a failure
        self.notice.alert_type = "info" if notice.startswith(WAITING) else "danger"
        show_notice(self.notice, notice)
        self.status.object = literal(task.status)
        self.stop.disabled = not task.running
        self.info.object = f"<small>Same seed and template in every column: {literal(t.base_info)}</small>" \
            if t.base_info else ""
        # the info line is the run's; the knobs and columns shown are newer
        self.stale.object = f"<b>{literal(t.stale)}</b>" if t.stale else ""
        self.stale.visible = bool(t.stale)

    def _results_changed(self, *events):
        # through the dispatcher: a run starts inside a click's event, which Panel may process without
        # the document lock, and the columns' heatmaps and shared x range are raw Bokeh models
        self.tab.session.dispatch(self._results)

    def _results(self):
        """Every column drawn from the task's results (UI thread, document locked)."""
        tab = self.tab
        results = tab.results
        texts, best = tab.texts(), best_values(results)
        # one model in every column: its name once, in the line above them (a title with it wrapped
        # onto two lines in a fifth of a 1024-pixel row)
        shown = len({r["model"] for r in results if r and not r.get("error")}) > 1
        for i, column in enumerate(self.columns):
            column.show(results[i] if i < len(results) else None, texts, best, tab.running, shown)
        frames = [r["frames"] for r in results if r and not r.get("error")]
        if frames:
            self.x_range.update(start=-0.5, end=max(f.length for f in frames) - 0.5)
        else:
            self._empty_range()
        self._key()

    def _empty_range(self):
        """Before any column has run (refused, or waiting for Run): the positions of the session's canvas."""
        if not any(r and not r.get("error") for r in self.tab.results):
            self.x_range.update(start=-0.5, end=max(int(self.tab.session.length), 1) - 0.5)

    def _key(self):
        """The colour key of each shown run's process; before any has run (a refused or waiting comparison),
        of the loaded model's, not [MASK]'s. Drawn with the results and when the session's model changes."""
        tab = self.tab
        frames = [r["frames"] for r in tab.results if r and not r.get("error")]
        if frames:
            processes = [getattr(f, "process", "masked") for f in frames]
        else:
            processes = [model_process(tab.session.model)] if tab.session.model is not None else ["masked"]
        key = legends_html(processes) + LEGEND_TEXTS
        if self.legend.object != key:
            self.legend.object = key

    def __panel__(self):
        # side by side, each a 1/n share (column_styles); wrapped only where a column would be under 150 px
        columns = side_by_side(*self.columns)
        # wraps instead of cutting the status off (projector type, narrow windows)
        actions = pn.FlexBox(self.run, self.stop, self.add, self.status, sizing_mode="stretch_width",
                             align_items="center")
        # projector mode: Run, the notice and the stale line above the heatmaps and texts, the rest after
        # (a notice that said "press Run", or that the columns drawn are out of date, sat above a Run button
        # and a line below the first screen)
        figure_first(self.tab.session, actions, self.notice, self.stale, columns)
        return pn.Column(self.presets, actions, self.notice, self.stale, self.info, self.legend, columns,
                         sizing_mode="stretch_width", css_classes=["compare-view"])
