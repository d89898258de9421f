"""Panel's socket writes as the dashboard mends them (ui/internals.py): patches queued while an earlier
batch finishes are still sent, in order (mend_panel_write_queue), and a page closed mid-message leaves
no write unawaited (mend_panel_socket_writes). Plots paint without asking the browser for CSS variables
that nothing in the page defines (lighter_paints)."""
from __future__ import annotations


def test_patches_queued_while_an_earlier_batch_finishes_are_still_sent():
    """Panel's write queue (ui/internals.mend_panel_write_queue): a sending task that finishes drops its
    document's write flag even when another batch was queued meanwhile, and that batch's task then
    returned without sending it. Seen under load as a page that kept "sampling …" after its run had
    ended. Here the queue is left in that state, and the batch must still go out, in order."""
    import asyncio

    from bokeh.document import Document
    from panel.io import document as panel_document

    from explorer.dashboard.ui.internals import mend_panel_write_queue

    mend_panel_write_queue()
    sent = []

    class Socket:  # a socket type Panel hands to a registered writer
        pass

    class Connection:
        _socket = Socket()

    panel_document.extra_socket_handlers[Socket] = lambda conn, msg=None: sent.append(msg) or []
    doc = Document()

    async def stranded():
        panel_document._WRITE_MSGS[doc] = {Connection(): ["first", "second"]}  # queued, flag dropped
        await panel_document._dispatch_msgs(doc)
        for _ in range(50):
            if sent:
                break
            await asyncio.sleep(0.01)

    try:
        asyncio.run(stranded())
    finally:
        del panel_document.extra_socket_handlers[Socket]
        panel_document._WRITE_MSGS.pop(doc, None)
        panel_document._WRITE_BLOCK.pop(doc, None)
    assert sent == ["first", "second"]


def test_a_page_closed_mid_message_leaves_no_write_unawaited():
    """Panel's socket writes (ui/internals.mend_panel_socket_writes): a patch goes out as several frames.
    When the page closes mid-message, the next frame's write raises WebSocketClosedError at once, and
    Panel dropped the futures of the frames already written with it: each failed unawaited and logged
    "Task exception was never retrieved" (a tab closed while a run streamed). Every future made must
    be returned (to be awaited), and no write raise."""
    import asyncio

    from bokeh.document import Document
    from bokeh.protocol import Protocol
    from panel.io import document as panel_document
    from tornado.websocket import WebSocketHandler

    from explorer.dashboard.ui.internals import mend_panel_socket_writes

    mend_panel_socket_writes()

    async def close_mid_message():
        loop = asyncio.get_running_loop()

        class Stream:  # closes after its second frame, as a page's socket does when the tab closes
            def __init__(self):
                self.frames = []

            def is_closing(self):
                return len(self.frames) >= 2

            def write_message(self, message, binary=False):
                self.frames.append(message)
                return loop.create_future()

        class Socket(WebSocketHandler):
            def __init__(self):  # no request: only the writes are exercised
                self.ws_connection = Stream()

        class Connection:
            _socket, protocol = Socket(), Protocol()

        msg = Connection.protocol.create("PULL-DOC-REPLY", "id", Document())
        return panel_document.dispatch_tornado(Connection(), msg=msg), Connection._socket.ws_connection.frames

    futures, frames = asyncio.run(close_mid_message())
    assert len(frames) == 2 and len(futures) == 2  # the two frames written, none after the close


def test_a_pages_build_walks_the_model_graph_once(checkpoints):
    """The dashboard's template (ui/internals.page_template) builds a session's page with one walk of
    Bokeh's model graph, where Panel's own walks it at each root, stylesheet and plot; every model of
    the page is the document's after it."""
    import panel as pn
    from bokeh.document import Document

    from explorer.dashboard import create_app

    def walks_to_build(template) -> tuple[int, Document]:
        doc, walks = Document(), []
        real = doc.models.recompute
        doc.models.recompute = lambda: walks.append(1) or real()
        template.server_doc(doc)
        return len(walks), doc

    app = create_app(checkpoint="tiny", device="cpu", autoload=False)
    walks, doc = walks_to_build(app)
    assert walks == 1
    assert all(doc.get_model_by_id(m.id) is m for root in doc.roots for m in root.references())
    plain = pn.template.BootstrapTemplate(main=list(app.main), sidebar=list(app.sidebar), header=list(app.header))
    assert walks_to_build(plain)[0] > 3  # what the one walk saves


def test_no_stylesheet_of_the_page_styles_a_plot_through_bokeh_css_variables():
    """lighter_paints answers BokehJS's `--bk-<visual>` reads (line-color, text-font-size...) with "" without
    asking the browser, which is what the browser answered while no stylesheet of the page sets one. The
    page's stylesheets are the dashboard's (in its Python sources), Panel's (its dist folder) and Bokeh's
    (compiled into its JavaScript): none may set one, or plots would lose that styling."""
    import re
    from pathlib import Path

    import bokeh
    import panel

    import explorer

    setting = re.compile(r"--bk-[a-z]")  # a variable's name; Bokeh's bare prefix ("--bk-") reads none
    sources = {"the dashboard": sorted(Path(explorer.__file__).parent.rglob("*.py")),
               "Panel": sorted((Path(panel.__file__).parent / "dist").rglob("*.css")),
               "Bokeh": sorted((Path(bokeh.__file__).parent / "server" / "static" / "js").glob("bokeh*.js"))}
    assert all(sources.values()), {name: len(files) for name, files in sources.items()}
    found = [f"{name}: {path.name}: {m.group(0)}..." for name, files in sources.items() for path in files
             if not path.name.endswith(".min.js")
             for m in setting.finditer(path.read_text(errors="replace"))]
    assert found == []


