"""Projector mode (?presentation=true) at a projector's 1366x768 and then 1024x768 (the same page resized:
the layout follows the window): the sidebar starts collapsed, the linked figure lies whole in the first screen,
no view runs past the window's right edge (nothing cut off, no sideways scroll), no table key or Compare title
wraps, the Model tab's values have room for a line of text, and no select clips its value
(explorer/dashboard/projector.py: the same check `python run.py rehearse` makes). One link per tab, and per
lesson its most demanding figure (the most columns side by side, then the most rows one under another),
chosen from the lessons' source so that a new lesson is covered too. One served app over the shipped
checkpoints (the lessons' links name them) for the whole module; a screenshot of each page at each size goes
to pytest's tmp directory."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

import pytest

from explorer.cli.rehearse import PROBE_JS
from explorer.dashboard import lessons
from explorer.dashboard.projector import DRAWN_JS, check, figure_selector
from tests.support.browser import open_page, wait_until
from tests.support.serving import serve_in_process

# One link per tab (small sizes: the patterns checkpoint has 24 positions); Compare's is a lesson's (its
# strategies preset, the Sampling Strategies lesson's figure)
TAB_LINKS = {
    "Explore": {"length": "24", "steps": "8", "sweep_metric": "pattern_quality"},
    "Inspect": {"tab": "Inspect", "inspect.t": "0.5"},
    "Sweep": {"tab": "Sweep", "sweep.steps_grid": "1,2,4", "sweep.samples": "2", "sweep.metric": "pattern_quality"},
    "Model": {"tab": "Model"},
}
SIZES = ((1366, 768), (1024, 768))  # the wider first: the page is resized, not reloaded


def demand(fig: lessons.Figure) -> tuple[int, int, int]:
    """How hard a figure's view is to fit on a projector: its columns side by side (Compare), then its rows
    one under another (Inspect's t x texts, Explore's prompts or samples), then the length of its link."""
    q = dict(parse_qsl(fig.query))
    columns = len(q.get("compare.columns", "a|b").split("|")) if fig.tab == "Compare" else 1
    rows = {"Inspect": len(q.get("inspect.ts", "0").split(",")) * len(q.get("inspect.texts", "").split("|")),
            "Explore": max(len(q.get("prompts", "").split("|")), int(q.get("samples", "1")))}.get(fig.tab, 1)
    return columns, rows, len(fig.query)


LESSON_LINKS = {item.slug: max(item.figures, key=demand) for item in lessons.LESSONS}

# Not yet whole in a 1024x768 first screen: Inspect's several rows (six t of one text, three quotes), under a
# header and a lesson bar that wrap at that width, are taller than what is left; their text wraps too. Still
# checked for everything else at that size, and a fix fails the test until it is taken off this list.
OFF_SCREEN_AT_1024 = {"forward-process", "training-elbo", "build-a-diffusion-lm"}


@pytest.fixture(scope="module")
def projector_app():
    """The app over the shipped checkpoints/ (patterns by default; a lesson's link names its own), with
    Explore's quality sweep after each run off; yields (url, the sessions' states)."""
    from explorer.dashboard import create_app
    from explorer.dashboard.app import served_args

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MDLM_EXPLORER_CHECKPOINTS", raising=False)
        patch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
        with serve_in_process(lambda: create_app(**served_args(checkpoint="patterns", device="cpu"))) as served_app:
            yield served_app


def link_url(url: str, name: str) -> tuple[str, str, str]:
    """(the page's address, its query, its tab) for a tab's link or a lesson's chosen figure."""
    if name in TAB_LINKS:
        query = urlencode(TAB_LINKS[name])
        return f"{url}?presentation=true&{query}", query, name
    fig = LESSON_LINKS[name]
    return lessons.figure_url(fig, base=url, presentation=True), fig.query, fig.tab


@pytest.mark.parametrize("name", [*TAB_LINKS, *LESSON_LINKS])
def test_projector_puts_the_figure_first_whole_and_nothing_overflows(projector_app, browser, name, tmp_path):
    url, states = projector_app
    address, query, tab = link_url(url, name)
    page, problems = open_page(browser, address)
    page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
    page.wait_for_function(f"() => {{ const s = ({PROBE_JS})().settled; return !!s && s.split(' ').includes({tab!r}); }}",
                           timeout=120_000, polling=250)
    page.wait_for_function(DRAWN_JS, arg=figure_selector(query), timeout=60_000, polling=250)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(500)  # the layout follows the new size; late redraws (a run's last rows) settle
        page.screenshot(path=str(tmp_path / f"{name}-{width}x{height}.png"))
        seen = check(page, query, width, height)
        sidebar = page.evaluate("() => { const s = document.querySelector('#sidebar'); "
                                "return [s.className, s.getBoundingClientRect().width]; }")
        where = f"{name} ({figure_selector(query)}) at {width}x{height}"
        assert "show" not in sidebar[0].split() and sidebar[1] < 5, f"{where}: sidebar {sidebar}"  # collapsed
        if width == 1024 and name in OFF_SCREEN_AT_1024:
            assert not seen["first_screen"], f"{where} now fits: take it off OFF_SCREEN_AT_1024"
            assert not seen["overflow"], f"{where}: {seen['problems']}"
        else:
            assert seen["problems"] == [], where
    assert problems == [], name
    page.close()


def test_sidebar_opens_with_one_click(projector_app, browser):
    """Collapsed is not gone: the header's toggle brings the knobs back."""
    url, states = projector_app
    page, problems = open_page(browser, f"{url}?presentation=true")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.wait_for_function("() => typeof Bokeh !== 'undefined' && Bokeh.documents.length > 0", timeout=60_000)
    assert "show" not in page.locator("#sidebar").get_attribute("class").split()
    page.locator("#sidebar-toggle").click()
    page.wait_for_function("() => document.querySelector('#sidebar').getBoundingClientRect().width > 200")
    # Bootstrap marks it 'collapsing' while it slides open, then 'show': wait for the end of the slide
    wait_until(lambda: "show" in page.locator("#sidebar").get_attribute("class").split(), 10)


def test_sidebar_stays_open_without_presentation(projector_app, browser):
    """At a desk the knobs are the point: the sidebar is open as before."""
    url, states = projector_app
    page, problems = open_page(browser, url)
    page.wait_for_function("() => typeof Bokeh !== 'undefined' && Bokeh.documents.length > 0", timeout=60_000)
    assert "show" in page.locator("#sidebar").get_attribute("class").split()
