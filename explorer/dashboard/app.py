"""The dashboard app: `panel serve explorer/dashboard/app.py`, `python run.py`, or in Jupyter
`from explorer.dashboard import create_app; create_app()`.

One ExplorerState per browser session, the views laid out in a template. The page is sent before the
model is loaded (loading starts from pn.state.onload), so it appears at once. Under `panel serve` the
checkpoint and device come from MDLM_EXPLORER_CHECKPOINT / MDLM_EXPLORER_DEVICE (or ?checkpoint= in
the URL, a plain name only). Absolute imports: `panel serve` runs this file as a script.
"""
from __future__ import annotations

import os

import panel as pn

from explorer.dashboard.jobs import call_now, document_dispatcher
from explorer.dashboard.state import ExplorerState
from explorer.dashboard.tabs import TAB_NAMES, build_tab
from explorer.dashboard.views import (ConfidenceView, ControlsView, HeaderView, HeatmapView, QualityView,
                                      ScrubberView, TextView)

TITLE = "mdlm-explorer"
ACCENT = "#0072B2"
APP_CSS = """
.dashboard-header .hdr { color: white; }
"""


def _dispatcher():
    """Hand worker results to this session's event loop when served; call directly elsewhere."""
    doc = pn.state.curdoc
    if doc is not None and doc.session_context is not None:
        return document_dispatcher(doc)
    return call_now


def explore_tab(state: ExplorerState):
    """Heatmap, scrubber and text on the left; per-position confidence and quality vs steps on the right."""
    left = pn.Column(HeatmapView(state=state), ScrubberView(state=state), TextView(state=state),
                     sizing_mode="stretch_width", styles={"flex": "3 1 0"}, min_width=480)
    right = pn.Column(pn.pane.HTML("<b>Per-position confidence</b>", margin=(0, 10)), ConfidenceView(state=state),
                      QualityView(state=state), sizing_mode="stretch_width", styles={"flex": "2 1 0"},
                      min_width=380)
    return pn.Row(left, right, sizing_mode="stretch_width")


def build_tabs(state: ExplorerState):
    """Main area tabs: Explore, then Compare, Inspect, Sweep and Model (tabs/), each built from the same
    session state so a URL can select a tab and reproduce its view. dynamic=True: a tab's content is
    only rendered when it is shown."""
    tabs = pn.Tabs(("Explore", explore_tab(state)), dynamic=True, sizing_mode="stretch_width", name="tabs")
    for name in TAB_NAMES:
        try:
            _, view = build_tab(name, state)
        except ModuleNotFoundError as e:  # TEMPORARY while the tabs are being written (issue 6)
            if e.name != f"explorer.dashboard.tabs.{name.lower()}":
                raise
            continue
        tabs.append((name, view))
    return tabs


def create_app(checkpoint: str | None = None, device: str = "auto", *, fallback: str | None = None,
               state: ExplorerState | None = None, autoload: bool = True):
    """The dashboard as a Panel template (served, or shown inline in Jupyter).

    checkpoint: a plain name in checkpoints/ (default: shakespeare if present); device: auto|cpu|cuda.
    fallback: opened instead of a `checkpoint` that is not in checkpoints/ (with a notice).
    autoload=False leaves loading to the caller (tests drive `state` directly)."""
    pn.extension(notifications=False)
    state = state or ExplorerState(checkpoint=checkpoint, device=device, dispatch=_dispatcher(), fallback=fallback)
    # Bootstrap rather than the Fast templates: Fast always links a Google web font, which fails
    # (a console error) on an offline machine; every Bootstrap asset is bundled with Panel.
    template = pn.template.BootstrapTemplate(
        title=TITLE, sidebar=[ControlsView(state=state)], main=[build_tabs(state)],
        header=[HeaderView(state=state)], header_background=ACCENT, sidebar_width=340, raw_css=[APP_CSS])
    template.explorer_state = state  # the handle tests and notebooks use to drive the app
    if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
        pn.state.on_session_destroyed(lambda context: state.close())
        if autoload:
            pn.state.onload(state.load)
    elif autoload:
        state.load()
    return template


def served_args(checkpoint: str | None = None, device: str | None = None) -> dict:
    """Checkpoint and device for a served session: ?checkpoint= in the URL, else the arguments, else
    MDLM_EXPLORER_CHECKPOINT / MDLM_EXPLORER_DEVICE. A URL value is only a wish: the state opens it
    only if it is one of the names in checkpoints/, else it opens the default and shows a notice."""
    configured = checkpoint or os.environ.get("MDLM_EXPLORER_CHECKPOINT") or None
    query = pn.state.session_args.get("checkpoint") if pn.state.session_args else None
    # errors="replace": bytes that are not UTF-8 make a name that matches nothing, not a traceback
    name = query[0].decode(errors="replace") if query else configured
    return {"checkpoint": name or None, "fallback": configured,
            "device": device or os.environ.get("MDLM_EXPLORER_DEVICE", "auto")}


if pn.state.served:
    create_app(**served_args()).servable(title=TITLE)