def test_lighter_paints_is_sent_to_the_page_when_its_document_is_ready():
    """The patch is a CustomJS callback on the document's `document_ready` event, the code that
    applies it once per page and leaves a BokehJS without its names as it is."""
    from bokeh.document import Document

    from explorer.dashboard.ui.internals import LIGHTER_PAINTS_JS, lighter_paints

    doc = Document()
    lighter_paints(doc)
    callbacks = doc.callbacks._js_event_callbacks
    assert list(callbacks) == ["document_ready"] and [c.code for c in callbacks["document_ready"]] == [LIGHTER_PAINTS_JS]


def test_a_panes_new_text_leaves_its_stylesheets_as_they_were():
    """A pane on the first page (the template applied its design without the page-wide sheets) whose
    text changes: the page gets the new text only, not Bootstrap's whole stylesheet added to the pane
    (a change of stylesheets lays out the whole page again in the browser)."""
    import panel as pn
    from bokeh.document import Document
    from panel.io.state import set_curdoc

    from explorer.dashboard.ui.internals import page_template, steady_pane_stylesheets

    steady_pane_stylesheets()
    html = pn.pane.HTML("", css_classes=["first"])
    markdown = pn.pane.Markdown("", css_classes=["second"])
    doc = Document()
    with set_curdoc(doc):
        page_template()(title="t", main=[pn.Column(html, markdown)]).server_doc(doc)
    models = [pane._models[next(iter(pane._models))][0] for pane in (html, markdown)]
    before = [list(m.stylesheets) for m in models]
    changed = []
    doc.on_change(lambda event: changed.append(("first" if "first" in event.model.css_classes else "second",
                                                event.attr)))
    with set_curdoc(doc):
        html.object = "<b>new</b>"
        markdown.object = "**new**"
    assert sorted(changed) == [("first", "text"), ("second", "text")]
    assert [list(m.stylesheets) for m in models] == before and "new" in models[0].text


def test_a_panes_steady_update_sends_what_panel_would_less_the_stylesheets():
    """steady_properties: the properties Panel's own `_get_properties` gives an HTML and a Markdown pane on a
    page with the template's design (styles, classes, margins, the text), stylesheets apart, with the design
    asked once per pane, not at every new text."""
    import panel as pn
    from bokeh.document import Document
    from panel.io.state import set_curdoc

    from explorer.dashboard.ui.internals import page_template, steady_properties

    html = pn.pane.HTML("<b>a</b>", css_classes=["one"], styles={"font-size": "13px"}, margin=(2, 4))
    markdown = pn.pane.Markdown("**a**", css_classes=["two"], sizing_mode="stretch_width")
    doc = Document()
    with set_curdoc(doc):
        page_template()(title="t", main=[pn.Column(html, markdown)]).server_doc(doc)
    for pane, text in ((html, "<i>b</i>"), (markdown, "*b*")):
        pane.object = text
        steady_properties(pane, doc)  # the design's answer kept (an update may have kept it already)
        asked = []
        design_params = pane._design.params
        pane._design.params = lambda *a, **k: asked.append(1) or design_params(*a, **k)
        try:
            for _ in range(3):
                got = steady_properties(pane, doc)
                want = pane._get_properties(doc)  # Panel's (asks the design itself)
                want.pop("stylesheets")
                assert got == want and "b" in got["text"]
        finally:
            del pane._design.params
        assert len(asked) == 3  # Panel's three calls; steady_properties used the answer it kept


def test_a_property_change_sends_what_panels_own_update_sends():
    """lighter_property_updates: a change without stylesheets skips the design's stylesheets (Panel asked
    for them and dropped them), and sends the same properties as Panel's own update; a change of
    stylesheets still gets the design's merged in, as there."""
    from collections import namedtuple

    import panel as pn
    from bokeh.document import Document
    from panel.reactive import Reactive
    from panel.theme import Bootstrap

    from explorer.dashboard.ui.internals import lighter_property_updates

    lighter_property_updates()
    lighter_property_updates()  # idempotent: wrapped once
    ours = Reactive._update_properties
    panels = ours.original
    assert getattr(ours, "lighter", False) and not getattr(panels, "lighter", False)
    Event = namedtuple("Event", "name new")
    doc = Document()
    download = pn.widgets.FileDownload(label="d", filename="a.txt", callback=lambda: "x", design=Bootstrap)
    pn.Column(download, design=Bootstrap).get_root(doc)
    for events in ([Event("disabled", True)], [Event("filename", "b.txt"), Event("disabled", False)],
                   [Event("stylesheets", [":host { color: red; }"]), Event("label", "e")]):
        got, want = ours(download, *events, doc=doc), panels(download, *events, doc=doc)
        assert list(got) == list(want)
        for key in got:
            assert (got[key] == want[key] if key != "stylesheets"
                    else [getattr(s, "url", s) for s in got[key]] == [getattr(s, "url", s) for s in want[key]])
    assert len(got["stylesheets"]) > 1  # the design's sheets before the widget's own
