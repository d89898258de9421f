"""Inspect's figures: the mask-fraction check of the forward process, accuracy and mean confidence vs t on
validation text, the mean confidence by position at t, the masking ratios trained on (BERT vs diffusion)
and the top-p exercise at one masked position.

Each is a Bokeh figure made once per view and drawn again in place (`draw` sets its sources, title and
ranges): moving t or a result's arrival sends the page a few changed values, where a figure made anew
(HoloViews re-rendering a DynamicMap, or a pane given a new object) cost the server a render and the
page a new plot to build and lay out, several times over while an Inspect link opens. The `*_plot`
functions make a standalone figure, drawn once, for the downloads and the tests."""
from __future__ import annotations

import math

import numpy as np
from bokeh.core.property.vectorization import value
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Range1d, Span
from bokeh.plotting import figure

from ...ui.base import apply_fonts
from .markup import CORRECT, SHOWN_AS, WRONG
from .masking import FRACTION_DRAWS

CUT = "#bbbbbb"  # a candidate the nucleus leaves out
MARK = "#999"  # the current t


def _figure(title: str, height: int, x_label: str, y_label: str, **ranges):
    """A figure stretched to its column, no toolbar (hover still answers), the given ranges."""
    p = figure(title=title, height=height, sizing_mode="stretch_width", toolbar_location=None, tools="",
               x_axis_label=x_label, y_axis_label=y_label, **ranges)
    p.toolbar.logo = None
    return p


class _Plot:
    """What the figures share: their `figure` (made by each) at normal or projector type size."""

    def __init__(self, presentation: bool):
        self.presentation = presentation

    def fonts(self, presentation: bool | None = None) -> None:
        """The type size `presentation` (None: the one it has), for the legends drawn since too."""
        if presentation is not None:
            self.presentation = presentation
        size = apply_fonts(self.figure, self.presentation)
        for legend in self.figure.legend:
            legend.label_text_font_size = size["plot"]


def _t_mark(p, t: float) -> Span:
    span = Span(location=float(t), dimension="height", line_color=MARK, line_width=1)
    p.add_layout(span)
    return span


class FractionPlot(_Plot):
    """"The Forward Process": the fraction masked vs t (mean ± std over draws), y = t, and this text's
    own fraction at the current t."""

    def __init__(self, presentation: bool = False):
        super().__init__(presentation)
        self.figure = p = _figure("Forward process: fraction masked vs t", 300, "masking ratio t",
                                  "fraction masked", x_range=Range1d(-0.02, 1.02), y_range=Range1d(-0.02, 1.02))
        self.draws = ColumnDataSource({"t": [], "mean": [], "low": [], "high": []})
        self.actual = ColumnDataSource({"t": [], "fraction": []})
        self.expected = ColumnDataSource({"t": [0.0, 1.0], "expected": [0.0, 1.0]})
        p.line("t", "expected", source=self.expected, color="#777", line_dash="dashed",
               legend_label="expected (y = t)")
        p.line("t", "mean", source=self.draws, color=CORRECT, line_width=2,
               legend_label=f"mean of {FRACTION_DRAWS} draws")
        p.segment("t", "low", "t", "high", source=self.draws, color=CORRECT)
        p.scatter("t", "fraction", source=self.actual, marker="diamond", size=14, color=WRONG,
                  legend_label="this text")
        self.t_mark = _t_mark(p, 0.0)
        p.legend.location = "top_left"
        self._table = None
        self.fonts()

    def draw(self, table, t: float, actual: float | None) -> FractionPlot:
        """`table`: masking.fraction_check's (t, masked_fraction, std); `actual`: this text's fraction
        masked at `t` (None: no text). The draws are sent again only for another table."""
        if table is not self._table:
            mean, std = table["masked_fraction"].to_numpy(float), table["std"].to_numpy(float)
            self.draws.data = {"t": table["t"].to_numpy(float), "mean": mean, "low": mean - std, "high": mean + std}
            if "expected" in table:  # a uniform-state process changes t (N - 1) / N of the positions, not t
                self.expected.data = {"t": table["t"].to_numpy(float), "expected": table["expected"].to_numpy(float)}
            self._table = table
        # no text: a point at NaN, drawn nowhere (an empty source would leave its legend entry without a marker)
        self.actual.data = {"t": [float(t)], "fraction": [float(actual) if actual is not None else np.nan]}
        self.t_mark.location = float(t)
        return self


    def words(self, noised: bool) -> None:
        """The title and labels of a masked process, or (`noised`) of a uniform-state one: the share of
        positions its noise changed."""
        what = "changed" if noised else "masked"
        self.figure.title.text = f"Forward process: fraction {what} vs t"
        self.figure.yaxis.axis_label = f"fraction {what}"
        self.figure.xaxis.axis_label = "noise level t" if noised else "masking ratio t"
        self.figure.legend.items[0].label = value("expected (t × (N − 1) / N)" if noised else "expected (y = t)")


