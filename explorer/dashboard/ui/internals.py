"""The few places the dashboard touches private Panel, param or Bokeh internals, each saying why.

Kept together so an upgrade of Panel, param or Bokeh has one file to check (the tests exercise each).
"""
from __future__ import annotations

import contextlib
import functools
import json


def no_debounce(widget) -> None:
    """Handle a widget's browser changes at once. Panel waits 50 ms (Syncable._debounce) before
    handling a change from the browser, to merge bursts. Selects, inputs and buttons send one change
    per edit, and the wait is a third of the 150 ms knob-to-rows budget. (Sliders keep it: arrow keys
    send a burst, and unmerged it races the values echoed back to the slider.)"""
    widget._debounce = 0


def sync_throttled(widget) -> None:
    """Keep a throttled slider's `value_throttled` in the browser at the value the server set.

    Panel sends a slider's `value` to the browser but never its `value_throttled` (Slider._update_model
    drops it). After the server moved a knob (a checkpoint's recommended knobs, a link, the number box
    beside the slider) the browser still held the value the last drag ended on, and a drag ending there
    again sent nothing (BokehJS sends only a property that changes): the slider showed 256 while the
    runs used 32. The browser's copy is set where Panel sends `value` (Syncable._update_model: under the
    document's lock, or on its next tick), with set_from_json, Bokeh's way to set a property that is
    read-only for user code."""
    update = widget._update_model

    def update_model(events, msg, root, model, doc, comm):
        update(events, msg, root, model, doc, comm)  # drops from msg what only echoes the browser's own
        value = msg.get("value")
        if value is not None and getattr(model, "value_throttled", value) != value:
            model.set_from_json("value_throttled", value)
    widget._update_model = update_model


def validate(parameter, value) -> None:
    """param's own check of a value against a Parameter (types, bounds, objects), raising ValueError
    or TypeError, without setting it: a shared link's values are checked before any is applied.
    param has no public call for this (Parameter._validate)."""
    parameter._validate(value)


def session_document():
    """The Bokeh document of the Panel session being built now, or None. Panel's context variable
    (pn.state._curdoc), not pn.state.curdoc: that falls back to Bokeh's process-wide current
    document, which a server running in another thread of this process leaves set."""
    import panel as pn

    return pn.state._curdoc.get()


def local_stylesheets(doc) -> None:
    """Panel's stylesheets for every model of `doc` from this server from the start, never from its CDN.

    Panel points a model's stylesheets (loading.css, the Bootstrap theme...) at the `dist_url` of its
    document's template variables, and at cdn.holoviz.org while there is none. It sets that variable
    only when it renders the session's HTML page (panel.io.server.server_html_page_for_session), and
    then rewrites the models already in the page. A session made by its page's websocket has no page
    rendered: Bokeh discards a session whose websocket has not connected within 15 s, and the late
    websocket then makes a new one, built from scratch. On a loaded server (a page opened with others
    at once) every model of that page asked the CDN for its stylesheets, which fails offline. Set here
    as that page would set it: server-relative under the session's prefix (get_dist_path), unless Bokeh
    is configured for CDN resources."""
    from panel.io.resources import get_dist_path
    from panel.io.state import set_curdoc

    with set_curdoc(doc):  # get_dist_path reads the session's prefix (state.rel_path) from its document
        doc.template_variables.setdefault("dist_url", get_dist_path())


# BokehJS reads two CSS values of a plot's element on every paint: each visual of its axes, grids and
# titles asks getComputedStyle for a `--bk-<visual>` variable (VisualProperties._get_css_value), and each
# axis for the plot's font size (PlotView.base_font_size). A page changes its DOM between paints (a
# status line, a layout), so each read makes the browser recompute the styles of the whole page first:
# a quarter to a third of the browser's main thread on an Inspect or Compare page. The dashboard styles
# no plot through `--bk-` variables (nor do Panel's and Bokeh's stylesheets: tests/unit/dashboard/ui/
# test_internals.py checks all three), so that read always gave "" and now gives it without asking. The
# font size only resolves `em` text sizes, and the dashboard gives every plot's text in pixels on its
# models (ui.base.apply_fonts, HoloViews' fontsize), so it is read once per plot and kept. Applied when
# the page's document is ready (its first paints are Bokeh's own); a BokehJS without these names is left
# as it is.
LIGHTER_PAINTS_JS = """
if (window.__mdlmLighterPaints) return
window.__mdlmLighterPaints = true
try {
  const {VisualProperties} = Bokeh.require("core/visuals/visual")
  const {PlotView} = Bokeh.require("models/plots/plot_canvas")
  const read = Object.getOwnPropertyDescriptor(PlotView.prototype, "base_font_size")
  if (typeof VisualProperties?.prototype?._get_css_value !== "function" || typeof read?.get !== "function")
    return
  VisualProperties.prototype._get_css_value = function (name) { return "" }
  const sizes = new WeakMap()
  Object.defineProperty(PlotView.prototype, "base_font_size", {configurable: true, get() {
    if (!sizes.has(this)) {
      const size = read.get.call(this)
      if (size == null) return size  // not laid out yet: ask again next time
      sizes.set(this, size)
    }
    return sizes.get(this)
  }})
} catch (error) {
  console.warn("plots paint as BokehJS paints them:", error)
}
"""


