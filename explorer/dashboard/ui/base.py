"""What every view shares: the state it draws, pushing raw Bokeh changes in a notebook, throttling."""
from __future__ import annotations

import panel as pn
import param

from .internals import text_alert
from .palette import FONT


class StateView(pn.viewable.Viewer):
    """A view of one state (a tab's state, or the session); subclasses build their layout once in
    __init__ and redraw from param.depends("state.<param>") or `on` watchers."""

    state = param.ClassSelector(class_=param.Parameterized, doc="The state this view draws")

    @staticmethod
    def on(obj, names, redraw) -> None:
        """Call `redraw()` when any of `names` of `obj` changes (for objects the state holds, such as
        the session or a runtime Task, which param.depends cannot name)."""
        obj.param.watch(lambda *events: redraw(), names)

    def push(self, *panes) -> None:
        """push(): for the panes of this view."""
        push(*panes)


def push(*panes) -> None:
    """Raw Bokeh model changes reach a notebook only when pushed; a server session syncs them itself
    (this runs inside a document callback there)."""
    doc = pn.state.curdoc
    if doc is None or doc.session_context is None:
        pn.io.push_notebook(*panes)


def figure_pane(figure, css_class: str, **params):
    """A Panel pane of a Bokeh `figure` stretched to its column, the page finding it by `css_class`. The class
    goes on the figure: a Bokeh pane's own css_classes never reach the page (the figure is the pane's model)."""
    figure.css_classes = [css_class]
    return pn.pane.Bokeh(figure, sizing_mode="stretch_width", **params)


def apply_fonts(figure, presentation: bool) -> dict:
    """Title and axis type sizes of a Bokeh figure for normal or presentation (projector) mode;
    returns the size table so a view can style its extra parts (legends) the same way."""
    size = FONT[presentation]
    figure.title.text_font_size = size["title"]
    for axis in (figure.xaxis, figure.yaxis):
        axis.axis_label_text_font_size = size["plot"]
        axis.major_label_text_font_size = size["plot"]
    return size


def type_size(presentation: bool) -> dict:
    """Styles that set a view's type size (its host element; see widget_type_size for the inside)."""
    base = FONT[presentation]["base"]
    return {"font-size": base, "--bokeh-font-size": base}


# Panel's DataFrame pane sets its table at 12 px whatever its pane's type size: relative instead (12 px at the
# 14 px base type), so the table grows with its pane at projector type (watch_presentation's panes)
TABLE_CSS = "table.panel-df { font-size: 0.86em; }"


def widget_type_size(widget, presentation: bool) -> None:
    """A widget at the session's type size, its value, buttons and segments included: those are drawn
    in a shadow DOM whose theme sets their own sizes, so the host's font-size never reaches them
    (presentation mode left them small). A stylesheet inside the shadow root does."""
    widget.styles = {**widget.styles, **type_size(presentation)}  # keeps its layout styles (figure_first)
    base = FONT[presentation]["base"]
    css = (f":host {{ --font-size: {base}; }} .bk-btn, .bk-input, select, input, textarea, .bk-label, label, "
           f".noUi-tooltip {{ font-size: {base} !important; }} "
           ".bk-btn-group { flex-wrap: wrap; } "  # large segments wrap rather than run past a 1024 px column
           # a label wider than its fixed-width input ("Samples per point" and its help icon) wraps
           # rather than running past the window's edge
           "label { white-space: normal; overflow-wrap: anywhere; }")
    ours = [s for s in widget.stylesheets if not (isinstance(s, str) and s.startswith(":host { --font-size:"))]
    widget.stylesheets = ours + ([css] if presentation else [])
    if isinstance(widget, pn.widgets.Select) and widget.width:  # a fixed width clipped its value at projector type
        normal = widget.__dict__.setdefault("_desk_width", widget.width)
        widget.width = round(normal * _px(base) / _px(FONT[False]["base"])) if presentation else normal


def _px(size: str) -> float:
    return float(size.removesuffix("px"))


def watch_presentation(session, figures=(), panes=(), text_panes=(), widgets=()) -> None:
    """Keep views at the session's type size (its presentation toggle), now and on every change:
    `figures` (Bokeh: apply_fonts), `panes` (their font-size), `text_panes` (the --text-size and
    --caption-size variables their CSS reads), `widgets` (widget_type_size: segmented controls,
    buttons and inputs, whose shadow DOM a pane's font-size does not reach). The figures change through the session's dispatch:
    a raw Bokeh change must happen holding the document, and a param watcher may run without it."""
    def restyle(*events):
        size = FONT[session.presentation]
        for pane in panes:
            pane.styles = {**pane.styles, **type_size(session.presentation)}  # keeps flex_item, figure_first
        for widget in widgets:
            widget_type_size(widget, session.presentation)
        for pane in text_panes:
            # kept: its other styles (figure_first's order in a Compare column)
            pane.styles = {**pane.styles, "--text-size": size["text"], "--caption-size": size["base"]}
        if figures:
            session.dispatch(lambda: [apply_fonts(fig, session.presentation) for fig in figures])

    restyle()
    session.param.watch(restyle, "presentation")


