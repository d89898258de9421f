"""The lesson bar and the header's Lessons menu (ui/lesson.py), read as a browser would: what the bar says of a
figure, where Previous / Next lead (the neighbouring figure's link, none past either end), the Differs mark,
presentation kept in the links, and every text shown as typed, never as markup."""
from __future__ import annotations

import json
import re

from explorer.dashboard import lessons
from explorer.dashboard.lessons import Figure, Lesson, figure_url, lesson
from explorer.dashboard.ui import lesson as view
from tests.support.markup import PAYLOADS, parsed


def links(markup: str) -> dict[str, str]:
    tags, _ = parsed(markup)
    return {a["class"]: a["href"] for t, a in tags if t == "a" and "class" in a}


def differs_classes(markup: str) -> list[str]:
    return [a["class"] for t, a in parsed(markup)[0] if t == "span" and a.get("class", "").startswith("differs")]


def keys(markup: str) -> tuple:
    """The (previous, next) links the arrow keys follow."""
    match = re.search(r"const prev = (.*?), next = (.*?);", markup)
    return json.loads(match.group(1)), json.loads(match.group(2))


def test_the_bar_says_what_the_figure_shows_and_what_to_notice():
    item = lesson("generation")
    fig = item.figures[2]  # the temperature comparison: the model differs
    markup = view.bar_html("generation", 3)
    _, text = parsed(markup.split("<script>")[0])
    for part in (item.title, f"figure 3 of {len(item.figures)}", f"{fig.section} {fig.shows}", fig.notice,
                 "Differs", fig.differs):
        assert part in text, part
    assert links(markup) == {"lesson-prev": figure_url(item.figures[1], base=""),
                             "lesson-next": figure_url(item.figures[3], base="")}
    assert keys(markup) == (figure_url(item.figures[1], base=""), figure_url(item.figures[3], base=""))


def test_no_previous_before_the_first_figure_and_no_next_after_the_last():
    item = lesson("forward-process")
    first, last = view.bar_html(item.slug, 1), view.bar_html(item.slug, len(item.figures))
    assert "lesson-prev" not in links(first) and keys(first)[0] is None
    assert "lesson-next" not in links(last) and keys(last)[1] is None
    assert "Differs" not in parsed(first.split("<script>")[0])[1]  # this figure agrees with the notebook
    # the lesson without a figure: its summary, and Start leads to figure 1
    start = view.bar_html(item.slug, 0)
    assert links(start)["lesson-next"] == figure_url(item.figures[0], base="") and item.summary in parsed(start)[1]


def test_presentation_stays_on_in_the_links_and_folds_the_differs_line():
    markup = view.bar_html("training-elbo", 3, presentation=True)  # the model differs here
    assert all(href.endswith("&presentation=true") for href in links(markup).values())
    assert all(k.endswith("&presentation=true") for k in keys(markup))
    assert differs_classes(markup) == ["differs folded"]  # one click or the pointer opens it on a projector
    assert differs_classes(view.bar_html("training-elbo", 3)) == ["differs"]  # shown at a desk


def test_on_a_projector_the_bar_keeps_one_line_each_and_its_tooltips_hold_the_whole_text():
    fig = lesson("training-elbo").figures[2]
    tags, _ = parsed(view.bar_html("training-elbo", 3, presentation=True))
    bar = [a for t, a in tags if t == "div" and "data-lesson" in a][0]
    titles = {a["class"]: a.get("title") for t, a in tags if a.get("class") in ("shows", "notice")}
    assert bar["class"] == "bar one" and titles == {"shows": f"{fig.section} {fig.shows}", "notice": fig.notice}
    assert ".bar.one .notice {" in view.BAR_CSS and "text-overflow: ellipsis" in view.BAR_CSS
    desk, _ = parsed(view.bar_html("training-elbo", 3))
    assert [a["class"] for t, a in desk if t == "div" and "data-lesson" in a] == ["bar"]  # wraps at a desk


def test_every_text_is_shown_as_typed(monkeypatch):
    """Outside text never reaches the lessons, but the bar escapes them all the same (ui/safe.py)."""
    hostile = " ".join(PAYLOADS)
    figs = tuple(Figure("x", i, hostile, hostile, hostile, "tab=Model", hostile, hostile) for i in (1, 2))
    item = Lesson("x", hostile, hostile, hostile, figs, hostile)
    monkeypatch.setattr(lessons, "LESSONS", (item,))
    monkeypatch.setattr(view, "LESSONS", (item,))
    for markup in (view.bar_html("x", 1), view.menu_html()):
        body = markup.split("<script>")[0]
        tags, text = parsed(body)
        assert {t for t, _ in tags} <= {"div", "b", "span", "a", "ol", "ul", "li"}, tags  # no <details>: no toggle
        assert hostile in text
        assert all(not k.startswith("on") for _, attrs in tags for k in attrs)


def test_the_script_cannot_be_closed_by_a_link():
    assert view._js("</script><script>alert(1)") == '"\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"'


def test_the_menu_lists_the_five_lessons_linked_to_their_first_figures():
    tags, text = parsed(view.menu_html())
    hrefs = [a["href"] for t, a in tags if t == "a"]
    assert hrefs == [figure_url(item.figures[0], base="") for item in lessons.LESSONS]
    assert all(item.title in text for item in lessons.LESSONS) and "Lessons" in text


def test_the_bar_brings_the_view_its_figure_names_into_view():
    """A figure below its tab's main one (§4.4's training ratios) is the one the page scrolls to; others
    are the tab's main figure (projector.figure_selector), which the page scrolls to only when it lies
    below the first screen."""
    assert 'const sel = ".inspect-ratios"' in view.bar_html("forward-process", 4)
    assert 'const sel = ".model-page"' in view.bar_html("forward-process", 5)
    assert "const sel" not in view.bar_html("forward-process", 0)  # the lesson before its first figure
