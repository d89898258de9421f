"""The dashboard app: `panel serve explorer/dashboard/app.py`, `python run.py`, or in Jupyter
`from explorer.dashboard import create_app; create_app()`.

One Session per browser session (session.py), its tabs (tabs/) laid out in a template. The page is sent before the
model is loaded (loading starts from pn.state.onload), so it appears at once. Under `panel serve` the
checkpoint and device come from MDLM_EXPLORER_CHECKPOINT / MDLM_EXPLORER_DEVICE (or ?checkpoint= in
the URL, a plain name only). Absolute imports: `panel serve` runs this file as a script.
"""
from __future__ import annotations

import os

import panel as pn

from explorer.dashboard.runtime.dispatch import Later, call_now, document_dispatcher
from explorer.dashboard.session import Session
from explorer.dashboard.tabs import MAIN_TAB, TAB_NAMES, LaterView, build_tab
from explorer.dashboard.tabs.explore.controls import ControlsView
from explorer.dashboard.ui.base import notice, show_notice, watch_presentation
from explorer.dashboard.ui.connection import watch_connection
from explorer.dashboard.ui.header import HeaderView
from explorer.dashboard.ui.internals import (lighter_paints, lighter_property_updates, local_stylesheets,
                                             mend_location_query, page_template, session_document,
                                             steady_pane_stylesheets)
from explorer.dashboard.ui.lesson import lesson_bar, lessons_menu
from explorer.dashboard.ui.palette import ACCENT
from explorer.dashboard.urlstate import UrlState, query_args

TITLE = "mdlm-explorer"
URL_QUIET = 1.0  # seconds the knobs rest before the link in the URL bar is rewritten (rewrite_when_quiet)
APP_CSS = """
.dashboard-header .hdr { color: white; }
"""


def served_doc():
    """The Bokeh document of the live server session being built, else None (a script, a notebook,
    or a stale document left current by a server that already ended that session)."""
    doc = session_document()
    context = getattr(doc, "session_context", None)
    if context is None or getattr(context, "destroyed", False):
        return None
    return doc


def page_args() -> dict:
    """The query of this session's own page ({key: [bytes, ...]}), {} outside a served session.
    pn.state.session_args reads pn.state.curdoc, which falls back to Bokeh's process-wide current
    document: a dashboard built in a script or notebook of a process that also serves (a test run)
    took another session's link as its own, tab and knobs."""
    doc = served_doc()
    request = getattr(doc.session_context, "request", None) if doc is not None else None
    return dict(getattr(request, "arguments", None) or {})


def _dispatcher():
    """Hand worker results to this session's event loop when served; call directly elsewhere."""
    doc = served_doc()
    return document_dispatcher(doc) if doc is not None else call_now


def build_tabs(state: Session):
    """Main area tabs: Explore, then Compare, Inspect, Sweep and Model (tabs/), each built from the same
    session state so a URL can select a tab and reproduce its view. Not dynamic: a hidden dynamic tab
    keeps its Bokeh models outside the document, and Panel restyles a pane updated there (a run's
    status text) with CDN stylesheet URLs shared by the whole page: offline, loading.css then fails.
    Instead, a tab's state exists from the start (a link sets its knobs), but its view is in the page
    (and the document) only while the tab is shown (fill_tab, empty_tab). Bokeh lays out the whole
    document after every change it receives, hidden tabs included, and re-lists every model for each
    patch it sends: with the four other tabs in the page, a checkpoint switch kept the browser busy
    for 7 s here (0.2 s without them; benchmarks/bench_tabs.py), and each live step of the Explore
    tab cost three times as much to send."""
    tabs = pn.Tabs((MAIN_TAB, build_tab(MAIN_TAB, state)[1]), dynamic=False, sizing_mode="stretch_width",
                   name="tabs")
    tabs.lazy_views = {}
    for name in TAB_NAMES:
        _, view = build_tab(name, state, lazy=True)  # built when first shown (build_tab says why)
        tabs.lazy_views[len(tabs)] = view
        tabs.append((name, pn.Column(sizing_mode="stretch_width")))
    return tabs


def fill_tab(tabs, index: int) -> None:
    """Put a tab's view into its slot if it is out (on the UI thread, holding the document)."""
    view = tabs.lazy_views.pop(index, None)
    if isinstance(view, LaterView):
        view = view.build()
    if view is not None:  # (its components must not be pn.layout.Divider: see views/base.rule)
        tabs[index].objects = [view]


def empty_tab(tabs, index: int) -> None:
    """Take a hidden tab's view out of the page until it is shown again (build_tabs says why). Its
    state keeps working (a comparison goes on running), and the view, re-rendered from that state
    when it comes back, shows where the work got to. Explore stays: it is the page's main view."""
    if index != 0 and index != tabs.active and index not in tabs.lazy_views and tabs[index].objects:
        tabs.lazy_views[index] = tabs[index].objects[0]
        tabs[index].objects = []


def watch_shown(state: Session, tabs, titles: list[str]) -> None:
    """Swap the tab on screen into the page (fill_tab, empty_tab) and tell it that it is shown
    (TabState.on_shown) once a model is loaded: on a click, and when a model loads while it is shown
    (the first load of a link that opens on that tab)."""
    def show(hidden=()):
        for index in hidden:
            empty_tab(tabs, index)
            if titles[index] in state.tabs and index != tabs.active:
                state.tabs[titles[index]].on_hidden()
        fill_tab(tabs, tabs.active)
        title = titles[tabs.active]
        if title in state.tabs and state.model is not None:
            state.tabs[title].on_shown()

    def shown(*events):
        # Through the dispatcher, not inline: a tab click arrives as a browser event that Panel may
        # process without the document lock, and on_shown redraws views that change Bokeh models.
        hidden = [e.old for e in events if e.name == "active"]
        state.dispatch(lambda: show(hidden))

    tabs.param.watch(shown, "active")
    state.param.watch(shown, "loaded")  # not model_info: the knobs (length...) are fitted after it