# Headings inside Markdown / HTML panes, sized from the pane's own type size. A pane made after the page's
# first render (a tab filled when first clicked) is given Bootstrap's whole stylesheet, whose h3 is 28 px;
# made before (the tab opened from a link), only the theme's, 16 px (headings changed size with how the tab
# was opened). A stylesheet of the pane's own decides in both cases.
HEADING_CSS = "h1, h2, h3 { font-size: 1.17em; font-weight: bold; margin: 0.3em 0; } p { font-size: inherit; }"


def section(markdown: str, **kwargs) -> pn.pane.Markdown:
    """A Markdown block with a heading, the same size however its tab was opened (HEADING_CSS). The
    dashboard's own words only: Markdown makes links of outside text even when it is escaped (ui.safe)."""
    return pn.pane.Markdown(markdown, stylesheets=[HEADING_CSS], sizing_mode="stretch_width", **kwargs)


def heading(text: str, **kwargs) -> pn.pane.HTML:
    """An <h3> (text is HTML: outside text in it through ui.safe.literal), the same size however its tab
    was opened (HEADING_CSS)."""
    return pn.pane.HTML(f"<h3>{text}</h3>", stylesheets=[HEADING_CSS], sizing_mode="stretch_width", **kwargs)


def checkbox(parameter, **kwargs) -> pn.widgets.CheckBoxGroup:
    """A checkbox for a Boolean parameter whose label takes a click too. Bokeh 3.9's Checkbox
    draws its label as a <div> beside the <input>, so only the 16 px box toggled it; a one-option
    CheckBoxGroup draws <label><input><span>label</span></label>, and the browser makes the whole label
    the target. Kept in step with the parameter both ways."""
    owner, name, label = parameter.owner, parameter.name, parameter.label
    box = pn.widgets.CheckBoxGroup(options=[label], value=[label] if getattr(owner, name) else [], **kwargs)
    box.param.watch(lambda event: setattr(owner, name, bool(event.new)), "value")
    owner.param.watch(lambda event: setattr(box, "value", [label] if event.new else []), name)
    return box


def figure_first(session, *items, chosen=None, rank: int = -1) -> None:
    """In presentation (projector) mode, `items` (children of one Column) come first, in their own order:
    the tab's figure at the top of the first screen instead of under its controls and notes. CSS `order`,
    not a reordered Column: the views stay the same Bokeh models (no re-render, nothing to dispatch).

    session: the Session whose presentation toggle decides; items: Panel objects inside a pn.Column;
    chosen: (a Parameterized, a parameter's name, a value): the items come first only while that
    parameter has that value (a tab with several figures, the link naming which one is shown); rank: the
    CSS order they take (lower comes higher: -2 goes above the items of other calls, at -1)."""
    def place(*events):
        first = session.presentation and (chosen is None or getattr(chosen[0], chosen[1]) == chosen[2])
        for item in items:
            rest = {k: v for k, v in item.styles.items() if k != "order"}
            item.styles = {**rest, "order": str(rank)} if first else rest

    place()
    session.param.watch(place, "presentation")
    if chosen is not None:
        chosen[0].param.watch(place, chosen[1])


def flex_item(grow: int, min_width: int) -> dict:
    """`styles` of one item of a side_by_side row: its share of the row's width, and the width under
    which it moves below its neighbour. CSS, because Panel's min_width did not hold a flex item (at
    1024 px the Explore heatmap was squeezed to 274 px and its title cut)."""
    return {"flex": f"{grow} 1 0", "min-width": f"{min_width}px"}


def side_by_side(*items, **kwargs) -> pn.FlexBox:
    """Items in one row where their minimum widths (flex_item) fit, else wrapped one under the other,
    never past the window's edge (a 1024-pixel projector in presentation type)."""
    return pn.FlexBox(*items, flex_direction="row", flex_wrap="wrap", align_items="flex-start",
                      sizing_mode="stretch_width", **kwargs)


def notice(kind: str = "danger", text: str = "", **kwargs):
    """A notice (a Bootstrap alert of `kind`: danger, warning, info, success) showing `text`, hidden
    while that is ''; show_notice changes it. Every notice of the dashboard is one of these. Its text
    is plain text, whoever sets it (internals.text_alert): a notice quotes links, typed text and task
    errors, and must show them as typed, never as markup."""
    return text_alert()(text, alert_type=kind, visible=bool(text), sizing_mode="stretch_width", **kwargs)


def show_notice(alert, text: str) -> None:
    """Show `text` in a notice ('' hides it); the notice shows it as plain text."""
    alert.object, alert.visible = text, bool(text)


def rule():
    """A horizontal rule. Not pn.layout.Divider: its model keeps Panel's CDN stylesheet URL when it
    is made after the page's first render (a tab filled when first shown), which fails offline."""
    return pn.pane.HTML("<hr>", sizing_mode="stretch_width", margin=(4, 10))
