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
