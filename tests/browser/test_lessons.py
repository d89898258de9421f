"""Lesson mode in a real headless Chromium: a lesson figure's link shows the lesson bar above the tabs, the
Right arrow key opens the next figure's link (not while a text box has the focus), the header's Lessons
menu leads to the five lessons, and a hostile `lesson=` value is named in a plain-text notice and opens no
bar. On a projector (1366x768, presentation=true) the bar stays compact and the figure below it starts in
the first screen; the screenshot goes to pytest's tmp directory.

One served app for the module, and few pages: each costs Chromium seconds of layout. The arrow keys are
followed between two figures on the Model tab (a lighter page than Inspect's), the menu is opened on the
hostile link's page, and where a check is only which link the browser goes to (the Left arrow, the menu's
lesson), that request is answered by the test instead of the dashboard."""
from __future__ import annotations

import re
import shutil
from urllib.parse import quote, urlsplit

import pytest

from explorer.dashboard.lessons import figure_url, lesson
from tests.support.browser import open_page, wait_until
from tests.support.module_app import serve_tiny, sessions_of_this_test

LESSON = lesson("forward-process")  # figures 5 and 6 open Model, 8 Inspect's top-3 predictions
FIRST = 5  # the arrow keys' figure, and its next: both open the Model tab, a lighter page than Inspect's
BAR = ".lesson-bar .bar"  # the bar inside the pane (Playwright's CSS reaches into shadow roots)
# The element that has the focus, through shadow roots (Panel draws each widget in one)
FOCUSED_JS = """() => { let e = document.activeElement;
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement;
  return e ? e.tagName : null; }"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One served app over the tiny checkpoints, for the module; the lessons' links name `patterns`: the
    tests' tiny pattern model answers to that name too. Yields (url, the sessions' states)."""
    directory = tmp_path_factory.mktemp("ckpt")
    with serve_tiny(directory) as (url, states):
        shutil.copy(directory / "tiny.safetensors", directory / "patterns.safetensors")
        yield url, states


@pytest.fixture
def served(app):
    """The module's app; the sessions a test opens end with it."""
    url, states = app
    with sessions_of_this_test(states):
        yield url, states


def link(url: str, index: int, presentation: bool = False) -> str:
    """Figure `index` of the lesson on the test's server (figure_url with the server's address)."""
    return figure_url(LESSON.figures[index - 1], base=url, presentation=presentation)


def bar_text(page) -> str:
    page.locator(BAR).wait_for(state="visible", timeout=90_000)
    return page.locator(BAR).inner_text()


def test_a_figure_link_shows_the_bar_and_the_right_arrow_opens_the_next(browser, served):
    url, states = served
    page, problems = open_page(browser, link(url, FIRST))
    text = bar_text(page)
    first, second = LESSON.figures[FIRST - 1:FIRST + 1]
    for part in (LESSON.title, f"figure {FIRST} of {len(LESSON.figures)}", first.shows, first.notice, "Next"):
        assert part in text, part
    wait_until(lambda: states and states[-1].loaded)
    typing = page.locator(".knob-seed input").first  # a key typed into a box is the box's
    typing.focus()
    assert page.evaluate(FOCUSED_JS) == "INPUT"
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(500)
    assert f"figure={FIRST}" in page.url
    typing.blur()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(f"**figure={FIRST + 1}**", timeout=60_000)
    assert urlsplit(page.url).query == urlsplit(link(url, FIRST + 1)).query  # the next figure's own link
    text = bar_text(page)
    assert f"figure {FIRST + 1} of {len(LESSON.figures)}" in text and second.notice in text and "Previous" in text
    # The Left arrow goes back to the previous figure's link (answered by the test: that page was checked above)
    back = re.compile(rf"[?&]figure={FIRST}(&|$)")
    page.route(back, lambda route: route.fulfill(status=200, content_type="text/html", body="<p>back</p>"))
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(back, timeout=60_000)
    assert urlsplit(page.url).query == urlsplit(link(url, FIRST)).query
    assert problems == []


def test_on_a_projector_the_bar_leaves_the_figure_in_the_first_screen(browser, served, tmp_path):
    url, states = served
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


def test_a_figure_below_the_first_screen_is_brought_into_view(browser, served):
    """§4.4's training-ratios histogram lies under the masking statistics, two screens down at 1366x768:
    the lesson's reader saw another view. The page scrolls it whole into view once it is drawn."""
    url, _ = served
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(link(url, 4))
    ratios = page.locator(".inspect-ratios").first
    ratios.wait_for(state="attached", timeout=90_000)

    def in_view():
        box = ratios.bounding_box()
        return box is not None and box["height"] > 100 and 0 <= box["y"] and box["y"] + box["height"] <= 768
    wait_until(in_view, 60)
    assert problems == []
    page.close()


def test_a_hostile_lesson_is_named_as_text_and_the_header_menu_leads_to_the_lessons(browser, served):
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

    # The header's menu, on this page (it is every page's), to the first lesson: its first figure's link,
    # answered by the test (a figure link's page and bar: the tests above)
    first = re.compile(r"[?&]lesson=forward-process&figure=1(&|$)")
    page.route(first, lambda route: route.fulfill(status=200, content_type="text/html", body="<p>figure 1</p>"))
    menu = page.locator(".lessons-menu")
    menu.get_by_text("Lessons").click()
    menu.get_by_text(LESSON.title, exact=True).click()
    page.wait_for_url(first, timeout=60_000)
    assert urlsplit(page.url).query == urlsplit(link(url, 1)).query
    assert dialogs == [] and problems == []
