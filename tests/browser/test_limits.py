"""The serving limits in a real page (headless Chromium on the served app): a shared Sweep link too large to
start by itself shows its estimate beside a Run button and waits; a Compare link beyond the Steps slider is
named in the link's notice and not applied. Unit-level checks: tests/unit/dashboard/runtime/test_limits.py."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest

from explorer.dashboard.session import Session
from tests.support.browser import open_page, wait_until
from tests.support.dashboard import LENGTH, save_tiny_checkpoints
from tests.support.serving import serve_in_process

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The app as `serve --auto-start-seconds 0.1` builds it, over the tiny checkpoints: (url, states)."""
    from explorer.dashboard import create_app
    from explorer.dashboard.app import served_args

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path)))
    monkeypatch.setenv("MDLM_EXPLORER_DEVICE", "cpu")
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_START_SECONDS", "0.1")  # below any sweep of a hundred calls
    with serve_in_process(lambda: create_app(**served_args())) as served_app:
        yield served_app


def text_of(page, selector: str) -> str:
    return page.locator(selector).first.inner_text()


def test_a_large_sweep_link_shows_its_estimate_and_waits_for_run(browser, served, tmp_path):
    url, states = served
    grid = "1,2,4,8,16,24"
    query = {"checkpoint": "tiny", "tab": "Sweep", "sweep.samples": 64, "sweep.steps_grid": grid}
    page, problems = open_page(browser, f"{url}?{urlencode(query)}")
    work = (1 + 2 + 4 + 8 + 16 + 24) * 2 * 64 + LENGTH * 64  # and the AR baseline's
    status = page.locator(".sweep-main-status").get_by_text("not started by itself")
    status.first.wait_for(timeout=60_000)  # on the page, beside the Run button
    shown = status.first.inner_text()
    assert f"not started by itself: ≈ {work:,} model calls" in shown and shown.endswith("press Run"), shown
    wait_until(lambda: states and states[-1].loaded)  # load done: model knobs, then the link
    sweep = states[-1].tabs["Sweep"]
    assert not sweep.main.running and sweep.main.result is None and sweep.main.worker.current is None
    page.screenshot(path=str(tmp_path / "sweep-link-waits.png"))  # pytest's tmp directory, to look at
    page.locator(".sweep-main-run button").first.click()  # the click starts it
    wait_until(lambda: sweep.main.running or sweep.main.result is not None)
    sweep.main.stop = True
    assert not problems, problems
    page.close()


def test_a_compare_link_beyond_the_steps_slider_is_named_in_the_links_notice(browser, served, tmp_path):
    url, states = served
    lo, hi = Session.param.steps.bounds
    query = {"checkpoint": "tiny", "tab": "Compare", "compare.columns": "steps=4096 | steps=8"}
    page, problems = open_page(browser, f"{url}?{urlencode(query)}")
    notice = page.locator(".url-notice").get_by_text("compare.columns")
    notice.first.wait_for(timeout=60_000)
    shown = notice.first.inner_text()
    assert f"steps=4096: 4096 is outside the range {lo} to {hi}" in shown, shown
    page.screenshot(path=str(tmp_path / "compare-link-refused.png"))
    wait_until(lambda: states and states[-1].loaded)  # load done: model knobs, then the link
    assert states[-1].tabs["Compare"].columns == "strategy=confidence | strategy=random"  # not applied
    assert not problems, problems
    page.close()
