"""The canvas as text at the selected step: each character tinted by the confidence it was committed
with, the characters committed at this step highlighted (colour, bold and underline: not hue alone)."""
from __future__ import annotations

import numpy as np
import panel as pn
import param

from ....data.tokenizer import is_subword
from ...frames import CODE
from ...ui.base import StateView
from ...ui.internals import live_html, set_live_html
from ...ui.palette import FONT, MASKED_TEXT, STATE_COLORS
from ...ui.safe import literal

LEVELS = 5  # confidence is shown in this many tint steps: equal classes merge into one <span>
TEXT_CSS = f"""
.caption {{ font-size: var(--caption-size, 14px); margin: 0 0 0.3em 0; }}
.stack {{ display: grid; }}
.stack > p {{ grid-area: 1 / 1; }}
.ghost {{ visibility: hidden; user-select: none; }}
.canvas, .ghost {{ font-size: var(--text-size, 15px); font-family: ui-monospace, 'DejaVu Sans Mono', monospace; white-space: pre-wrap;
          word-break: break-all; overflow-wrap: anywhere; line-height: 1.45; margin: 0; max-width: 100%; }}
.m {{ color: {MASKED_TEXT}; }}
.f {{ color: #000; text-decoration: underline dotted #777; }}
.r {{ color: {STATE_COLORS['remasked']}; }}
.n {{ background: rgba(213, 94, 0, 0.30); outline: 1px solid {STATE_COLORS['new']}; font-weight: bold;
      text-decoration: underline; }}
.t {{ border-right: 1px solid rgba(0, 0, 0, 0.22); }}
""" + "".join(f".c{i} {{ background: rgba(0, 114, 178, {0.08 + 0.42 * i / (LEVELS - 1):.2f}); }}\n"
              for i in range(LEVELS))

STYLE = f"<style>{' '.join(TEXT_CSS.split())}</style>"


def css_classes(frames, row: int) -> list[str]:
    """One CSS class per position at `row`: masked, fixed, re-masked, new, or a confidence level."""
    state, conf = frames.state[row], frames.conf[row]
    level = np.clip((np.nan_to_num(conf, nan=1.0) * LEVELS).astype(int), 0, LEVELS - 1)
    names = np.array([f"c{i}" for i in range(LEVELS)], dtype=object)[level]
    names[state == CODE["masked"]] = "m"
    names[state == CODE["fixed"]] = "f"
    names[state == CODE["remasked"]] = "r"
    names[state == CODE["new"]] = "n"
    names[state == CODE["settled"]] = "n"  # a uniform-state block's final tokens, as they settle
    names[state == CODE["noise"]] = "r"  # random tokens, in the re-masked colour
    return names.tolist()


def text_html(frames, row: int, boundaries: bool = False) -> str:
    """The canvas at `row` as spans, runs of one class merged into one span; with `boundaries` (a
    model of subword tokens) one span per token, its right edge drawn, so token boundaries show."""
    classes, chars = css_classes(frames, row), frames.chars(row).tolist()
    if boundaries:
        spans = (f'<span class="{c} t">{literal(ch)}</span>' for c, ch in zip(classes, chars))
        return '<p class="canvas">' + "".join(spans) + "</p>"
    parts, start = [], 0
    for i in range(1, len(chars) + 1):
        if i == len(chars) or classes[i] != classes[start]:
            parts.append(f'<span class="{classes[start]}">{literal("".join(chars[start:i]))}</span>')
            start = i
    return '<p class="canvas">' + "".join(parts) + "</p>"


class TextView(StateView):
    """Text at the selected step, tinted by confidence, newest characters highlighted.

    A raw HTML model whose `text` is replaced per live tick: one property change, against several model
    updates (and ~4 ms) for a Panel HTML pane, and no layout of the whole page in the browser, which a
    Bokeh Div's text change costs (ui.internals.live_html). Its CSS travels inside the text (Panel's
    design replaces a Bokeh model's own `stylesheets`)."""

    def __init__(self, **params):
        super().__init__(**params)
        self.div = live_html(sizing_mode="stretch_width", css_classes=["sample-text"])
        self.pane = pn.pane.Bokeh(self.div, sizing_mode="stretch_width", min_height=80)
        self._ghost = (0, "")  # (length, escaped text) of the last finished run's final row
        self._fonts()
        self._render()
        self.on(self.state.session, "presentation", self._fonts)

    @param.depends("state.step", "state.n_rows", "state.run_id", "state.running", watch=True)
    def _render(self):
        frames = self.state.frames
        if frames is None:
            set_live_html(self.div, STYLE + '<p class="canvas m">Press Run to sample.</p>')
            return self.push(self.pane)
        row = self.state.shown_step
        count = {name: int((frames.state[row] == CODE[name]).sum()) for name in ("new", "masked", "noise",
                                                                                   "accepted", "settled")}
        if getattr(frames, "process", "masked") == "uniform":  # random-token noise: no [MASK] to count
            caption = (f'<p class="caption"><b>step {row}</b> {self._of(frames)}: {count["accepted"]} accepted, '
                       f'{count["noise"]} random (re-noised), {count["settled"]} settled now (highlighted)</p>')
        else:
            caption = (f'<p class="caption"><b>step {row}</b> {self._of(frames)}: {count["new"]} committed now '
                       f"(highlighted), {count['masked']} still masked; tint = confidence when committed</p>")
        tokenizer = getattr(self.state.session.model, "tokenizer", None)
        if not self.state.running:
            self._ghost = (frames.length, literal(frames.text()))
        text = text_html(frames, row, is_subword(tokenizer))
        set_live_html(self.div, STYLE + caption + self._stacked(text, frames.length))
        self.push(self.pane)

    def _of(self, frames) -> str:
        """The run's length beside the step: while it runs, its step count when that is known (the
        header's "sampling 64 steps" and the scrubber's range, not "step 12 of 12"); a threshold run's
        is not, so its steps so far."""
        last = frames.n_rows - 1
        if not self.state.running:
            return f"of {last}"
        return f"of {frames.planned_rows - 1}" if frames.rows_known else f"of {last} so far"

    def _stacked(self, text: str, length: int) -> str:
        """The text over an invisible copy of the last finished run's final text (of this length),
        in one grid cell: the box is as tall as the taller of the two, so it keeps its height while a
        run's newlines are committed, and while a finished run is scrubbed. Each change of its height
        made Bokeh lay the whole page out again (~8 ms of the browser's CPU per live tick)."""
        ghost_length, ghost = self._ghost
        behind = f'<p class="ghost" aria-hidden="true">{ghost}</p>' if ghost_length == length else ""
        return f'<div class="stack">{text}{behind}</div>'

    def _fonts(self):
        size = FONT[self.state.session.presentation]
        self.div.styles = {"--text-size": size["text"], "--caption-size": size["base"]}
        self.push(self.pane)

    def __panel__(self):
        return pn.Column(self.pane, sizing_mode="stretch_width", css_classes=["text-view"])
