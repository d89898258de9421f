"""Header line: checkpoint, its size and NELBO, the device the sampler runs on, and the run status."""
from __future__ import annotations

import math

import panel as pn
import param

from .base import StateView
from .palette import FONT
from .safe import literal


def _size(n: int) -> str:
    return f"{n / 1e6:.2f}M params" if n >= 1e6 else f"{n / 1e3:.0f}k params"


def quality_text(info: dict) -> str:
    """NELBO when training finished; otherwise the latest validation loss, labelled as such. A Hugging
    Face model: its weights' dtype and memory instead (the NELBO is not ours to know)."""
    if "family" in info:
        gb = info["memory_gb"]
        memory = f"{gb:.2f} GB" if gb >= 1 else f"{gb * 1e3:.1f} MB"
        return f"{literal(str(info.get('dtype')))} weights, {memory}"
    if "nelbo_bits" in info:
        # test perplexity beside it ("Training with the ELBO" and the guide print exp(NELBO))
        return (f"NELBO {info['nelbo_bits']:.3f} bits/char ({info['nelbo_nats']:.3f} nats, "
                f"perplexity ≤ {math.exp(info['nelbo_nats']):.2f})")
    if "ce_bits" in info:
        return f"val CE {info['ce_bits']:.3f} bits/char (AR)"
    if "val_nats_latest" in info:
        step = f" at step {info['step']}" if info.get("step") else ""
        return f"training: val {info['val_nats_latest']:.3f} nats/char{step} (no final NELBO yet)"
    return "NELBO not recorded"


def header_html(info: dict, device: str, status: str, *, failed: bool = False, run: int | None = None) -> str:
    """The header line (HTML; every value escaped).

    info: the loaded model's checkpoints.describe ({} = none loaded); status: what the session is doing.
    failed: nothing could be loaded (the notice says why): the line says no model is loaded rather
    than still loading. run: the number of the finished run whose result the page shows, as the
    line's `data-run` (not drawn): it tells one run's end from the one before even when both end
    with the same status (benchmarks/load_test.py waits for it)."""
    start = '<span class="hdr">' if run is None else f'<span class="hdr" data-run="{int(run)}">'
    if not info:
        doing = literal(status) if status else "no model loaded" if failed else "loading model …"
        return f"{start}{doing} · device <b>{literal(device)}</b></span>"
    parts = [f"<b>{literal(info['name'])}</b> ({literal(info['kind'])}, {literal(str(info['corpus']))})",
             _size(info["n_params"]), quality_text(info), f"device <b>{literal(device)}</b>"]
    if status:
        parts.append(f"<i>{literal(status)}</i>")
    return start + " · ".join(parts) + "</span>"


class HeaderView(StateView):
    """One line of facts about the model and the sampler's device (`state`: the session, its Explore
    tab's state already in state.tabs when there is one: its finished run is the line's `run`)."""

    def __init__(self, **params):
        super().__init__(**params)
        self.pane = pn.pane.HTML("", sizing_mode="stretch_width", name="header", css_classes=["dashboard-header"])
        self._explore = self.state.tabs.get("Explore")
        if self._explore is not None:
            # when a run's result is in (or cleared as the next one starts), whether or not the
            # status text changes with it
            self.on(self._explore, ["trajectory"], self._render)
        self._render()

    def _run(self) -> int | None:
        """The run number of the result shown (Explore's run_id, bumped as each run starts), or None."""
        explore = self._explore
        return explore.run_id if explore is not None and explore.trajectory is not None else None

    @param.depends("state.model_info", "state.status", "state.unloaded", "state.presentation", watch=True)
    def _render(self):
        s = self.state
        self.pane.object = header_html(s.model_info, s.device_name, s.status, failed=s.unloaded, run=self._run())
        # wraps rather than runs off the header bar in presentation mode
        self.pane.styles = {"font-size": FONT[self.state.presentation]["base"], "white-space": "normal",
                            "line-height": "1.25"}

    def __panel__(self):
        return self.pane
