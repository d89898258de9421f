"""Quality vs steps: the sweep's curves and sweet spots (explorer.plots), with a progress bar.

The sweep itself runs in the state (state/quality.py); this view only draws the DataFrames it returns.
"""
from __future__ import annotations

import logging

import panel as pn
import param

from ....experiments import pick_metric
from ...ui.base import StateView, checkbox, notice, show_notice, watch_presentation
from ...ui.legend import BELOW, legend_columns, short_stars
from ...ui.palette import FONT
from ...ui.safe import literal

log = logging.getLogger(__name__)

# what an empty panel says (auto-sweep off: `serve --no-auto-sweep`, a class's server), instead of a blank
IDLE_HINT = "not computed for these knobs yet: press Compute"


def x_axis_type(size: str):
    """A bokeh hook: the x axis's tick labels and title at `size`."""
    def hook(plot, element):
        for axis in plot.state.xaxis:
            axis.major_label_text_font_size = axis.axis_label_text_font_size = size
    return hook


def quality_figure(summary, metric: str, x: str, presentation: bool):
    """The shared quality-vs-steps figure (sweet spots starred by explorer.plots), styled for the
    dashboard: stretched to the column, legend below, hover on every curve, the presentation fonts."""
    import holoviews as hv

    from ....plots import quality_speed_plot

    font = FONT[presentation]
    # No title: the heading, the metric select and the axis labels name it, and in presentation type a
    # title ran past a 410-pixel column (the downloads keep theirs). There the legend takes one column
    # (three ran past the page's edge), and the figure the height that leaves the curves theirs. At normal
    # type two: three ran past a 1366-pixel page's column ("sweet sp").
    plot = quality_speed_plot(summary, metric, x=x, height=620 if presentation else 380, title="")  # width=None: responsive
    plot = plot.map(lambda el: el.opts(tools=["hover"]), [hv.Curve, hv.Scatter])
    # the stars' short name at every type size: the rule in words ran past the column's edge at projector
    # type, and at normal type too whenever it fell in the legend's second column (a uniform-state model's
    # one curve: "sweet spot: fewest steps reaching 90" at 1366 pixels)
    plot = short_stars(plot)
    # HoloViews leaves the x axis at its default type under a second y axis (multi_y): set here, after the
    # plot's own hooks (its ticks), so a projector's x axis reads as its y axes do
    plot = plot.opts(hooks=[*plot.opts.get().kwargs.get("hooks", []), x_axis_type(font["plot"])])
    return plot.opts(
        **BELOW, legend_cols=1 if presentation else legend_columns([el.label for el in plot]),
        fontsize={"title": font["title"], "labels": font["plot"], "xticks": font["plot"],
                  "yticks": font["plot"], "legend": font["plot"]})


class QualityView(StateView):
    """Controls of the sweep, its progress, and the plot."""

    def __init__(self, **params):
        super().__init__(**params)
        p = self.state.param
        self.strategies = pn.widgets.CheckButtonGroup.from_param(
            p.sweep_strategies, sizing_mode="stretch_width",
            stylesheets=[".bk-btn-group { flex-wrap: wrap; }"])  # five names overflow a 1024 px column
        self.x = pn.widgets.RadioButtonGroup.from_param(p.sweep_x, css_classes=["quality-x"])
        self.metric = pn.widgets.Select.from_param(p.sweep_metric, width=180)
        self.samples = pn.widgets.IntInput.from_param(p.sweep_samples, width=120)
        self.auto = checkbox(p.sweep_auto)
        self.compute = pn.widgets.Button.from_param(p.compute_sweep, color="primary", width=100)
        self.stop = pn.widgets.Button.from_param(p.stop_sweep, color="warning", width=80)
        self.progress = pn.indicators.Progress(value=0, max=100, sizing_mode="stretch_width", height=14,
                                               bar_color="primary", css_classes=["sweep-progress"])
        self.status = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10))
        self.compared = pn.pane.HTML("", sizing_mode="stretch_width", margin=(0, 10), css_classes=["quality-compared"])
        self.notice = notice("danger")
        self.plot = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=380, name="quality-plot",
                                      css_classes=["quality-plot"])  # a lesson link scrolls to it
        self._progress()
        self._draw()
        watch_presentation(self.state.session, widgets=(self.strategies, self.x, self.metric, self.samples,
                                                        self.auto, self.compute, self.stop))
        self.on(self.state.quality, ["progress", "status", "error", "running", "result"], self._progress)
        self.on(self.state.quality, "result", self._draw)
        self.on(self.state.session, "presentation", self._draw)
        self._compared()
        self.on(self.state.session, "strategy", self._compared)
        self.on(self.state, "sweep_strategies", self._compared)
        self.on(self.state.session, "temperature", self._compared)
        self.on(self.state.session, "model_info", self._compared)

    def _compared(self):
        self.compared.object = f"<i>{literal(self.state.strategy_note())}</i>"
        self.strategies.disabled = not self.state.reads_strategy()  # a uniform-state run reads none

    def _progress(self):
        task = self.state.quality
        self.progress.value = task.progress
        self.progress.active = task.running
        self.progress.visible = task.running or task.result is not None  # no empty bar under "press Compute"
        self.stop.disabled = not task.running  # as the sidebar's Stop: lit only while there is work to stop
        status = task.status or ("" if task.running or task.result is not None else IDLE_HINT)
        self.status.object = f"Quality vs steps: {literal(status)}" if status else "Quality vs steps"
        show_notice(self.notice, task.error)

    @param.depends("state.sweep_x", "state.sweep_metric", watch=True)
    def _draw(self):
        result = self.state.quality.result
        if result is None:
            self.plot.object = None
            return
        summary = result[1]
        metric = pick_metric(summary, self.state.sweep_metric)
        if metric is None:
            show_notice(self.notice, "the sweep measured no quality metric")
            return
        try:
            self.plot.object = quality_figure(summary, metric, self.state.sweep_x, self.state.session.presentation)
        except Exception as e:  # a notice beside the plot; the session must survive a plotting bug
            log.exception("quality plot failed")
            show_notice(self.notice, f"cannot plot: {e}")

    def __panel__(self):
        return pn.Column(
            self.status, self.progress, self.compared, self.strategies,
            # FlexBox, not Row: at 1366 px a Row ran past the column's edge, clipping "Samples"
            pn.FlexBox(self.x, self.metric, self.samples, align_items="end", sizing_mode="stretch_width"),
            pn.FlexBox(self.compute, self.stop, self.auto, align_items="center", sizing_mode="stretch_width"),
            self.notice, self.plot, sizing_mode="stretch_width", css_classes=["quality-view"])
