"""Explore's live trajectory heatmap: the session's run drawn row by row as the sampler takes steps.

One RGBA image (ui/heatmap.HeatmapFigure) whose rows are patched in as steps arrive: the browser
repaints a single bitmap per step (8k rect glyphs cost it ~40 ms a step; an invisible text glyph
over all cells ~250 ms). Only new rows are ever sent.
"""
from __future__ import annotations

import panel as pn
import param

from ...ui.base import StateView, apply_fonts
from ...ui.heatmap import LEGEND_CSS, HeatmapFigure, legend_html


class HeatmapView(StateView):
    """The live trajectory heatmap, its colour key and the selected-step marker."""

    def __init__(self, **params):
        super().__init__(**params)
        self.heat = HeatmapFigure(marker=True, names="trajectory", title="Trajectory: step × position",
                                  name="heatmap")
        self.figure = self.heat.figure
        self.pane = pn.pane.Bokeh(self.figure, sizing_mode="stretch_width", min_height=260)
        self.legend = pn.pane.HTML(legend_html(), stylesheets=[LEGEND_CSS], sizing_mode="stretch_width",
                                   margin=(0, 10))
        self._redraw()
        self._fonts()
        self.on(self.state.session, "presentation", self._fonts)

    @param.depends("state.run_id", watch=True)
    def _redraw(self):
        """A new run: a blank bitmap sized for the steps it will take, and no cells; the key of its
        process's cell states."""
        process = getattr(self.state.frames, "process", "masked")
        key = legend_html(process)
        if self.legend.object != key:
            self.legend.object = key
        self.heat.start(self.state.frames)
        self._append()

    @param.depends("state.n_rows", watch=True)
    def _append(self):
        self.heat.append(self.state.frames)
        self.push(self.pane)

    @param.depends("state.running", watch=True)
    def _fit(self):
        """A run that ended early (its stop rule, threshold decoding) shows its rows, not its planned ones."""
        if not self.state.running:
            self.heat.fit(self.state.frames)
            self.push(self.pane)

    @param.depends("state.step", "state.running", watch=True)
    def _mark_step(self):
        """The scrubbed step, outlined once the run has ended (while it runs, the newest row is the
        last drawn one: moving an outline every step would repaint the figure every step)."""
        self.heat.mark(None if self.state.running else self.state.shown_step)
        self.push(self.pane)

    def _fonts(self):
        size = apply_fonts(self.figure, self.state.session.presentation)
        self.legend.styles = {"font-size": size["base"]}
        self.push(self.pane)

    def __panel__(self):
        return pn.Column(self.pane, self.legend, sizing_mode="stretch_width", css_classes=["heatmap-view"])
