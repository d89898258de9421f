"""More samples at once (the 5- and 8-sample showcases of "Generation: Iterative Unmasking"): a button that
draws N samples at the sidebar's knobs in one batched run, and their texts as a numbered list."""
from __future__ import annotations

import panel as pn

from ...ui.base import StateView
from ...ui.palette import FONT
from ...ui.safe import literal


def samples_html(texts: list[str], size: dict) -> str:
    """The texts, one numbered block each, whitespace kept (a newline is part of Shakespeare's text)."""
    items = "".join(f"<li><pre style='white-space:pre-wrap;margin:0.2em 0'>{literal(t)}</pre></li>"
                    for t in texts)
    return f"<ol style='font-size:{size['text']};padding-left:1.6em;margin:0'>{items}</ol>"


class SamplesView(StateView):
    """N at once, then their texts (`state`: the Explore state; its `samples` Task runs them: state/samples.py)."""

    def __init__(self, **params):
        super().__init__(**params)
        e = self.state.param
        self.n = pn.widgets.IntInput.from_param(e.more_n, width=110)
        self.button = pn.widgets.Button.from_param(e.more, width=140, css_classes=["explore-sample-more"])
        self.status = pn.pane.HTML("", sizing_mode="stretch_width")
        self.texts = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["explore-more-samples"])
        self._render()
        self.on(self.state.samples, ["result", "status", "error", "running"], self._render)
        self.on(self.state.session, "presentation", self._render)

    def _render(self):
        task = self.state.samples
        self.status.object = literal(task.error or task.status)
        self.texts.object = samples_html(task.result or [], FONT[self.state.session.presentation])

    def __panel__(self):
        body = pn.Column(pn.Row(self.n, pn.Column(self.button, align="end"), self.status), self.texts,
                         sizing_mode="stretch_width")
        return pn.Accordion(("More samples at these knobs", body), sizing_mode="stretch_width")