class AccuracyPlot(_Plot):
    """Argmax accuracy at masked positions vs t, with the mean top-1 probability ("Training with the ELBO",
    "The Forward Process"); the points arrive one t at a time."""

    def __init__(self, presentation: bool = False):
        super().__init__(presentation)
        self.figure = p = _figure("Accuracy vs masking ratio (validation)", 300, "masking ratio t",
                                  "accuracy, confidence", x_range=Range1d(0, 1), y_range=Range1d(0, 1.02))
        self.source = ColumnDataSource({"t": [], "accuracy": [], "confidence": []})
        p.line("t", "accuracy", source=self.source, color=CORRECT, line_width=3, legend_label="accuracy (top-1)")
        acc = p.scatter("t", "accuracy", source=self.source, color=CORRECT, size=8)
        p.line("t", "confidence", source=self.source, color=WRONG, line_width=2, line_dash="dashed",
               legend_label="mean confidence")
        conf = p.scatter("t", "confidence", source=self.source, color=WRONG, size=7, marker="square")
        p.add_tools(HoverTool(renderers=[acc, conf], tooltips=[("t", "@t{0.0}"), ("accuracy", "@accuracy{0.000}"),
                                                                ("mean confidence", "@confidence{0.000}")]))
        self.t_mark = _t_mark(p, 0.0)
        # accuracy falls as t grows: low t is high, high t lower; the bottom left stays clear of the curves
        p.legend.location = "bottom_left"
        self.fonts()

    def draw(self, table, t: float) -> AccuracyPlot:
        """`table`: metrics.accuracy_vs_t's rows so far (None: none yet)."""
        self.rows(table)
        self.move(t)
        return self

    def rows(self, table) -> None:
        if table is None or not len(table):  # one row of NaN, drawn nowhere: the legend keeps its markers
            self.source.data = {"t": [np.nan], "accuracy": [np.nan], "confidence": [np.nan]}
            return
        self.source.data = {"t": table["t"].to_numpy(float), "accuracy": table["accuracy"].to_numpy(float),
                            "confidence": table["mean_confidence"].to_numpy(float)}

    def move(self, t: float) -> None:
        self.t_mark.location = float(t)

    def words(self, noised: bool) -> None:
        """A masked process's words, or (`noised`) a uniform-state one's: accuracy where the noise changed
        a character."""
        # short: at projector type a longer title ran past a 1366-pixel page's half ("(validation"), and this
        # one past a 1024-pixel page's ("(validati"); the section's heading says the text is held out
        self.figure.title.text = ("Accuracy at changed characters" if noised
                                  else "Accuracy vs masking ratio (validation)")
        self.figure.xaxis.axis_label = "noise level t" if noised else "masking ratio t"
        # its accuracy is low at every t (a changed character is not flagged): the top right is clear
        self.figure.legend.location = "top_right" if noised else "bottom_left"


