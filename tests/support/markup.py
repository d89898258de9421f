"""Reading what a pane sends the page as a browser would (tags and text), and the texts from outside
(links, templates, checkpoint metadata, names) that must come out of it as text: the markup tests'."""
from __future__ import annotations

import html
from html.parser import HTMLParser

# What a class could put in a link, a template, a checkpoint's metadata or a new checkpoint's name
PAYLOADS = ("<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "<svg onload=alert(3)>",
            "<details open ontoggle=alert(4)>", "[x](javascript:alert(5))", "[y](http://example.com)",
            "&lt;b&gt; &amp; &#60;i&#62;", "**bold** _it_ `code` # head", "$$x^2$$", 'a "quoted" \'one\'')


class _Page(HTMLParser):
    """The tags (with their attributes) and the text a browser would make of some HTML."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.parts = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.parts.append(data)


def parsed(markup: str) -> tuple[list, str]:
    """(tags, text) a browser makes of `markup`."""
    page = _Page()
    page.feed(markup)
    page.close()
    return page.tags, "".join(page.parts)


def page_html(model) -> str:
    """The HTML a pane's Bokeh model puts in the page (Panel sends it escaped once more; the page decodes it)."""
    return html.unescape(model.text)


def shown(pane) -> tuple[list, str]:
    """(tags, text) of what `pane` shows, read from a new model of it."""
    return parsed(page_html(pane.get_root()))


def plain(pane) -> str:
    """The text of a pane that may hold only the dashboard's own wrapper tags (a <p>), never one of
    outside text; fails otherwise."""
    tags, text = shown(pane)
    assert [t for t, _ in tags] in ([], ["p"]), tags
    return text
