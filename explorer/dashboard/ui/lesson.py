"""Lesson mode: the bar a lesson link (`lesson=<slug>&figure=<n>`, lessons.py) shows above the tabs, and the
header's Lessons menu that leads to the five lessons.

The bar names the lesson, "figure n of N", the figure's section and what it shows, what to notice and,
marked "Differs", where the shipped model disagrees with the document. Previous / Next are plain links to
the neighbouring figure's link (every figure stays a shareable link, and the page it opens applies the
link as any other), and so are the Left / Right arrow keys, except while a text box, a list or a slider
has the focus. Two lines at most, so the figure below stays in the first screen on a projector.
Every text goes through ui.safe.literal, the lessons' own words included.
"""
from __future__ import annotations

import json

import panel as pn

from ..lessons import LESSONS, Figure, Lesson, figure_url, find_figure, lesson
from ..projector import SCROLL_JS, figure_selector
from .palette import ACCENT, FONT
from .safe import literal

BAR_CLASS, MENU_CLASS = "lesson-bar", "lessons-menu"
# A notch under the page's type on a projector (20 px there): the bar is read once, the figure below it all along
BAR_FONT = {False: FONT[False]["base"], True: "17px"}
# Drop-downs (the index, the header's menu, a folded Differs line) open while the pointer is over them or
# they hold the focus (a click or Tab): CSS alone, no <details> and no script of their own.
BAR_CSS = f"""
.bar {{ border-left: 4px solid {ACCENT}; background: #eef5fb; padding: 4px 10px; line-height: 1.35; }}
.line {{ display: flex; flex-wrap: wrap; align-items: baseline; gap: 2px 10px; }}
.shows {{ flex: 1 1 0; min-width: 12em; }}
.nav {{ display: flex; gap: 6px; align-items: baseline; }}
.nav a, .nav span {{ padding: 0 8px; border: 1px solid {ACCENT}; border-radius: 4px; text-decoration: none;
  color: {ACCENT}; white-space: nowrap; }}
.nav span {{ opacity: 0.35; }}
.nav a:hover {{ background: {ACCENT}; color: white; }}
.notice {{ margin-top: 2px; }}
.differs {{ color: #8a3b00; outline: none; }}
.differs .tag {{ color: white; background: #D55E00; padding: 0 6px; border-radius: 3px; margin-right: 6px;
  white-space: nowrap; cursor: default; }}
.differs.folded .tag {{ cursor: pointer; }}
.differs.folded .tag::after {{ content: " ▸"; }}
.differs.folded .text {{ display: none; }}
.differs.folded:hover .text, .differs.folded:focus-within .text {{ display: inline; }}
.differs.folded:hover .tag::after, .differs.folded:focus-within .tag::after {{ content: " ▾"; }}
.drop {{ position: relative; outline: none; }}
.drop > .label {{ cursor: pointer; color: {ACCENT}; white-space: nowrap; }}
.drop > ol {{ display: none; position: absolute; left: 0; top: 100%; z-index: 20; background: white;
  border: 1px solid #ccc; box-shadow: 0 2px 8px rgba(0,0,0,.2); margin: 0; padding: 6px 10px 6px 28px;
  width: max-content; max-width: 70vw; max-height: 60vh; overflow-y: auto; }}
.drop:hover > ol, .drop:focus-within > ol {{ display: block; }}
.others {{ list-style: none; margin-top: 6px; }}
.others ul {{ padding-left: 14px; }}
li.current {{ font-weight: bold; }}
.bar.one .line {{ flex-wrap: nowrap; }}
.bar.one .line > * {{ white-space: nowrap; }}
.bar.one .drop > ol {{ white-space: normal; }}
.bar.one .shows {{ min-width: 0; overflow: hidden; text-overflow: ellipsis; }}
.bar.one .notice {{ white-space: nowrap; overflow: hidden; text-overflow: ellipsis; outline: none; }}
.bar.one .notice:hover, .bar.one .notice:focus-within {{ white-space: normal; }}
@media (min-width: 1200px) {{
  .bar.one .notice {{ white-space: normal; display: -webkit-box; -webkit-box-orient: vertical;
    -webkit-line-clamp: 2; }}
  .bar.one .notice:hover, .bar.one .notice:focus-within {{ -webkit-line-clamp: unset; }}
}}
"""
MENU_CSS = """
.drop { position: relative; display: inline-block; outline: none; }
.label { cursor: pointer; color: white; font-weight: bold; padding: 2px 10px; border: 1px solid rgba(255,255,255,.7);
  border-radius: 4px; white-space: nowrap; }
ul { display: none; position: absolute; right: 0; top: 100%; z-index: 1000; background: white; border: 1px solid #ccc;
  margin: 0; padding: 6px 12px; list-style: none; width: max-content; box-shadow: 0 2px 8px rgba(0,0,0,.25); }
.drop:hover ul, .drop:focus-within ul { display: block; }
li { margin: 3px 0; } a { color: #0072B2; } .what { color: #555; font-size: 0.85em; }
"""

