"""The one way text from outside meets markup: `literal`.

Text from outside is anything the dashboard did not write itself: a link's keys and values, a typed
template or text, checkpoint names and metadata, model ids, file names, corpus and generated text, and
the errors of tasks that quote any of these. It may hold `<img src=x onerror=...>`, `&lt;`, or a
Markdown link `[x](javascript:...)`; on the page it must read as those very characters.

Two rules keep it so:
- In HTML (pn.pane.HTML, the live text model, a `title` attribute) every piece of outside text goes
  through `literal`, whatever its source, at the place where the HTML is put together.
- Markdown is never given outside text: escaping for HTML does not stop Markdown's own links and
  emphasis. Notices (ui.base.notice) are plain-text panes that apply `literal` themselves; the Markdown
  panes (ui.base.section) hold the dashboard's own words only.

A leaf module (no Panel): the tabs' pure HTML builders import it too.
"""
from __future__ import annotations

import html


def literal(text) -> str:
    """`text` (any object: str() of it) as HTML that shows exactly its characters.

    Escapes &, <, >, " and ', so the result is safe between tags and inside a quoted attribute value
    alike; an entity such as `&lt;b&gt;` in `text` shows as typed, not as `<b>`.

    Returns: the escaped string."""
    return html.escape(str(text), quote=True)


def text_tooltip(text: str | None):
    """A widget's hover help (its `description`) showing `text` as typed; None for none. Panel renders
    a str description as Markdown, raw HTML and links included; a Bokeh Tooltip whose content is a
    str shows it as a text node. (Bokeh is imported here, when called: this module stays a leaf.)

    Returns: a bokeh.models.Tooltip, or None when `text` is empty."""
    if not text:
        return None
    from bokeh.models import Tooltip

    # Panel's own look for a description (panel.widgets.base): wraps, at most 300 px wide
    return Tooltip(content=str(text), position="right", stylesheets=[":host { white-space: initial; max-width: 300px; }"])