def lighter_paints(doc) -> None:
    """Spare the browser a style recomputation of the whole page per plot paint (LIGHTER_PAINTS_JS),
    from when the page of `doc` is ready."""
    from bokeh.models import CustomJS

    doc.js_on_event("document_ready", CustomJS(code=LIGHTER_PAINTS_JS))


@functools.lru_cache(maxsize=1)
def quiet_file_download():
    """pn.widgets.FileDownload that ignores a callback's None (a failure: the button says why)
    instead of raising (FileDownload._sync_data), and whose `description` (hover help: a failure's
    reason, which may quote names) is plain text: Panel renders a str description as Markdown, raw
    HTML included (Widget._process_param_change). Made once, on first use, so importing the
    downloads module does not import Panel."""
    import panel as pn

    from .safe import text_tooltip

    class FileDownload(pn.widgets.FileDownload):
        def _sync_data(self, fileobj):
            if fileobj is not None:
                super()._sync_data(fileobj)

        def _process_param_change(self, params):
            if isinstance(params.get("description"), str):  # a Tooltip of text: Panel leaves it as it is
                params["description"] = text_tooltip(params["description"])
            return super()._process_param_change(params)

    return FileDownload


@functools.lru_cache(maxsize=1)
def text_alert():
    """pn.pane.Alert whose object is plain text, never Markdown or HTML: a notice quotes links, typed
    text and task errors, and Alert (a Markdown pane) passes raw HTML through and makes links of
    `[x](url)`. The pane itself escapes (Markdown's _transform_object, what turns the object into the
    model's text, is replaced), so no caller can forget to. Line breaks and spaces show as typed.
    Made once, on first use (importing this module does not import Panel)."""
    import html

    import panel as pn
    import param

    from .safe import literal

    class TextAlert(pn.pane.Alert):
        disable_math = param.Boolean(default=True, doc="$$...$$ in a notice is text, not TeX")
        _rename = {"disable_math": "disable_math"}  # sent to the page's model (Markdown keeps it back)

        def _transform_object(self, obj) -> dict:
            text = "" if obj is None else str(obj)
            # escaped twice: `literal` for the page, then as Panel sends a pane's text (the page decodes it)
            return {"object": html.escape(f'<p style="white-space: pre-wrap; margin: 0">{literal(text)}</p>')}

    return TextAlert


def live_html(**props):
    """A Bokeh model for HTML replaced many times a second (the live sample text): Panel's own HTML
    model (panel.models.markup.HTML, what pn.pane.HTML wraps, without the pane's per-update work).
    A change of its text sets the element's innerHTML; Bokeh's Div instead re-renders and lays the
    whole page out again on every text change (measured: 80 of the browser's 268 ms per 32-step run,
    bench_dashboard). No TeX ($ in a sample is text) and no scripts. Set its text with set_live_html."""
    from panel.models.markup import HTML

    return HTML(text="", disable_math=True, run_scripts=False, **props)


def set_live_html(model, markup: str) -> None:
    """The page's model decodes the text it receives (as the HTML pane sends it: escaped)."""
    import html

    model.text = html.escape(markup)