# The arrow keys follow Previous / Next unless the key belongs to something else: a text box, a list, a
# slider's handle, an editable element, or a key with a modifier. The handler is replaced, not added,
# when the bar is drawn again (a presentation toggle).
KEYS_JS = """<script>(function () {
  const prev = PREV, next = NEXT;
  if (window.mdlmLessonKeys) document.removeEventListener("keydown", window.mdlmLessonKeys);
  window.mdlmLessonKeys = function (e) {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const el = (e.composedPath && e.composedPath()[0]) || e.target;
    const tag = ((el && el.tagName) || "").toUpperCase();
    if (["INPUT", "SELECT", "TEXTAREA"].includes(tag) || (el && el.isContentEditable)) return;
    if (el && el.getAttribute && (el.getAttribute("role") === "slider" || el.closest && el.closest(".noUi-target"))) return;
    const to = e.key === "ArrowRight" ? next : e.key === "ArrowLeft" ? prev : null;
    if (to) { e.preventDefault(); window.location.href = to; }
  };
  document.addEventListener("keydown", window.mdlmLessonKeys);
})();</script>"""


def _href(fig: Figure | None, presentation: bool) -> str | None:
    """The figure's link relative to the page (its own path, any server prefix kept)."""
    return None if fig is None else figure_url(fig, base="", presentation=presentation)


def _nav(label: str, href: str | None, css: str) -> str:
    if href is None:
        return f'<span class="{css}" aria-disabled="true">{literal(label)}</span>'
    return f'<a class="{css}" href="{literal(href)}">{literal(label)}</a>'


def _index(item: Lesson, current: int, presentation: bool) -> str:
    """This lesson's figures and the other lessons, each a link: the lesson index, one click away."""
    figs = "".join(f'<li{" class=current" if fig.index == current else ""}><a href="{literal(_href(fig, presentation))}">'
                   f"{literal(fig.section)} {literal(fig.shows)}</a></li>" for fig in item.figures)
    others = "".join(f'<li><a href="{literal(_href(other.figures[0], presentation))}">{literal(other.title)}</a></li>'
                     for other in LESSONS if other is not item)
    return (f'<span class="drop lesson-index" tabindex="0"><span class="label">Index ▾</span><ol>{figs}'
            f'<li class="others"><b>Other lessons</b><ul>{others}</ul></li></ol></span>')