class PositionsPlot(_Plot):
    """As in "Training with the ELBO": the mean max-probability at each position when it is masked, at
    ratio t."""

    def __init__(self, presentation: bool = False):
        super().__init__(presentation)
        self.figure = p = _figure("Mean confidence by position (computing …)", 260, "position",
                                  "mean max-probability", x_range=Range1d(-0.5, 0.5), y_range=Range1d(0, 1.02))
        self.source = ColumnDataSource({"position": [], "confidence": []})
        bars = p.vbar(x="position", top="confidence", width=1.0, source=self.source, fill_color=CORRECT,
                      fill_alpha=0.8, line_color=None)
        p.add_tools(HoverTool(renderers=[bars], tooltips=[("position", "@position"),
                                                          ("confidence", "@confidence{0.000}")]))
        p.xgrid.visible = False
        self.fonts()

    def words(self, noised: bool) -> None:
        """The y label: at the positions masked, or (`noised`) changed by a uniform-state model's noise."""
        self.figure.yaxis.axis_label = "mean max-probability" + (" where changed" if noised else "")

    def draw(self, table, t: float, missing: bool = False) -> PositionsPlot:
        """`table`: the mean-confidence table at t (the t it was measured at, when it says; None: not yet);
        `missing`: there is no held-out text to measure it on (the title says so instead of "computing")."""
        conf = np.zeros(0) if table is None else np.nan_to_num(table["confidence"].to_numpy(dtype=float))
        shown = t if table is None else table.attrs.get("t", t)
        self.figure.title.text = (f"Mean confidence by position, t = {shown:.2f} (validation)" if table is not None
                                  else "Mean confidence by position (no held-out text on this server)" if missing
                                  else "Mean confidence by position (computing …)")
        self.source.data = {"position": np.arange(len(conf)), "confidence": conf}
        self.figure.x_range.update(start=-0.5, end=max(len(conf), 1) - 0.5)
        return self


class RatiosPlot(_Plot):
    """"The Forward Process" §4.4: how often each corruption ratio is trained on, BERT's fixed 15% against
    diffusion's t ~ U(0, 1), as histograms of real draws (metrics.training_ratios): the share masked, or
    for a uniform-state model the share its noise changed. `sources` holds one source per scheme drawn;
    a model of the other process redraws the second histogram in place and renames it."""

    EDGES = np.linspace(0, 1, 41)

    def __init__(self, presentation: bool = False):
        super().__init__(presentation)
        self.figure = _figure("Masking ratios trained on: BERT vs diffusion", 260, "masking ratio of a training row",
                              "share of training rows", x_range=Range1d(0, 1))
        self.sources: dict[str, ColumnDataSource] = {}
        self.fonts()

    def draw(self, table) -> RatiosPlot:
        """`table`: metrics.training_ratios's (scheme, fraction) rows, BERT's first."""
        schemes = list(dict.fromkeys(table["scheme"]))
        noised = schemes[-1].startswith("uniform")
        for slot, (scheme, color) in enumerate(zip(schemes, (WRONG, CORRECT))):
            rows = table.loc[table["scheme"] == scheme, "fraction"]
            counts, _ = np.histogram(rows, bins=self.EDGES)
            data = {"left": self.EDGES[:-1], "right": self.EDGES[1:], "share": counts / max(len(rows), 1)}
            if slot < len(self.sources):  # drawn before: the same renderer, its label the new scheme's
                old = list(self.sources)[slot]
                source = self.sources.pop(old) if old != scheme else self.sources[old]
                source.data = data
                self.sources[scheme] = source
                self.figure.legend.items[slot].label = value(scheme)
                continue
            self.sources[scheme] = source = ColumnDataSource(data)
            self.figure.quad(left="left", right="right", top="share", bottom=0, source=source, fill_color=color,
                             fill_alpha=0.6, line_color=None, legend_label=scheme)
            self.figure.legend.location = "top_right"
            self.fonts()  # the new legend entry at the figure's type size
        self.sources = {scheme: self.sources[scheme] for scheme in schemes}  # BERT first, as the legend
        self.figure.title.text = ("Corruption trained on: BERT vs uniform-state" if noised
                                  else "Masking ratios trained on: BERT vs diffusion")
        self.figure.xaxis.axis_label = ("share of a training row masked / changed" if noised
                                        else "masking ratio of a training row")
        return self


