"""Several samples in one view (the 5- and 8-sample showcases and the prompting exercise of "Generation:
Iterative Unmasking"): the number of seeds and the prompts, then one row per prompt and seed, each the
text that seed gives alone at the sidebar's knobs (state/samples.py)."""
from __future__ import annotations

import panel as pn

from ...ui.base import StateView, notice, show_notice, widget_type_size
from ...ui.palette import FONT
from ...ui.safe import literal

ROWS_CSS = """<style>
.smp { border-collapse: collapse; width: 100%; }
.smp th { text-align: left; white-space: nowrap; vertical-align: top; padding: 0.1em 0.8em 0.1em 0; font-weight: bold; }
.smp td { vertical-align: top; padding: 0.1em 0; width: 100%; }
.smp tr + tr th, .smp tr + tr td { border-top: 1px solid #ddd; }
.smp pre { white-space: pre-wrap; word-break: break-all; margin: 0; font-family: ui-monospace, 'DejaVu Sans Mono', monospace; }
.smp .tpl { font-weight: normal; color: #555; font-size: 0.8em; }
.smp div.tpl { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 40em; }
</style>"""


def samples_html(result: dict, size: dict, seed: int, template: str) -> str:
    """The rows, one per prompt and seed: the seed (and the prompt, when there are several), then the
    text, its spaces kept and each newline shown as ↵ (one block per sample, so eight 64-character samples
    fit a 1366x768 projector's first screen). The row whose run the heatmap shows (its seed, its template) says so."""
    several = len(result["templates"]) > 1 or result["templates"] != [template]
    body = []
    for row in result["rows"]:
        label, prompt = f"seed {row['seed']}", ""
        if several:  # the prompt on a line of its own above the text: the text keeps the row's width
            shown = literal(row["template"]).replace("\n", "↵") or "(no template)"
            prompt = f"<div class='tpl' title='{shown}'>prompt: {shown}</div>"
        elif row["seed"] == seed:
            # on the key's line: a key on two lines reads as two rows on a projector (where the rows
            # come before the heatmap, so "above" would be wrong there)
            label += " <span class='tpl'>· in the heatmap</span>"
        text = literal(row["text"]).replace("\n", "↵")
        body.append(f"<tr><th>{label}</th><td>{prompt}<pre>{text}</pre></td></tr>")
    return f"{ROWS_CSS}<table class='smp' style='font-size:{size['base']}'>{''.join(body)}</table>"


class SamplesView(StateView):
    """The seeds and prompts, then their rows (`state`: the Explore state; its `samples_task` runs them)."""

    def __init__(self, **params):
        super().__init__(**params)
        e = self.state.param
        self.n = pn.widgets.IntInput.from_param(e.samples, width=150, css_classes=["explore-samples-n"])
        self.prompts = pn.widgets.TextInput.from_param(e.prompts, placeholder="e.g. ROMEO: | To be, | First C",
                                                       sizing_mode="stretch_width", css_classes=["explore-prompts"])
        self.notice = notice("warning")
        self.status = pn.pane.HTML("", sizing_mode="stretch_width")
        self.texts = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["explore-samples"])
        self.body = pn.Column(pn.Row(self.n, self.prompts, sizing_mode="stretch_width"), self.notice, self.status,
                              self.texts, sizing_mode="stretch_width", css_classes=["explore-samples-view"])
        self._render()
        self.on(self.state.samples_task, ["result", "status", "error", "running"], self._render)
        self.on(self.state, ["samples_notice", "samples", "prompts"], self._render)
        self.on(self.state.session, "presentation", self._render)

    def _render(self):
        state, task = self.state, self.state.samples_task
        session = state.session
        for widget in (self.n, self.prompts):
            widget_type_size(widget, session.presentation)
        show_notice(self.notice, state.samples_notice or task.error)
        self.status.object = f"<i>{literal(task.status)}</i>" if task.running else ""
        result = task.result if state.several_on() else None
        self.texts.object = ("" if result is None else
                             samples_html(result, FONT[session.presentation], session.seed, session.template.strip()))
        # projector mode: the several samples a link asked for are the figure, first in their column
        # (CSS order, as ui.base.figure_first: the same Bokeh models, nothing re-rendered)
        first = session.presentation and state.several_on()
        rest = {k: v for k, v in self.body.styles.items() if k != "order"}
        if (self.body.styles.get("order") == "-1") != first:
            self.body.styles = {**rest, "order": "-1"} if first else rest

    def __panel__(self):
        return self.body