def mend_panel_write_queue() -> None:
    """Panel queues a session's document patches (_WRITE_MSGS) behind a per-document flag
    (_WRITE_BLOCK) while its socket is busy, and a task (_dispatch_msgs) sends them. A task that
    finishes sending drops the flag even when another batch was queued meanwhile, and that batch's own
    task then finds no flag and returns: its messages stay unsent until some later write, forever if
    none comes. Seen under load: a page kept "sampling 8 steps …" after the run had ended, the server's
    models holding the final text (a 4-session load test beside two CPU burners: about one attempt in six).
    This wraps the task so that whatever is left queued without a flag is sent. Idempotent."""
    from panel.io import document

    dispatch = document._dispatch_msgs
    if getattr(dispatch, "mended", False):
        return

    async def dispatch_msgs(doc):
        await dispatch(doc)
        if doc in document._WRITE_MSGS and doc not in document._WRITE_BLOCK:
            document._WRITE_BLOCK[doc] = True
            document._dispatch_write_task(doc, dispatch_msgs, doc)

    dispatch_msgs.mended = True
    document._dispatch_msgs = dispatch_msgs  # Panel looks the name up at each call (schedule_write_events)


def steady_pane_stylesheets() -> None:
    """An HTML or Markdown pane whose object changes keeps the stylesheets its model was made with.

    Panel re-sends every property of such a pane when its object changes (HTMLBasePane._update), and the
    stylesheets it computes then differ from those the page was built with: the template applied its
    design to the first page without the sheets it loads for the whole page, while the update adds them,
    Bootstrap's entire stylesheet among them, to the pane's own shadow root. The page then parses and
    applies that stylesheet again for each such pane, and a change of stylesheets makes BokehJS lay out
    the whole page and repaint every plot (LayoutDOMView.invalidate_layout): on a five-column Compare
    link half of the browser's main thread went to the fifteen panes' first updates. The pane keeps the
    look it was first drawn with; one made later, in a tab first filled on its click, was made with the
    sheets and keeps them too. Idempotent.

    Since the stylesheets are not sent, the design is not asked for them at each change either
    (steady_properties): its answer resolved the theme's stylesheet paths on the file system, a third
    of the cost of the header's update, which a run makes six times."""
    from panel.pane.markup import HTMLBasePane

    update = HTMLBasePane._update
    if getattr(update, "steady", False):
        return

    def _update(self, ref, model):
        if self.enable_streaming:  # (Panel's chat streaming: not the dashboard's) as Panel does it
            return update(self, ref, model)
        model.update(**steady_properties(self, model.document))

    _update.steady = True
    HTMLBasePane._update = _update


def steady_properties(pane, doc) -> dict:
    """What Panel's `pane._get_properties(doc)` gives, without `stylesheets` (steady_pane_stylesheets).

    The design's other parameters for the pane (none for the Bootstrap design's HTML and Markdown
    panes) are asked for once and kept on the pane while its design is the same; Panel's own merge
    follows: the pane's value wins unless it is the parameter's default."""
    kept = pane.__dict__.get("_steady_design")
    if kept is None or kept[0] is not pane._design:
        params, _ = pane._design.params(pane, doc) if pane._design else ({}, None)
        kept = pane._steady_design = (pane._design, {k: v for k, v in params.items() if k != "stylesheets"})
    params = dict(kept[1])
    for k, v in pane._init_params().items():
        if k == "stylesheets":
            continue  # the object changed, not the styles
        if k == "tags" and k in params:
            params[k] = params[k] + v
        elif k not in params or pane.param[k].default is not v:
            params[k] = v
    props = pane._process_param_change(params)
    props.pop("stylesheets", None)  # (a subclass may add its own)
    return props


def lighter_property_updates() -> None:
    """A widget's or pane's property change costs its design's stylesheets only when its stylesheets changed.

    Panel's Reactive._update_properties asks the design for every parameter it would apply to the component
    (Design.params: the theme's stylesheet paths resolved and turned into stylesheet models) at each
    property change, and uses the answer only when the change includes `stylesheets`. A run toggles a dozen
    such properties (Stop's and the downloads' `disabled`, their filenames), and the design's answer was
    a seventh of the server's own work per run (a profile of one session running back to back). The
    result is unchanged: the same properties go out, and a stylesheets change is still merged with the
    design's. Idempotent."""
    from panel.reactive import Reactive

    update = Reactive._update_properties
    if getattr(update, "lighter", False):
        return

    def _update_properties(self, *events, doc):
        if not self._design or all(event.name != "stylesheets" for event in events):
            return self._process_param_change({event.name: event.new for event in events})
        return update(self, *events, doc=doc)

    _update_properties.lighter, _update_properties.original = True, update
    Reactive._update_properties = _update_properties