class NucleusPlot(_Plot):
    """The top-p exercise of "Generation: Iterative Unmasking", at one masked position of the text: the
    model's most likely tokens, sorted, those the nucleus keeps in blue with their renormalised probability,
    the rest struck off (grey)."""

    SHOWN = 24  # candidates drawn

    def __init__(self, presentation: bool = False):
        super().__init__(presentation)
        self.figure = p = _figure("Top-p: no masked position yet", 300, "candidate (most likely first)",
                                  "probability", x_range=FactorRange(), y_range=Range1d(0, 1.02))
        self.source = ColumnDataSource({"token": [], "p": [], "renormalised": [], "fate": [], "color": []})
        bars = p.vbar(x="token", top="p", width=0.8, source=self.source, fill_color="color", line_color="color")
        p.add_tools(HoverTool(renderers=[bars], tooltips=[("token", "@token"), ("p", "@p{0.000}"),
                                                          ("renormalised", "@renormalised{0.000}"), ("fate", "@fate")]))
        p.xaxis.major_label_orientation = math.pi / 3
        p.xgrid.visible = False
        self.fonts()

    def draw(self, result: dict | None, position: int | None, p: float, asked: int = -1) -> NucleusPlot:
        """`result`: Inspect's predictions (None: none yet); `position`: the masked position shown; `p`: top-p;
        `asked`: the position the knob asked for (-1: the first masked one), named when it is not shown."""
        from ....metrics import nucleus

        if result is None or position is None or not len(result["table"]):
            what = "changed" if result is not None and "changed" in result else "masked"  # uniform-state noise
            self.figure.title.text = f"Top-p: no {what} position yet"
            self.source.data = {"token": [], "p": [], "renormalised": [], "fate": [], "color": []}
            self.figure.x_range.factors = []
            return self
        row = list(result["table"]["position"]).index(position)
        head_p = result["head_p"][row]
        kept = nucleus(head_p, p)
        shown = self.SHOWN
        names = [f"{i + 1}. {SHOWN_AS.get(n, n)}" for i, n in enumerate(result["head_names"][row][:shown])]
        renorm = np.where(kept, head_p / head_p[kept].sum(), 0.0)
        fate = ["kept" if k else "cut" for k in kept[:len(names)]]
        self.source.data = {"token": names, "p": head_p[:len(names)].astype(float),
                            "renormalised": renorm[:len(names)].astype(float), "fate": fate,
                            "color": [CORRECT if f == "kept" else CUT for f in fate]}
        self.figure.x_range.factors = names
        more = f" (+{int(kept.sum()) - shown} more kept)" if kept.sum() > shown else ""
        what = "changed" if "changed" in result else "masked"
        # a position the text does not mask at this t: said, not silently replaced by the first
        instead = f" ({asked} is not {what} here)" if asked not in (-1, position) else ""
        self.figure.title.text = (f"Top-p = {p:.2f} at position {position}{instead}: {int(kept.sum())} token(s) "
                                  f"kept, mass {float(head_p[kept].sum()):.3f}{more}")
        return self


# ---------------------------------------------------------------- standalone figures (downloads, tests)


def fraction_plot(table, t: float, actual: float | None, presentation: bool = False, noised: bool = False):
    """FractionPlot's figure, drawn once (`noised`: a uniform-state model's words)."""
    plot = FractionPlot(presentation)
    plot.words(noised)
    return plot.draw(table, t, actual).figure


def accuracy_plot(table, t: float, presentation: bool = False, noised: bool = False):
    """AccuracyPlot's figure, drawn once (`noised`: a uniform-state model's words)."""
    plot = AccuracyPlot(presentation)
    plot.words(noised)
    return plot.draw(table, t).figure


def positions_plot(table, t: float, presentation: bool = False, missing: bool = False):
    """PositionsPlot's figure, drawn once."""
    return PositionsPlot(presentation).draw(table, t, missing).figure


def ratios_plot(table, presentation: bool = False):
    """RatiosPlot's figure, drawn once."""
    return RatiosPlot(presentation).draw(table).figure


def nucleus_plot(result: dict | None, position: int | None, p: float, presentation: bool = False):
    """NucleusPlot's figure, drawn once."""
    return NucleusPlot(presentation).draw(result, position, p).figure
