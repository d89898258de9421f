"""The Sweep tab in a real headless Chromium: open the tab, run a small sweep, find both plots, make the
quality grid, see a bad steps grid turn into a notice; screenshot. `browser` (the session's Chromium)
comes from conftest.py."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.support.browser import open_page, wait_until
from tests.support.dashboard import save_tiny_checkpoints
from tests.support.serving import serve_in_process


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The app over tiny checkpoints with only the Sweep tab after Explore (the other tabs are tested
    on their own), no auto-run: the sweep is the only work. Yields (url, the sessions' states)."""
    import explorer.dashboard.app as app_module
    from explorer.dashboard import create_app

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path)))
    monkeypatch.setattr(app_module, "TAB_NAMES", ("Sweep",))
    torch.set_num_threads(1)

    def build():
        template = create_app(checkpoint="tiny", device="cpu")
        template.explorer_state.tabs["Explore"].param.update(auto_run=False, sweep_auto=False)
        return template

    with serve_in_process(build) as served_app:
        yield served_app


def set_text(page, css: str, value: str) -> None:
    box = page.locator(f"{css} input").first
    box.fill(value)
    box.press("Enter")  # a TextInput commits on Enter / blur


def tab_view_button(state, filename: str):
    """A fresh download button of the Sweep tab's view (the same `make` as the page's)."""
    from explorer.dashboard.tabs.sweep.view import SweepTabView

    view = SweepTabView(tab=state.tabs["Sweep"])
    view._draw_main()
    return next(b for b in view._downloads() if b.filename == filename)


def test_sweep_tab_runs_a_sweep_and_the_grid(browser, served, tmp_path):
    url, states = served
    page, problems = open_page(browser, url)
    wait_until(lambda: states and states[-1].loaded)  # load done: model knobs, then the link
    page.locator(".bk-tab", has_text="Sweep").first.click()
    tab = states[-1].tabs["Sweep"]

    set_text(page, ".sweep-steps-grid", "1,x")
    page.get_by_text("'x' is not a whole number").first.wait_for(state="visible", timeout=30_000)
    set_text(page, ".sweep-steps-grid", "1,4,24")
    wait_until(lambda: tab.steps_grid == "1,4,24" and tab.main.error == "")
    page.locator(".sweep-main-status").get_by_text("model calls").wait_for(timeout=30_000)  # cost, before running

    page.locator(".sweep-main-run button").first.click()
    wait_until(lambda: tab.main.status.startswith("done"))
    for plot in (".sweep-quality-plot", ".sweep-speed-plot"):
        canvas = page.locator(f"{plot} .bk-Canvas, {plot} canvas").first
        canvas.wait_for(timeout=60_000)
        box = canvas.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 150, plot
    page.locator(".sweep-main-status").get_by_text("done").wait_for(timeout=30_000)

    with page.expect_download(timeout=30_000) as download:
        page.locator(".sweep-downloads").get_by_text("Summary CSV").first.click()
    assert Path(download.value.path()).read_text().startswith("sampler,")
    button = tab_view_button(states[-1], "sweep_quality.png")
    with ThreadPoolExecutor(1) as pool:  # as the page runs it: off this thread, which drives playwright already
        png, why = pool.submit(button.handler.produce).result(timeout=120)
    assert why == "" and png[:8] == b"\x89PNG\r\n\x1a\n"

    page.locator(".sweep-grid-run button").first.click()
    page.locator(".sweep-grid-table").get_by_text("20 steps").wait_for(timeout=60_000)
    assert page.locator(".sweep-grid-table").get_by_text("mean").count() == 5
    page.locator(".sweep-quality-plot").first.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)  # BokehJS finishes drawing
    shot = tmp_path / "sweep_tab.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000 and problems == []