def mend_panel_socket_writes() -> None:
    """Panel writes a patch to a page's websocket as several frames (panel.io.document.dispatch_tornado:
    header, metadata, content, then each binary buffer), each write a future awaited later. When the
    page closes mid-message, a frame's write finds the stream closed and closes the connection, and the
    next frame's write raises WebSocketClosedError at once: the futures already made were dropped with
    the exception, never awaited, and each one that failed logged "Task exception was never retrieved"
    with a WebSocketClosedError traceback (a tab closed while a run streamed its heatmap). Here the
    frames stop at the first write the closed connection refuses, and the futures made so far are
    returned, to be awaited as Panel awaits them (a closed socket: one warning, no traceback).
    Idempotent."""
    from panel.io import document
    from tornado.websocket import WebSocketHandler

    if getattr(document.dispatch_tornado, "mended", False):
        return

    def closed(socket) -> bool:
        connection = getattr(socket, "ws_connection", None)
        return connection is None or connection.is_closing()

    def dispatch_tornado(conn, events=None, msg=None):
        socket = conn._socket
        if closed(socket):
            return []
        if msg is None:
            if not events:
                return []
            msg = conn.protocol.create("PATCH-DOC", events)
        frames = [(msg.header_json, False), (msg.metadata_json, False), (msg.content_json, False)]
        for buffer in msg._buffers:
            frames += [(json.dumps(buffer.ref), False), (buffer.to_bytes(), True)]
        futures = []
        for frame, binary in frames:
            if closed(socket):  # the page went away mid-message: the rest cannot reach it
                break
            futures.append(WebSocketHandler.write_message(socket, frame, binary=binary))
        return futures

    dispatch_tornado.mended = True
    document.dispatch_tornado = dispatch_tornado  # looked up at each call (write_events, _dispatch_msgs)


@contextlib.contextmanager
def one_graph_walk(doc):
    """While the block runs, Bokeh walks `doc`'s model graph at most once, at its end, and only if the block
    changed it.

    Bokeh walks every model of a document again (DocumentModelManager.recompute: every property of every
    model) each time a property holding models changes outside a freeze: a pane's new figure, a list of
    children, a pane's stylesheets. One Inspect result changes several of these, and on an Inspect page
    each walk costs about 40-50 ms of the server's CPU (benchmarks/bench_graph_walks.py). Bokeh's own `models.freeze()`
    walks the graph at its end whether or not anything changed, which every step of a live run (data
    patches only) would then pay. The walk is put off only within one callback: a model added by it is
    attached to the document at its end, so a later callback's changes to that model reach the page.
    Freezes inside the block (HoloViews, Panel's designs) still walk at their own end, as before.
    Internals: the manager's `invalidate` (what a changed property calls) is shadowed for the block."""
    models, stale = doc.models, False

    def mark_stale() -> None:
        nonlocal stale
        stale = True

    models.invalidate = mark_stale  # shadows the manager's method for this block only
    try:
        yield
    finally:
        del models.invalidate
        if stale:
            models.invalidate()


@functools.lru_cache(maxsize=1)
def page_template():
    """Panel's Bootstrap template, whose page is built with Bokeh's model graph walked once.

    Building a session's page adds its roots and applies the design's stylesheets and HoloViews' plots,
    and each of these walks every model of the document again (DocumentModelManager.recompute): about a
    dozen walks for an Inspect page, 0.4 s of the server's CPU per page opened. Inside Bokeh's
    `models.freeze()` they are one walk, at its end. Made once, on first use."""
    import panel as pn

    class PageTemplate(pn.template.BootstrapTemplate):
        def server_doc(self, doc=None, title=None, location=True):
            if doc is None:  # Panel makes the document: nothing to hold yet
                return super().server_doc(doc, title, location)
            with doc.models.freeze():
                return super().server_doc(doc, title, location)

    return PageTemplate


def mend_location_query() -> None:
    """Let a link whose query holds a second '?' open. Panel reads the page's address from the request
    (panel.io.location._get_location_params) with `uri.split('?')`, which expects exactly one; a shared
    link such as `...&inspect.texts=What light through yonder window breaks?` (browsers leave a '?' in
    the query unencoded) made the page a 500 error before any of the dashboard ran. The query is
    everything after the first '?' (RFC 3986), so the later ones are sent on encoded, as %3F, which is
    what Tornado's query arguments already decode them from. Idempotent."""
    from panel.io import location

    if getattr(location._get_location_params, "mended", False):
        return
    original = location._get_location_params

    def get_location_params(protocol, host, uri):
        if uri and uri.count("?") > 1:
            path, _, query = uri.partition("?")
            uri = f"{path}?{query.replace('?', '%3F')}"
        return original(protocol, host, uri)
    get_location_params.mended = True
    location._get_location_params = get_location_params
