"""Lesson mode in a real headless Chromium: a lesson figure's link shows the lesson bar above the tabs, the
Right arrow key opens the next figure's link (not while a text box has the focus), the header's Lessons
menu leads to the five lessons, and a hostile `lesson=` value is named in a plain-text notice and opens no
bar. On a projector (1366x768, presentation=true) the bar stays compact and the figure below it starts in
the first screen; the screenshot goes to pytest's tmp directory."""
from __future__ import annotations

import shutil
from urllib.parse import quote, urlsplit

from explorer.dashboard.lessons import figure_url, lesson
from tests.support.browser import open_page, wait_until

LESSON = lesson("forward-process")  # figure 1 opens Model, 2 Inspect at six t, 3 Inspect's masked-fraction figure
BAR = ".lesson-bar .bar"  # the bar inside the pane (Playwright's CSS reaches into shadow roots)


def link(url: str, index: int, presentation: bool = False) -> str:
    """Figure `index` of the lesson on the test's server (figure_url with the server's address)."""
    return figure_url(LESSON.figures[index - 1], base=url, presentation=presentation)


def served_patterns(served, tmp_path):
    """The lessons' links name `patterns`: the tests' tiny pattern model answers to that name too."""
    shutil.copy(tmp_path / "tiny.safetensors", tmp_path / "patterns.safetensors")
    return served


def bar_text(page) -> str:
    page.locator(BAR).wait_for(state="visible", timeout=90_000)
    return page.locator(BAR).inner_text()


def test_a_figure_link_shows_the_bar_and_the_right_arrow_opens_the_next(browser, served, tmp_path):
    url, states = served_patterns(served, tmp_path)
    page, problems = open_page(browser, link(url, 1))
    text = bar_text(page)
    first, second = LESSON.figures[:2]
    for part in (LESSON.title, f"figure 1 of {len(LESSON.figures)}", first.shows, first.notice, "Next"):
        assert part in text, part
    wait_until(lambda: states and states[-1].loaded)
    page.locator(".knob-seed input").first.focus()  # a key typed into a box is the box's
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(500)
    assert "figure=1" in page.url
    page.locator(".knob-seed input").first.blur()
    page.keyboard.press("ArrowRight")
    page.wait_for_url("**figure=2**", timeout=60_000)
    assert urlsplit(page.url).query == urlsplit(link(url, 2)).query  # figure 2's own link
    text = bar_text(page)
    assert f"figure 2 of {len(LESSON.figures)}" in text and second.notice in text and "Previous" in text
    page.keyboard.press("ArrowLeft")
    page.wait_for_url("**figure=1**", timeout=60_000)
    assert problems == []


def test_the_header_menu_leads_to_the_lessons(browser, served, tmp_path):
    url, states = served_patterns(served, tmp_path)
    page, problems = open_page(browser, url)
    menu = page.locator(".lessons-menu")
    menu.get_by_text("Lessons").click()
    menu.get_by_text("Sampling Strategies & Speed Tradeoffs").click()
    page.wait_for_url("**lesson=sampling-strategies&figure=1**", timeout=60_000)
    assert "Sampling Strategies" in bar_text(page)
    assert problems == []


def test_a_hostile_lesson_is_named_as_text(browser, served):
    url, states = served
    dialogs = []
    hostile = "<img src=x onerror=alert(1)>"
    page, problems = open_page(browser, url + "?lesson=" + quote(hostile) + "&figure=2")
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    notice = page.locator(".url-notice").get_by_text("Not applied from the link")
    notice.wait_for(state="visible", timeout=60_000)
    assert f"lesson={hostile} (not a lesson: forward-process" in notice.inner_text()
    assert page.locator(".url-notice img").count() == 0
    wait_until(lambda: states and states[-1].loaded)
    assert not page.locator(BAR).is_visible() and dialogs == [] and problems == []


def test_on_a_projector_the_bar_leaves_the_figure_in_the_first_screen(browser, served, tmp_path):
    url, states = served_patterns(served, tmp_path)
    # §5 TODO 2 (Inspect): one of the longest notices, 162 characters
    page, problems = open_page(browser, link(url, 8, presentation=True))
    page.set_viewport_size({"width": 1366, "height": 768})
    bar_text(page)
    grid = page.locator(".inspect-predictions").first  # the figure: the text's top-3 candidates, its loss
    caption = page.locator(".inspect-predictions p.cap").first  # inside the pane's shadow root
    wait_until(lambda: caption.count() and "loss of this example" in caption.inner_text(), 90)
    wait_until(lambda: states and states[-1].loaded and states[-1].presentation)
    page.wait_for_timeout(1500)  # late redraws settle the layout
    page.screenshot(path=str(tmp_path / "lesson-1366x768.png"))
    box, figure = page.locator(BAR).bounding_box(), grid.bounding_box()
    figure["top"] = figure["y"]
    assert box["height"] < 110, box  # three lines of projector type, not a page of notes
    # the class reads the notice whole on a 1366-pixel projector (it is cut to one line only at 1024)
    assert page.locator(BAR + " .notice").evaluate(
        "e => e.scrollWidth <= e.clientWidth + 2 && e.scrollHeight <= e.clientHeight + 2")
    # the figure (above the masking statistics the tab shows first otherwise) lies whole in the first screen
    assert 0 <= figure["top"] and figure["top"] + figure["height"] <= 768, figure
    assert problems == []