def link_url(state: Session, tabs) -> UrlState:
    """The session's link: the query's knobs and tab applied now, before the first run (the model
    loads later, in pn.state.onload, and checks the model-dependent ones), and the URL rewritten as the
    knobs and the tab change."""
    titles = list(state.tabs)  # the order build_tabs appended them in
    url = UrlState(state, titles)
    url.apply(query_args(page_args()))
    state.load_hooks.append(url.hook)
    if url.tab != MAIN_TAB:  # only the link's tab works at first: Explore runs when first shown
        state.tabs[MAIN_TAB].hold_runs()
    tabs.active = titles.index(url.tab)
    fill_tab(tabs, tabs.active)  # the tab a link opens on is in the first page
    for title in titles:  # the others wait for their first on_shown
        if title != url.tab and title in state.tabs:
            state.tabs[title].on_hidden()
    tabs.param.watch(lambda event: setattr(url, "tab", titles[event.new]), "active")
    watch_shown(state, tabs, titles)
    url.param.watch(lambda event: setattr(tabs, "active", titles.index(event.new)), "tab")

    def show_tab(event):  # a tab's action asked for another tab (Model's "Sample from it": Explore)
        if event.new in titles:
            url.tab = event.new
            state.show_tab = ""
    state.param.watch(show_tab, "show_tab")
    location = pn.state.location
    if location is not None and served_doc() is not None:
        rewrite_when_quiet(state, url, location)
    return url


def rewrite_when_quiet(state: Session, url: UrlState, location) -> None:
    """Rewrite the page's URL once its values have rested URL_QUIET seconds: a slider drag writes it
    once, and the write stays out of the run the change starts (each write cost the browser a message
    and a style-and-layout pass of the whole page, ~8 ms, on the cores the sampler needs: bench_dashboard)."""
    later = Later(state.dispatch)
    url.watch(lambda: later.schedule(URL_QUIET, lambda: setattr(location, "search", url.search())))


def url_notice(url: UrlState):
    """What the link asked for that was not applied, above the tabs (hidden when nothing)."""
    # A notice (plain text): the link's keys and values are anyone's text, `<img onerror=...>` included
    alert = notice("warning", text=url.notice, css_classes=["url-notice"])
    url.param.watch(lambda event: show_notice(alert, event.new), "notice")
    return alert


def create_app(checkpoint: str | None = None, device: str = "auto", *, fallback: str | None = None,
               state: Session | None = None, autoload: bool = True):
    """The dashboard as a Panel template (served, or shown inline in Jupyter).

    checkpoint: a plain name in checkpoints/ (default: shakespeare if present); device: auto|cpu|cuda.
    fallback: opened instead of a `checkpoint` that is not in checkpoints/ (with a notice).
    autoload=False leaves loading to the caller (tests drive `state` directly)."""
    pn.extension(notifications=False)
    steady_pane_stylesheets()  # a pane's text change re-lays out the whole page otherwise (see there)
    lighter_property_updates()  # a property change asked the design for stylesheets it then dropped
    mend_location_query()  # a link with a second '?' was a 500 error otherwise (see there)
    if served_doc() is not None:  # before any model is made: none may ever point at Panel's CDN
        local_stylesheets(served_doc())
    state = state or Session(checkpoint=checkpoint, device=device, dispatch=_dispatcher(), fallback=fallback)
    # Bootstrap rather than the Fast templates: Fast always links a Google web font, which fails
    # (a console error) on an offline machine; every Bootstrap asset is bundled with Panel.
    tabs = build_tabs(state)
    watch_presentation(state, panes=[tabs])  # every tab's widgets and the tab titles at the type size
    url = link_url(state, tabs)
    template = page_template()(
        title=TITLE, sidebar=[ControlsView(state=state.tabs["Explore"])],
        main=[url_notice(url), lesson_bar(url, state), tabs],  # a lesson link's bar above the tabs (ui/lesson.py)
        header=[HeaderView(state=state), lessons_menu(state)], header_background=ACCENT, sidebar_width=340,
        raw_css=[APP_CSS],
        # on a projector the figure is the point: the knobs wait behind the header's toggle (one click),
        # else they filled the first screen and took a third of a 1024-pixel width from the figure
        collapsed_sidebar=state.presentation,
        # No busy spinner: Panel's busy state is process-wide, so every open page's spinner turned
        # whenever any session handled an event, and a knob change kept it spinning through the run
        # (about 45 ms of the browser's CPU per 32-step run, on the cores the sampler needs:
        # benchmarks/bench_dashboard.py). The header's status line says what this session is doing.
        busy_indicator=None)
    template.explorer_state = state  # the session: the handle tests and notebooks use to drive the app
    template.url_state = url
    if served_doc() is not None:
        pn.state.on_session_destroyed(lambda context: state.close())
        watch_connection(served_doc())  # a banner, then a reload, when the page loses its server
        lighter_paints(served_doc())
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
    query = page_args().get("checkpoint")
    # errors="replace": bytes that are not UTF-8 make a name that matches nothing, not a traceback
    name = query[0].decode(errors="replace") if query else configured
    return {"checkpoint": name or None, "fallback": configured,
            "device": device or os.environ.get("MDLM_EXPLORER_DEVICE", "auto")}


if pn.state.served:
    create_app(**served_args()).servable(title=TITLE)
