"""The serving limits in a real page (headless Chromium on the served app): a shared Sweep link too large to
start by itself shows its estimate beside a Run button and waits; Compare columns in a link beyond the Steps
slider are named in the link's notice and not applied. One page checks both: the Sweep link carries the
Compare columns too (a link's values are checked when it is opened, whichever tab it opens; a page costs
the browser seconds of layout). Unit-level checks: tests/unit/dashboard/runtime/test_limits.py."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest

from explorer.dashboard.session import Session
from tests.support.browser import open_page, wait_until
from tests.support.dashboard import LENGTH
from tests.support.module_app import serve_tiny

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path):
    """The app as `serve --auto-start-seconds 0.1` builds it, over the tiny checkpoints: (url, states)."""
    from explorer.dashboard import create_app
    from explorer.dashboard.app import served_args

    # below any sweep of a hundred calls
    with serve_tiny(tmp_path, build=lambda: create_app(**served_args()), DEVICE="cpu", AUTO_START_SECONDS="0.1") \
            as served_app:
        yield served_app


def test_a_large_sweep_link_waits_for_run_and_compare_columns_beyond_the_slider_are_named(browser, served, tmp_path):
    url, states = served
    grid = "1,2,4,8,16,24"
    lo, hi = Session.param.steps.bounds
    query = {"checkpoint": "tiny", "tab": "Sweep", "sweep.samples": 64, "sweep.steps_grid": grid,
             "compare.columns": "steps=4096 | steps=8"}
    page, problems = open_page(browser, f"{url}?{urlencode(query)}")
    work = (1 + 2 + 4 + 8 + 16 + 24) * 2 * 64 + LENGTH * 64  # and the AR baseline's
    status = page.locator(".sweep-main-status").get_by_text("not started by itself")
    status.first.wait_for(timeout=60_000)  # on the page, beside the Run button
    shown = status.first.inner_text()
    assert f"not started by itself: ≈ {work:,} model calls" in shown and shown.endswith("press Run"), shown
    # the Compare columns: named in the link's notice, not applied
    notice = page.locator(".url-notice").get_by_text("compare.columns")
    notice.first.wait_for(timeout=60_000)
    shown = notice.first.inner_text()
    assert f"steps=4096: 4096 is outside the range {lo} to {hi}" in shown, shown
    wait_until(lambda: states and states[-1].loaded)  # load done: model knobs, then the link
    assert states[-1].tabs["Compare"].columns == "strategy=confidence | strategy=random"  # not applied
    sweep = states[-1].tabs["Sweep"]
    assert not sweep.main.running and sweep.main.result is None and sweep.main.worker.current is None
    page.screenshot(path=str(tmp_path / "sweep-link-waits.png"))  # pytest's tmp directory, to look at
    page.locator(".sweep-main-run button").first.click()  # the click starts it
    wait_until(lambda: sweep.main.running or sweep.main.result is not None)
    sweep.main.stop = True
    assert not problems, problems
    page.close()
