"""The Inspect tab's view: its controls, the masked text, the candidates at t, the validation plots and
the downloads, drawn from an InspectState and its Tasks."""
from __future__ import annotations

import panel as pn
import param

from ....data.tokenizer import is_subword
from ...downloads import download_button, plot_html, plot_png, table_csv
from ...ui.palette import FONT
from ...ui.safe import literal
from .markup import (
    forward_caption,
    forward_html,
    legend_html,
    noised_caption,
    noised_html,
    predictions_caption,
    predictions_html,
    predictions_table,
    several_html,
    several_style,
    style,
)
from .masking import draw_noised, fraction_check, noise_tokens, pieces, positions
from .plots import AccuracyPlot, FractionPlot, NucleusPlot, PositionsPlot, RatiosPlot, accuracy_plot, fraction_plot
from .state import InspectState, ratios_table
from ...ui.base import TABLE_CSS, figure_first, figure_pane, heading, notice, push, show_notice, watch_presentation


class InspectView(pn.viewable.Viewer):
    """The Inspect tab: controls, forward process, predictions at t, validation curves."""

    tab = param.ClassSelector(class_=InspectState)

    def __init__(self, **params):
        super().__init__(**params)
        self._controls()
        self.notice = notice("warning")
        self.text_notice = notice("info")
        self.forward = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["inspect-forward"])
        self.several_notice = notice("info")
        # no margin between the heading and its rows: on a projector the rows take the first screen's height
        self.several = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["inspect-several"], margin=(0, 5, 5, 5))
        self.several_box = pn.Column(
            heading("Several texts and t: what the model sees and predicts at each", margin=(5, 5, 0, 5)),
            self.several_notice,
            self.several, sizing_mode="stretch_width", visible=False, css_classes=["inspect-several-box"])
        self.grid = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["inspect-predictions"])
        self.legend = pn.pane.HTML("", sizing_mode="stretch_width")
        self.table = pn.pane.DataFrame(None, index=False, float_format="{:.3f}".format, max_height=320,
                                       sizing_mode="stretch_width", css_classes=["inspect-table"],
                                       stylesheets=[TABLE_CSS, ":host { overflow-y: auto; }"])
        self.busy = pn.pane.HTML("", sizing_mode="stretch_width")
        self.said = heading(self._said_text())
        self.stats = heading(self._stats_text())
        # the figures, made once and drawn again in place (plots.py says why)
        presentation = self.tab.session.presentation
        self.fraction_plot, self.accuracy_plot = FractionPlot(presentation), AccuracyPlot(presentation)
        self.positions_plot, self.nucleus_plot = PositionsPlot(presentation), NucleusPlot(presentation)
        self.ratios_plot = RatiosPlot(presentation)
        self.plots = pn.Row(figure_pane(self.fraction_plot.figure, "inspect-fraction"),
                            figure_pane(self.accuracy_plot.figure, "inspect-accuracy"), sizing_mode="stretch_width")
        self.positions = figure_pane(self.positions_plot.figure, "inspect-positions")
        self.nucleus = figure_pane(self.nucleus_plot.figure, "inspect-nucleus")
        self.ratios = figure_pane(self.ratios_plot.figure, "inspect-ratios")
        self._grid_html = ""  # the candidates grid of the current result (_predictions)
        self._ratios_drawn = None  # the (context length, noise ids) the masking-ratios figure shows (_ratios)
        self._fraction()
        self._accuracy_rows()
        self._draw_positions()
        self._notices()
        self._forward()
        self._several()
        self._predictions()
        self._nucleus()
        self._ratios()
        self._process()

    def _controls(self) -> None:
        p = self.tab.param
        self.text = pn.widgets.TextAreaInput.from_param(p.text, height=110, sizing_mode="stretch_width",
                                                        css_classes=["inspect-text-input"])
        self.t = pn.widgets.FloatSlider.from_param(p.t, sizing_mode="stretch_width", css_classes=["inspect-t"])
        self.seed = pn.widgets.IntInput.from_param(p.mask_seed, width=150)
        self.k = pn.widgets.IntSlider.from_param(p.k, width=200)
        # widths that hold the labels at projector type too
        self.redraw = pn.widgets.Button.from_param(p.redraw, width=170, css_classes=["inspect-redraw"])
        self.reset = pn.widgets.Button.from_param(p.use_default, width=230)
        self.nucleus_p = pn.widgets.FloatSlider.from_param(p.nucleus_p, width=220, css_classes=["inspect-nucleus-p"])
        self.nucleus_at = pn.widgets.IntInput.from_param(p.nucleus_at, width=170)
        self.ts = pn.widgets.TextInput.from_param(p.ts, placeholder="e.g. 0, 0.2, 0.4, 0.6, 0.8, 1",
                                                  sizing_mode="stretch_width", css_classes=["inspect-ts"])
        self.texts = pn.widgets.TextAreaInput.from_param(p.texts, height=90, sizing_mode="stretch_width",
                                                         placeholder="e.g. To be, or not to be | ROMEO: But, soft!",
                                                         css_classes=["inspect-texts"])
        # inputs and buttons draw in a shadow DOM the tab's type size does not reach (ui.base.widget_type_size)
        watch_presentation(self.tab.session, widgets=(self.text, self.t, self.seed, self.k, self.redraw, self.reset,
                                                      self.nucleus_p, self.nucleus_at, self.ts, self.texts))

    # ---------------------------------------------------------------- drawing

    @param.depends("tab.notice", "tab.text_notice", "tab.validation_task.error", "tab.validation_task.status",
                   "tab.validation_task.running", "tab.predictions_task.error", "tab.accuracy_task.error",
                   "tab.positions_task.error", watch=True)
    def _notices(self):
        tab = self.tab
        warn = "; ".join(m for m in (tab.notice, tab.validation_error) if m)
        show_notice(self.notice, warn)
        show_notice(self.text_notice, "" if tab.notice else tab.text_notice)  # quotes the typed text
        self.reset.disabled = bool(tab.validation_task.error)  # no held-out text on this server to put back
        loading = tab.validation_task.status if tab.validation_task.running else ""
        self.busy.object = f"<i>{literal(loading)}</i>" if loading else ""

    def _size(self) -> dict:
        return FONT[self.tab.session.presentation]

    @param.depends("tab.text", "tab.t", "tab.mask_seed", "tab.active", "tab.session.model_info",
                   "tab.session.presentation", watch=True)
    def _forward(self):
        """The masked text: no model involved, so it follows the slider at once."""
        tab = self.tab
        text = tab.shown_text() if tab.usable() else ""  # usable(): it may run before the tab's own watcher
        if not text:
            self.forward.object = ""
            return
        shown = pieces(tab.model, text)  # characters, or a Hugging Face model's tokens
        mask = tab.mask(len(shown))
        n_tokens = noise_tokens(tab.model)
        if n_tokens is not None:  # uniform-state noise: the characters it wrote, not █
            seen, changed = draw_noised(tab.model, text, tab.t, tab.mask_seed)
            caption = noised_caption(tab.t, int(mask.sum()), int(changed.sum()), len(shown), tab.mask_seed,
                                     n_tokens, self._unit())
            self.forward.object = style(self._size()) + caption + noised_html(seen, changed)
            return
        caption = forward_caption(tab.t, int(mask.sum()), len(shown), tab.mask_seed, self._unit())
        self.forward.object = style(self._size()) + caption + forward_html(shown, mask)

    @param.depends("tab.several_task.result", "tab.several_task.running", "tab.several_task.status",
                   "tab.several_task.error", "tab.several_notice", "tab.ts", "tab.texts",
                   "tab.session.presentation", watch=True)
    def _several(self):
        """Several texts and t in one figure, shown only when asked (a link's inspect.ts / inspect.texts)."""
        tab = self.tab
        self.several_box.visible = tab.several_on()
        show_notice(self.several_notice, "; ".join(m for m in (tab.several_notice, tab.several_task.error) if m))
        result, model = tab.several, tab.model
        if not tab.several_on() or result is None or model is None:
            busy = tab.several_task.status if tab.several_task.running else ""
            self.several.object = f"<i>{literal(busy)}</i>" if busy else ""
            return
        self.several.object = (several_style(self._size(), tab.session.presentation)
                               + several_html(result, lambda text: pieces(model, text), self._unit()))

    @param.depends("tab.predictions_task.result", "tab.nucleus_p", "tab.nucleus_at", watch=True)
    def _nucleus(self):
        """The top-p exercise of "Generation: Iterative Unmasking" at one masked position (from the
        predictions: no model call)."""
        tab = self.tab
        self.nucleus_plot.draw(tab.predictions, tab.nucleus_position(), float(tab.nucleus_p), tab.nucleus_at)
        push(self.nucleus)

    @param.depends("tab.session.model_info", watch=True)
    def _ratios(self):
        """The BERT-vs-diffusion training ratios of "The Forward Process" at the model's context and for its
        process (no model call), drawn again only when either changed: a page is built with its
        checkpoint's context and process (read from its metadata), so the model's load leaves the figure
        as it is."""
        fitted = self.tab.session.knobs_model()
        drawn = (min(self.tab.context_length(), 256), noise_tokens(fitted))
        if drawn == self._ratios_drawn:  # the same draws: sending them again would cost the page a repaint
            return
        self._ratios_drawn = drawn
        self.ratios_plot.draw(ratios_table(*drawn))
        push(self.ratios)

    def _said_text(self) -> str:
        noised = noise_tokens(self.tab.model) is not None
        return ("Predictions at t: the model's candidates for each "
                + ("character the noise changed" if noised else "█"))

    def _stats_text(self) -> str:
        noised = noise_tokens(self.tab.model) is not None
        return f"{'Noise' if noised else 'Masking'} statistics and accuracy on validation data"

    @param.depends("tab.session.model_info", watch=True)
    def _process(self):
        """The headings and the validation figures' words follow the loaded model's process."""
        self.said.object = f"<h3>{self._said_text()}</h3>"
        self.stats.object = f"<h3>{self._stats_text()}</h3>"
        noised = noise_tokens(self.tab.model) is not None
        p = self.tab.param  # the knobs' labels: a uniform-state model's noise redraws, it does not mask
        self.t.name = "Noise level t" if noised else p.t.label
        self.seed.name = "Noise seed" if noised else p.mask_seed.label
        self.redraw.name = "Re-draw noise" if noised else p.redraw.label
        for plot in (self.fraction_plot, self.accuracy_plot, self.positions_plot):
            plot.words(noised)
        self._fraction()
        push(self.plots, self.positions)

    def _unit(self) -> str:
        return "tokens" if is_subword(getattr(self.tab.model, "tokenizer", None)) else "characters"

    @param.depends("tab.predictions_task.result", "tab.session.presentation", watch=True)
    def _predictions(self):
        """The candidates grid, legend and table of a new result (built once per result and type size)."""
        result, size, model = self.tab.predictions, self._size(), self.tab.model  # the model read once
        if result is None or model is None:  # (None: the session closed while the result came in)
            self._grid_html = ""
            self.grid.object, self.table.object, self.legend.object = "", None, ""
            return
        self._grid_html = predictions_caption(result, self._unit()) + predictions_html(
            pieces(model, result["text"]), result, result["k"])
        self._mark_stale()
        self.legend.object = legend_html(size, noised="changed" in result)
        self.table.object = predictions_table(result, result["k"])
        self.table.styles = {"font-size": size["base"]}  # its table follows it (ui.base.TABLE_CSS)

    @param.depends("tab.text", "tab.t", "tab.mask_seed", "tab.k", watch=True)
    def _mark_stale(self):
        """After an edit the previous predictions stay, dimmed and labelled (not passed off as the new text's),
        until the new ones arrive (the grid is not rebuilt for it: t moves with a slider)."""
        result = self.tab.predictions
        if result is None:
            return
        grid = self._grid_html
        if self.tab.stale(result):
            grid = ('<p class="cap"><b>Updating …</b> these predictions are for the previous text, t, mask or k; '
                    'the new ones replace them when the model has answered.</p>'
                    f'<div style="opacity:0.4">{grid}</div>')
        self.grid.object = style(self._size()) + grid

    @param.depends("tab.session.presentation", watch=True)
    def _fonts(self):
        presentation = self.tab.session.presentation
        for plot in (self.fraction_plot, self.accuracy_plot, self.positions_plot, self.nucleus_plot, self.ratios_plot):
            plot.fonts(presentation)
        push(self.plots, self.positions, self.nucleus, self.ratios)

    @param.depends("tab.t", "tab.mask_seed", "tab.text", watch=True)
    def _fraction(self):
        self.fraction_plot.draw(*self._fraction_data())
        push(self.plots)

    @param.depends("tab.accuracy_task.result", watch=True)
    def _accuracy_rows(self):
        self.accuracy_plot.draw(self.tab.accuracy, self.tab.t)
        push(self.plots)

    @param.depends("tab.t", watch=True)
    def _accuracy_t(self):
        self.accuracy_plot.move(self.tab.t)
        push(self.plots)

    @param.depends("tab.positions_task.result", "tab.validation_task.error", watch=True)
    def _draw_positions(self):
        tab = self.tab
        self.positions_plot.draw(tab.positions, tab.t, missing=bool(tab.validation.error))
        push(self.positions)

    def _fraction_data(self) -> tuple:
        """(the fraction-masked table, t, this text's fraction masked at t or None) for the current knobs
        (read-only: the PNG download calls it on a worker thread)."""
        tab = self.tab
        text = tab.shown_text(update=False) if tab.model is not None else ""
        n = positions(tab.model, text) if text else 0
        length = n or tab.context_length()
        n_tokens = noise_tokens(tab.model)
        if not text:
            actual = None
        elif n_tokens is None:
            actual = float(tab.mask(n).mean())
        else:  # the share the noise changed, as the draws count it
            actual = float(draw_noised(tab.model, text, tab.t, tab.mask_seed)[1].mean())
        return fraction_check(length, tab.mask_seed, n_tokens), tab.t, actual

    def fraction_figure(self, presentation: bool = False):
        """A standalone mask-fraction figure for the current knobs (the PNG download's)."""
        return fraction_plot(*self._fraction_data(), presentation, noised=noise_tokens(self.tab.model) is not None)

    # ---------------------------------------------------------------- downloads

    def _downloads(self):
        tab = self.tab

        def preds_csv():
            return None if tab.predictions is None else table_csv(predictions_table(tab.predictions, tab.predictions["k"]))

        def acc_figure():
            return accuracy_plot(tab.accuracy, tab.t, noised=noise_tokens(tab.model) is not None)

        def accuracy_csv():
            return None if tab.accuracy is None else table_csv(tab.accuracy)

        files = [("Predictions CSV", "inspect-predictions.csv", preds_csv),
                 ("Accuracy CSV", "inspect-accuracy.csv", accuracy_csv),
                 ("Accuracy plot PNG", "inspect-accuracy.png", lambda: plot_png(acc_figure())),
                 ("Accuracy plot HTML", "inspect-accuracy.html", lambda: plot_html(acc_figure())),
                 ("Forward-process plot PNG", "inspect-fraction.png", lambda: plot_png(self.fraction_figure()))]
        return pn.FlexBox(
            *(download_button(label, name, make, session=tab.session) for label, name, make in files),
            sizing_mode="stretch_width", css_classes=["inspect-downloads"])

    # ---------------------------------------------------------------- layout

    def __panel__(self):
        """Built with the page; nothing is computed until the tab is shown (InspectState.on_shown)."""
        controls = pn.Column(
            pn.Row(self.t, self.k, sizing_mode="stretch_width"),
            pn.FlexBox(self.seed, self.redraw, self.reset, align_items="flex-end", sizing_mode="stretch_width"),
            self.text, sizing_mode="stretch_width")
        several = pn.Accordion(("Several texts and t in one figure", pn.Column(self.ts, self.texts, sizing_mode="stretch_width")),
                               active=[0] if self.tab.several_on() else [], sizing_mode="stretch_width")
        stats = self.stats
        # projector mode: the several texts and t a link asked for, then the notice and the masking
        # statistics first; the t slider follows them
        # (or, where the link names it, this text's predictions: the lessons' figures on one example)
        seen, said = heading("Forward process: the text the model sees at t"), self.said
        table = pn.Accordion(("Candidates as a table", self.table), sizing_mode="stretch_width")
        # a link's own texts and t above the tab's notice: what that says (no held-out text on this
        # server, say) concerns the validation figures, and above the rows it pushed them off a projector
        figure_first(self.tab.session, self.several_box, rank=-2)
        figure_first(self.tab.session, self.notice)
        figure_first(self.tab.session, stats, self.plots, chosen=(self.tab, "first", "statistics"))
        figure_first(self.tab.session, seen, self.forward, said, self.legend, self.grid, table,
                     chosen=(self.tab, "first", "predictions"))
        top_p, top_p_knobs = heading("Top-p: which candidates survive at one position"), pn.FlexBox(
            self.nucleus_p, self.nucleus_at)
        figure_first(self.tab.session, top_p, top_p_knobs, self.nucleus, chosen=(self.tab, "first", "top-p"))
        return pn.Column(
            self.notice, controls, self.text_notice, self.busy, self.several_box, several,
            seen, self.forward, said, self.legend, self.grid, table, top_p, top_p_knobs, self.nucleus,
            stats, self.plots, self.ratios, self.positions,
            self._downloads(), sizing_mode="stretch_width", css_classes=["inspect-tab"])
