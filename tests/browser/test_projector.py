"""Projector mode (?presentation=true) at a projector's 1366x768 and then 1024x768 (the same page resized:
the layout follows the window): the sidebar starts collapsed (one click of the header's toggle opens it),
the linked figure lies whole in the first screen, no view runs past the window's right edge (nothing cut
off, no sideways scroll), no table key or Compare title wraps, the Model tab's values have room for a line
of text, no select clips its value, no plot or control is clipped by its container, and download buttons
and data tables keep the projector's type (explorer/dashboard/projector.py: the same check `python run.py
rehearse` makes). Per lesson its most demanding figure (the most columns side by side, then the most rows
one under another), chosen from the lessons' source so that a new lesson is covered too, and a link of each
tab that no such figure opens. One served app over the shipped checkpoints (the lessons' links name them)
for the whole module, one page per link, all opened at once; a screenshot of each page at each size goes
to pytest's tmp directory."""
from __future__ import annotations

import warnings
from urllib.parse import urlencode

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from explorer.cli.rehearse import PROBE_JS
from explorer.dashboard import lessons
from explorer.dashboard.projector import DRAWN_JS, check, demand, figure_selector
from tests.support.browser import POLL_MS
from tests.support.serving import serve_in_process

# One link per tab (small sizes: the patterns checkpoint has 24 positions), for the tabs that no lesson's
# chosen figure opens (LINKS)
TAB_LINKS = {
    "Explore": {"length": "24", "steps": "8", "sweep_metric": "pattern_quality"},
    "Inspect": {"tab": "Inspect", "inspect.t": "0.5"},
    "Compare": {"tab": "Compare", "steps": "8", "compare.preset": "strategies"},
    "Sweep": {"tab": "Sweep", "sweep.steps_grid": "1,2,4", "sweep.samples": "2", "sweep.metric": "pattern_quality"},
    "Model": {"tab": "Model"},
}
SIZES = ((1366, 768), (1024, 768))  # the wider first: the page is resized, not reloaded


LESSON_LINKS = {item.slug: max(item.figures, key=demand) for item in lessons.LESSONS}
# every lesson's figure, and a tab's own link where no lesson's figure opens that tab: each tab once at least
LINKS = [*LESSON_LINKS, *(tab for tab in TAB_LINKS if tab not in {f.tab for f in LESSON_LINKS.values()})]

# Links not yet whole in a 1024x768 first screen (none now): still checked for everything else at that size,
# and a fix fails the test until it is taken off this list.
OFF_SCREEN_AT_1024: set[str] = set()


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


def open_at_once(browser, address: str):
    """A page (its own browser context) at projector size, its console and page errors collected, that has
    only asked for `address`: the next page is asked for while the server still builds this one. Returns
    (page, the errors: a list that grows)."""
    page = browser.new_page(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(address, wait_until="commit")
    return page, problems


def settled(page, tab: str) -> None:
    """Until the page's header names `tab` settled (its result shown: ui/header.py's data-settled)."""
    page.wait_for_function(f"(tab) => {{ const s = ({PROBE_JS})().settled; return !!s && s.split(' ').includes(tab); }}",
                           arg=tab, timeout=300_000, polling=250)


def keep_screenshot(page, path) -> None:
    """A screenshot of the page's first screen for a person to look at. It is evidence, not the check
    (check() reads the layout itself): on a loaded machine Chromium can take long to give a background
    page its next frame, and that wait warns rather than fails."""
    page.bring_to_front()  # the page being checked gets the compositor's frames first
    try:
        page.screenshot(path=str(path), timeout=60_000)
    except PlaywrightTimeout:
        warnings.warn(f"no screenshot of {path.name}: Chromium gave no frame within 60 s")


def layout_failures(page, name: str, query: str, tmp_path) -> list[str]:
    """The projector check of one link's page at each of SIZES (the page resized, not reloaded), a
    screenshot of each; what failed, one line each."""
    out = []
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(500)  # the layout follows the new size; late redraws (a run's last rows) settle
        keep_screenshot(page, tmp_path / f"{name}-{width}x{height}.png")
        seen = check(page, query, width, height)
        sidebar = page.evaluate("() => { const s = document.querySelector('#sidebar'); "
                                "return [s.className, s.getBoundingClientRect().width]; }")
        where = f"{name} ({figure_selector(query)}) at {width}x{height}"
        if "show" in sidebar[0].split() or sidebar[1] >= 5:  # presentation starts it collapsed
            out.append(f"{where}: the sidebar is open {sidebar}")
        if width == 1024 and name in OFF_SCREEN_AT_1024:
            if seen["first_screen"]:
                out.append(f"{where} now fits: take it off OFF_SCREEN_AT_1024")
            out += [f"{where}: {p}" for p in seen["problems"] if seen["overflow"]]
        else:
            out += [f"{where}: {p}" for p in seen["problems"]]
    return out


def test_projector_puts_the_figure_first_whole_and_nothing_overflows(projector_app, browser, tmp_path):
    """Every link's page is opened at once (the server works on one while the browser draws another),
    then each is checked in turn; every failure is listed."""
    url, states = projector_app
    pages = {}
    for name in LINKS:
        address, query, tab = link_url(url, name)
        page, problems = open_at_once(browser, address)
        pages[name] = (page, problems, query, tab)
    failures = []
    for i, (name, (page, problems, query, tab)) in enumerate(pages.items()):
        settled(page, tab)
        page.wait_for_function(DRAWN_JS, arg=figure_selector(query), timeout=60_000, polling=250)
        failures += layout_failures(page, name, query, tmp_path)
        if i == len(pages) - 1:  # checked, so its layout may change now
            failures += sidebar_opens_with_one_click(page)
        failures += [f"{name}: {problem}" for problem in problems]  # console and page errors
        page.close()
    assert failures == []


def sidebar_opens_with_one_click(page) -> list[str]:
    """Collapsed is not gone: the header's toggle brings the knobs back (what failed, one line)."""
    page.locator("#sidebar-toggle").click()
    try:
        page.wait_for_function("() => document.querySelector('#sidebar').getBoundingClientRect().width > 200",
                               polling=POLL_MS, timeout=10_000)
        # Bootstrap marks it 'collapsing' while it slides open, then 'show': wait for the end of the slide
        page.wait_for_function("() => document.querySelector('#sidebar').classList.contains('show')",
                               polling=POLL_MS, timeout=10_000)
    except PlaywrightTimeout:
        return [f"one click on the sidebar's toggle left it {page.locator('#sidebar').get_attribute('class')!r}"]
    return []

