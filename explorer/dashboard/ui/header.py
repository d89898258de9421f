"""Header line: checkpoint, its size and NELBO, the device the sampler runs on, and the run status; and, not
drawn, which tabs have finished the work a link opening them starts (`data-settled`)."""
from __future__ import annotations

import math

import panel as pn
import param

from ..runtime.dispatch import at_end
from ..runtime.tasks import Task
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


def header_html(info: dict, device: str, status: str, *, failed: bool = False, run: int | None = None,
                settled: tuple[str, ...] = (), compact: bool = False) -> str:
    """The header line (HTML; every value escaped).

    info: the loaded model's checkpoints.describe ({} = none loaded); status: what the session is doing.
    failed: nothing could be loaded (the notice says why): the line says no model is loaded rather
    than still loading. run: the number of the finished run whose result the page shows, as the
    line's `data-run` (not drawn): it tells one run's end from the one before even when both end
    with the same status (benchmarks/load_test.py waits for it). settled: the tabs whose result is shown
    (settled_tabs), as the line's `data-settled`, names separated by spaces (not drawn). compact: one
    line on a 1024-pixel projector: the kind and corpus and the NELBO's nats and perplexity left to the
    line's tooltip, whatever is still too long cut with an ellipsis."""
    run_attr = "" if run is None else f' data-run="{int(run)}"'
    settled_attr = f' data-settled="{literal(" ".join(settled))}"' if info else ""
    one_line = ' style="display: block; white-space: nowrap; overflow: hidden; text-overflow: ellipsis"'
    start = f'<span class="hdr"{run_attr}{settled_attr}{one_line if compact else ""}>'
    if not info:
        doing = literal(status) if status else "no model loaded" if failed else "loading model …"
        return f"{start}{doing} · device <b>{literal(device)}</b></span>"
    about = f"({literal(info['kind'])}, {literal(str(info['corpus']))})"
    quality = quality_text(info)  # its values escaped already
    tail = [f"device <b>{literal(device)}</b>"] + ([f"<i>{literal(status)}</i>"] if status else [])
    if not compact:
        return start + " · ".join([f"<b>{literal(info['name'])}</b> {about}", _size(info["n_params"]), quality,
                                   *tail]) + "</span>"
    whole = " · ".join([f"{literal(info['name'])} {about}", _size(info["n_params"]), quality,
                        f"device {literal(device)}", *([literal(status)] if status else [])])
    start = start[:-1] + f' title="{whole}">'
    return start + " · ".join([f"<b>{literal(info['name'])}</b>", _size(info["n_params"]),
                               quality.split(" (")[0], *tail]) + "</span>"


def _tasks(tab) -> list[Task]:
    """Every runtime Task a tab's state holds (Inspect's parts' Tasks are its attributes too)."""
    return [value for value in vars(tab).values() if isinstance(value, Task)]


def tab_settled(name: str, tab, session) -> bool:
    """Whether tab `name` has finished what a link opening it starts: none of its work is running and its
    result is shown, or a notice or a Run button waits for the user (a request over the auto-start limit).
    Explore: its run finished (and the quality sweep after it); Inspect: shown, its predictions and plots
    in; Compare: every column in; Sweep: the main sweep in, or its estimate waiting for Run; Model: the
    loaded model's facts, drawn from it."""
    if session.model is None or getattr(tab, "running", False) or any(t.running for t in _tasks(tab)):
        return False
    if name == "Explore":
        return tab.trajectory is not None or bool(session.error)
    if name == "Inspect":
        return tab.active and (tab.predictions is not None or bool(tab.notice or tab.validation_error))
    if name == "Compare":
        return bool(tab.error) or (bool(tab.results) and all(r is not None for r in tab.results))
    if name == "Sweep":
        main, diffusion = tab.main, session.model.config.kind == "diffusion"  # (its note says why not)
        return main.result is not None or not diffusion or bool(main.error or main.estimate.startswith("not started"))
    return True


def settled_tabs(session) -> tuple[str, ...]:
    """The names of the session's tabs whose result is shown (tab_settled), in the page's order."""
    return tuple(name for name, tab in session.tabs.items() if tab_settled(name, tab, session))


# What tab_settled reads: a tab state's and its Tasks' parameters that change when work starts or ends
_TAB_PARAMS = ("running", "trajectory", "active", "error", "notice")
_TASK_PARAMS = ("running", "result", "error", "estimate")


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
        self._settled = ()  # read by _resettle only, never mid-change (its docstring says why)
        self._stale = self._unsettled = False  # a redraw, a read of the settled tabs, left for the callback's end
        self.on(self.state, ["model_info", "error"], self._resettle)
        for tab in self.state.tabs.values():
            for obj, names in [(tab, _TAB_PARAMS), *((t, _TASK_PARAMS) for t in _tasks(tab))]:
                self.on(obj, [n for n in names if n in obj.param], self._resettle)
        self._render()

    def _resettle(self) -> None:
        """Work started or ended somewhere: read the settled tabs once every watcher of this change has
        run and the views have drawn it (at the end of the dispatched callback making the change, else
        on the UI thread's next turn), and redraw if they changed. Read at once, a run's end (which
        starts the quality sweep after it in the same callback) made Explore look settled in between."""
        self._unsettled = True
        if not at_end((HeaderView, id(self)), self._catch_up):
            self.state.dispatch(self._catch_up)

    def _catch_up(self) -> None:
        """The settled tabs read, if asked for (_resettle), and the line redrawn once if anything changed."""
        if self._unsettled:
            self._unsettled = False
            settled = settled_tabs(self.state)
            if settled != self._settled:
                self._settled, self._stale = settled, True
        if self._stale:
            self._stale = False
            self._draw()

    def _run(self) -> int | None:
        """The run number of the result shown (Explore's run_id, bumped as each run starts), or None."""
        explore = self._explore
        return explore.run_id if explore is not None and explore.trajectory is not None else None

    @param.depends("state.model_info", "state.status", "state.unloaded", "state.presentation", watch=True)
    def _render(self):
        """Redraw: at the end of the dispatched callback making the change (a run's start changes the
        status and the run shown at once: one redraw), else now."""
        self._stale = True
        if not at_end((HeaderView, id(self)), self._catch_up):
            self._stale = False  # (a read of the settled tabs asked for stays for its own turn)
            self._draw()

    def _draw(self):
        s = self.state
        self.pane.object = header_html(s.model_info, s.device_name, s.status, failed=s.unloaded, run=self._run(),
                                       settled=self._settled, compact=s.presentation)
        # presentation mode: one line (compact), so that the figure below keeps the first screen. The
        # template's header row does not shrink its items below their content, so the line is given the
        # window less the app's title (~270 px) and the Lessons menu (~130 px) to cut its ellipsis in.
        room = {"max-width": "calc(100vw - 400px)", "overflow": "hidden"} if s.presentation else {}
        self.pane.styles = {"font-size": FONT[s.presentation]["base"], "white-space": "normal",
                            "line-height": "1.25", **room}

    def __panel__(self):
        return self.pane