def bar_html(slug: str, index: int, presentation: bool = False) -> str:
    """The lesson bar of figure `index` (1-based; 0: the lesson before its first figure) of lesson `slug`
    (HTML; every text escaped). `presentation` keeps the projector's type in the links it makes."""
    item = lesson(slug)
    n = len(item.figures)
    fig = item.figures[index - 1] if index else None
    prev = _href(item.figures[index - 2], presentation) if index > 1 else None
    nxt = _href(item.figures[index], presentation) if index < n else None
    where = f"figure {index} of {n}" if fig else f"{n} figures"
    shows = f"{fig.section} {fig.shows}" if fig else item.summary
    # the index first: its list opens rightwards, inside the window wherever the line wraps
    line = (f'<div class="line">{_index(item, index, presentation)}<b class="title">{literal(item.title)}</b>'
            f'<span class="count">{literal(where)}</span><span class="shows" title="{literal(shows)}">{literal(shows)}</span>'
            f'<span class="nav">{_nav("◀ Previous", prev, "lesson-prev")}'
            f'{_nav("Next ▶" if fig else "Start ▶", nxt, "lesson-next")}</span></div>')
    notice = ""
    if fig is not None:
        # shown at a desk; on a projector folded behind its mark (pointer or click), so the bar keeps to two lines
        folded = " folded" if presentation else ""
        differs = (f' <span class="differs{folded}" tabindex="0"><span class="tag">Differs from the notebook</span>'
                   f'<span class="text">{literal(fig.differs)}</span></span>' if fig.differs else "")
        notice = (f'<div class="notice" tabindex="0" title="{literal(fig.notice)}"><b>Notice:</b> {literal(fig.notice)}'
                  f'{differs}</div>')
    keys = KEYS_JS.replace("PREV", _js(prev)).replace("NEXT", _js(nxt))
    if fig is not None:  # the figure brought into view where it lies below the first screen
        keys += SCROLL_JS.replace("SELECTOR", _js(fig.target or figure_selector(fig.query)), 1)
    # on a projector the figure's line is one line, and the notice one line on a 1024-pixel one, two on
    # a wider one (the class reads it: most notices fit in two); what does not fit is cut with an
    # ellipsis and shown whole in its tooltip, and the notice unfolds under the pointer or the focus
    one = " one" if presentation else ""
    return f'<div class="bar{one}" data-lesson="{literal(slug)}" data-figure="{int(index)}">{line}{notice}</div>{keys}'


def _js(value: str | None) -> str:
    """A JS literal of `value` that cannot close the <script> it sits in."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")


def lesson_bar(url, session) -> pn.Column:
    """The bar of the lesson the link opened (`url`: the page's UrlState), hidden when it opened none;
    drawn again at the session's type size when presentation mode is toggled. Under it, once the page no
    longer shows the figure's link (another checkpoint, tab or knob), a line says what changed and links
    back: the bar's notice is of the figure, not of what the page shows now."""
    pane = pn.pane.HTML("", css_classes=[BAR_CLASS], stylesheets=[BAR_CSS], sizing_mode="stretch_width",
                        margin=(0, 10, 4, 10))
    changed = pn.pane.HTML("", css_classes=["lesson-changed"], sizing_mode="stretch_width", margin=(0, 10, 4, 10),
                           visible=False)

    def draw(*events):
        if url.lesson:
            pane.object = bar_html(url.lesson, url.figure, session.presentation)
            pane.styles = {"font-size": BAR_FONT[session.presentation]}
        departed()

    def departed(*events):
        fig = find_figure(url.lesson, url.figure)
        keys = url.departed(fig.query) if fig is not None else []
        changed.visible = bool(keys)
        if keys:  # its own pane: drawing the bar again would run its scripts again (and scroll)
            back = literal(_href(fig, session.presentation))
            changed.object = (f'<div style="font-size: {BAR_FONT[session.presentation]}; color: #555">'
                              f"Changed since this figure's link: {literal(', '.join(keys))}; its notice is of the "
                              f'figure. <a href="{back}">↺ Back to the figure</a></div>')

    draw()
    session.param.watch(draw, "presentation")
    url.watch(departed)
    return pn.Column(pane, changed, visible=bool(url.lesson), sizing_mode="stretch_width", margin=0)


def menu_html(presentation: bool = False) -> str:
    """The header's Lessons menu: each lesson's title, what it teaches, linked to its first figure."""
    items = "".join(f'<li><a href="{literal(_href(item.figures[0], presentation))}">{literal(item.title)}</a>'
                    f'<div class="what">{literal(item.summary)}</div></li>' for item in LESSONS)
    return f'<div class="drop" tabindex="0"><span class="label">Lessons ▾</span><ul>{items}</ul></div>'


def lessons_menu(session) -> pn.pane.HTML:
    """The header's entry to the lessons (menu_html), kept at the session's presentation setting."""
    pane = pn.pane.HTML(menu_html(session.presentation), css_classes=[MENU_CLASS], stylesheets=[MENU_CSS],
                        margin=(0, 10), align="center")
    session.param.watch(lambda event: setattr(pane, "object", menu_html(event.new)), "presentation")
    return pane
