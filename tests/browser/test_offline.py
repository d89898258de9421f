"""The served dashboard works with no network: a headless Chromium whose every request to anything but
the local server is blocked and recorded. Switching tabs, changing the checkpoint while another tab is
shown and running must never reach out (Panel once linked its loading.css from its CDN then), and
hidden tabs must leave the page.

Needs Debian's Chromium and `pip install playwright`, as every test in tests/browser/ (tests/support/browser.py).
"""
from __future__ import annotations

import pytest

from tests.support.browser import BOKEH_VIEWS_JS, wait_until
from tests.support.dashboard import explore


def offline_page(browser, url, query: str = ""):
    """A page that may only talk to `url`'s server; (page, requests that tried to leave, console errors)."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    outside, problems = [], []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    def route(r):
        u = r.request.url
        if u.startswith(url.rstrip("/")) or u.startswith(("data:", "blob:")):
            r.continue_()
        else:  # what an offline machine would see
            outside.append(u)
            r.abort("namenotresolved")

    page.route("**/*", route)
    page.goto(url + query)
    return page, outside, problems


def switch_checkpoint(page, state, name):
    page.locator(".knob-checkpoint select").select_option(name)
    wait_until(lambda: state.model_info.get("name") == name and not explore(state).running and explore(state).trajectory is not None)


@pytest.mark.auto_sweep  # the quality plot's assets count too
def test_no_request_leaves_localhost(browser, served):
    url, states = served
    # a small Sweep-tab grid: the tab sweeps whenever the checkpoint changes while it is shown
    page, outside, problems = offline_page(browser, url, "?sweep.samples=2&sweep.steps_grid=1,2,4")
    wait_until(lambda: states and explore(states[-1]).trajectory is not None and not explore(states[-1]).running)
    state = states[-1]
    wait_until(lambda: explore(state).quality.result is not None and not explore(state).quality.running)
    page.wait_for_timeout(500)
    first = page.evaluate(BOKEH_VIEWS_JS)
    for tab in ("Model", "Sweep", "Inspect", "Compare"):  # a checkpoint change while each is shown
        page.locator(".bk-tab", has_text=tab).click()
        switch_checkpoint(page, state, "tiny-ar" if state.model_info.get("name") == "tiny" else "tiny")
        page.wait_for_timeout(300)  # let the page apply what the server sent
    page.locator(".bk-tab", has_text="Explore").click()
    # Hidden tabs leave the document (app.empty_tab): with all five in it (4x the views), Bokeh's
    # layout of the whole page after each change kept this browser busy for seconds per switch.
    wait_until(lambda: page.evaluate(BOKEH_VIEWS_JS) < 1.2 * first)
    switch_checkpoint(page, state, "tiny-training")
    page.locator(".knob-run button").click()
    wait_until(lambda: not explore(state).running)
    page.wait_for_timeout(500)
    assert outside == [], f"requests that left the machine: {sorted(set(outside))}"
    assert problems == []
