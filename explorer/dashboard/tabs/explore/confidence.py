"""Per-position confidence: every decided position's confidence when it was committed (by default),
the scores of the proposals at the selected step with committed ones marked, or the model's mean
per-position confidence at masking ratio t over validation text (metrics.py)."""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColumnDataSource, CustomJSHover, HoverTool, Range1d
from bokeh.plotting import figure
from bokeh.transform import linear_cmap

from ....sampling.uniform import model_process
from ...ui.base import StateView, apply_fonts, notice, show_notice, watch_presentation
from ...ui.heatmap import sync_glyphs
from ...ui.palette import BAR_COMMITTED, BAR_MEAN, BAR_PROPOSED, INK
from .state.confidence import CONFIDENCE_VIEWS, MEAN_VIEW

TOOLTIPS = [("position", "@x"), ("value", "@top{0.000}"), ("confidence", "@conf{0.000}"),
            ("proposal", "@proposal{custom}"), ("committed (1 = yes)", "@done")]
GLYPH = "return value < 0 ? '' : vocab.data.glyph[value];"  # proposal id -> character, in the browser


def _empty() -> dict:
    return {"x": np.zeros(0, np.int32), "top": np.zeros(0), "conf": np.zeros(0), "done": np.zeros(0, np.int8),
            "proposal": np.zeros(0, np.int32), "mark": np.zeros(0)}


def step_bars(frames, row: int) -> dict:
    """Bars for the proposals of the step that produced `row` (row 0 has none); numeric columns only."""
    scores, conf = frames.scores[row], frames.step_conf[row]
    keep = ~np.isnan(scores)  # only positions that were masked going into the step
    done = frames.committed[row][keep]
    top = scores[keep].astype(np.float64)
    return {"x": np.flatnonzero(keep).astype(np.int32), "top": top, "conf": conf[keep].astype(np.float64),
            "done": done.astype(np.int8), "proposal": frames.proposals[row][keep].astype(np.int32),
            "mark": np.where(done, top, np.nan)}


def committed_bars(frames, row: int) -> dict:
    """Bars for every position decided by `row`, at the confidence it was committed with (the
    proposals of one step alone are a few bars, and none once steps exceed the length); ▼ marks the positions
    that `row` committed. Template positions are given, not committed: no bar."""
    conf = frames.bar_conf[row]  # a uniform-state run's settled positions with the confidence they settled at
    keep = ~np.isnan(conf)
    done = frames.committed[row][keep]
    top = conf[keep].astype(np.float64)
    return {"x": np.flatnonzero(keep).astype(np.int32), "top": top, "conf": top, "done": done.astype(np.int8),
            "proposal": frames.tokens[row][keep].astype(np.int32), "mark": np.where(done, top, np.nan)}


def mean_bars(table) -> dict:
    top = table["confidence"].to_numpy(dtype=np.float64)
    n = len(top)
    return {"x": table["position"].to_numpy().astype(np.int32), "top": top, "conf": top,
            "done": np.full(n, 2, np.int8), "proposal": np.full(n, -1, np.int32), "mark": np.full(n, np.nan)}


