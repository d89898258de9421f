"""Header line: checkpoint, its size and NELBO, the device the sampler runs on, and the run status."""
from __future__ import annotations

import html
import math

import panel as pn
import param

from .base import StateView
from .palette import FONT


def _size(n: int) -> str:
    return f"{n / 1e6:.2f}M params" if n >= 1e6 else f"{n / 1e3:.0f}k params"


def quality_text(info: dict) -> str:
    """NELBO when training finished; otherwise the latest validation loss, labelled as such. A Hugging
    Face model: its weights' dtype and memory instead (the NELBO is not ours to know)."""
    if "family" in info:
        gb = info["memory_gb"]
        memory = f"{gb:.2f} GB" if gb >= 1 else f"{gb * 1e3:.1f} MB"
        return f"{html.escape(str(info.get('dtype')))} weights, {memory}"
    if "nelbo_bits" in info:
        # test perplexity beside it (seeds 002/004 print exp(NELBO))
        return (f"NELBO {info['nelbo_bits']:.3f} bits/char ({info['nelbo_nats']:.3f} nats, "
                f"perplexity ≤ {math.exp(info['nelbo_nats']):.2f})")
    if "ce_bits" in info:
        return f"val CE {info['ce_bits']:.3f} bits/char (AR)"
    if "val_nats_latest" in info:
        step = f" at step {info['step']}" if info.get("step") else ""
        return f"training: val {info['val_nats_latest']:.3f} nats/char{step} (no final NELBO yet)"
    return "NELBO not recorded"


def header_html(info: dict, device: str, status: str) -> str:
    if not info:
        return f'<span class="hdr">loading model … · device <b>{html.escape(device)}</b></span>'
    parts = [f"<b>{html.escape(info['name'])}</b> ({html.escape(info['kind'])}, {html.escape(str(info['corpus']))})",
             _size(info["n_params"]), quality_text(info), f"device <b>{html.escape(device)}</b>"]
    if status:
        parts.append(f"<i>{html.escape(status)}</i>")
    return '<span class="hdr">' + " · ".join(parts) + "</span>"


class HeaderView(StateView):
    """One line of facts about the model and the sampler's device (`state`: the session)."""

    def __init__(self, **params):
        super().__init__(**params)
        self.pane = pn.pane.HTML("", sizing_mode="stretch_width", name="header", css_classes=["dashboard-header"])
        self._render()

    @param.depends("state.model_info", "state.status", "state.presentation", watch=True)
    def _render(self):
        self.pane.object = header_html(self.state.model_info, self.state.device_name, self.state.status)
        # wraps rather than runs off the header bar in presentation mode
        self.pane.styles = {"font-size": FONT[self.state.presentation]["base"], "white-space": "normal",
                            "line-height": "1.25"}

    def __panel__(self):
        return self.pane