def _y_extent(values) -> dict:
    """Bars start at 0; scores may be negative (e.g. entropy-based ones); 10% headroom for the marks."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    lo, hi = (min(0.0, v.min()), max(0.0, v.max())) if v.size else (0.0, 1.0)
    pad = 0.1 * (hi - lo) or 0.1
    return {"start": lo - (pad if lo < 0 else 0.0), "end": hi + pad}


class ConfidenceView(StateView):
    """Bars per position; a toggle switches to the validation-set mean at t."""

    def __init__(self, **params):
        super().__init__(**params)
        self.source = ColumnDataSource(_empty(), name="confidence-bars")
        self.vocab = ColumnDataSource({"glyph": []})
        self._glyphs_of = None  # the glyph table `vocab` was made from
        self.figure = self._make_figure()
        self.pane = pn.pane.Bokeh(self.figure, sizing_mode="stretch_width")
        self.mode = pn.widgets.RadioButtonGroup.from_param(self.state.param.confidence_view, color="default",
                                                           sizing_mode="stretch_width", css_classes=["confidence-mode"])
        self.t = pn.widgets.FloatSlider.from_param(self.state.param.confidence_t, throttled=True,
                                                   sizing_mode="stretch_width")
        self.notice = notice("warning")
        self._draw()
        self._fonts()
        self._show_error()
        self.on(self.state.confidence, "error", self._show_error)
        self.on(self.state.confidence, "result", self._draw)
        self.on(self.state.session, "presentation", self._fonts)
        watch_presentation(self.state.session, widgets=(self.mode, self.t))

    def _show_error(self):
        error = self.state.confidence.error
        show_notice(self.notice, error)

    def _make_figure(self):
        # Explicit ranges: an auto range over an empty source makes BokehJS log warnings.
        p = figure(height=230, sizing_mode="stretch_width", x_range=Range1d(-0.5, 255.5), y_range=Range1d(0, 1),
                   tools="xpan,xwheel_zoom,reset,save", toolbar_location="above", x_axis_label="position",
                   y_axis_label="score", title="Proposals at this step", name="confidence")
        p.toolbar.autohide = True  # shown on hover: above the plot it covered the end of the long titles
        # colour by `done`: 0 proposed, 1 committed, 2 the validation mean (the marker shape differs too)
        color = linear_cmap("done", [BAR_PROPOSED, BAR_COMMITTED, BAR_MEAN], 0, 2)
        bars = p.vbar(x="x", top="top", width=0.85, fill_color=color, line_color=color, source=self.source)
        p.scatter(x="x", y="mark", marker="inverted_triangle", size=7, color=INK, source=self.source)
        glyph = CustomJSHover(args=dict(vocab=self.vocab), code=GLYPH)
        p.add_tools(HoverTool(renderers=[bars], tooltips=TOOLTIPS, formatters={"@proposal": glyph}))
        p.toolbar.logo = None
        p.xgrid.visible = False
        return p

    @param.depends("state.step", "state.n_rows", "state.run_id", "state.running", "state.confidence_view",
                   watch=True)
    def _draw(self):
        frames, view = self.state.frames, self.state.confidence_view
        mean = view == MEAN_VIEW
        self.t.visible = mean
        p = self.figure
        if mean:
            table = self.state.confidence.result
            data = mean_bars(table) if table is not None else _empty()
            # a uniform-state model's: at the characters its noise changed (metrics.noised_view)
            model = self.state.session.model
            where = " (changed)" if model is not None and model_process(model) == "uniform" else ""
            p.title.text = (f"Validation mean, t = {self.state.confidence_t:.2f}{where}"
                            if table is not None else "Computing the validation mean …")
            p.yaxis.axis_label = self._axis("mean max-probability", "mean max-prob.")
        elif view == CONFIDENCE_VIEWS[0]:
            row = self.state.shown_step
            data = committed_bars(frames, row) if frames is not None and row > 0 else _empty()
            # a uniform-state run accepts anew at every step and settles a block at its end: no commit (a
            # settled position shows its confidence at the step it settled; "accepted or settled" ran past
            # the title's room at 1366 pixels)
            when = "accepted" if frames is not None and frames.process == "uniform" else "committed"
            p.title.text = self._title(f"Confidence when {when}", "▼ newest step", row, "▼ this step")
            p.yaxis.axis_label = self._axis(f"confidence when {when}", "confidence")
        else:
            row = self.state.shown_step
            data = step_bars(frames, row) if frames is not None and row > 0 else _empty()
            # one title while a run streams: a title that changes every tick re-lays the figure out
            p.title.text = self._title("Proposals", "newest step, ▼ committed", row, "▼ committed")
            p.yaxis.axis_label = self._axis(f"score ({self.state.session.strategy})", "score")
        if frames is not None:
            p.x_range.update(start=-0.5, end=frames.length - 0.5)
            self._glyphs_of = sync_glyphs(self.vocab, frames.glyphs, self._glyphs_of)  # a new model's, once
        self.source.data = data
        extent = _y_extent(data["top"])
        if self.state.running and not mean:  # while a run streams the range only grows (fewer re-layouts)
            extent = {"start": min(extent["start"], p.y_range.start), "end": max(extent["end"], p.y_range.end)}
        p.y_range.update(**extent)
        self.push(self.pane)

    def _title(self, what: str, live: str, row: int, done: str) -> str:
        """One title while a run streams (a title that changes every tick re-lays the figure out), the
        step after it. In presentation type the plot's name goes (the view selector above says it):
        the whole title ran past a 390-pixel column at 1366 px."""
        short = self.state.session.presentation
        if self.state.running:
            return live.capitalize() if short else f"{what} ({live})"
        if row <= 0:
            return "Pick a step ≥ 1" if short else f"{what}: pick a step ≥ 1"
        return f"Step {row} ({done})" if short else f"{what}, step {row} ({done})"

    def _axis(self, label: str, short: str) -> str:
        """The y axis's label; in presentation type the short one (the view selector says which): the long
        ones ran past the 230-pixel plot's height at 1366 x 768 ('confidence when committe')."""
        return short if self.state.session.presentation else label

    def _fonts(self):
        apply_fonts(self.figure, self.state.session.presentation)
        self._draw()  # the titles' length follows the type size too

    def __panel__(self):
        return pn.Column(self.mode, self.t, self.notice, self.pane, sizing_mode="stretch_width",
                         css_classes=["confidence-view"])
