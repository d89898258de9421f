"""The Model tab in a real headless Chromium: the checkpoint page (architecture, size, NELBO, curves),
then a tiny training run whose live loss curve grows, Stop saving it, and "Sample from it" loading it.
Saves screenshots (MODEL_SHOT_DIR or tmp)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.test_dashboard_browser import (open_page, pytestmark, served,  # noqa: F401 (fixtures)
                                          wait_until)

__all__ = ["served", "pytestmark"]  # `browser`, the session's Chromium, comes from conftest.py

# Points of a named ColumnDataSource as the browser has it (Bokeh's document).
POINTS_JS = """(name) => { for (const doc of Bokeh.documents) {
  const m = doc.get_model_by_name(name); if (m) return m.data.step.length; } return -1; }"""


def points(page, name: str) -> int:
    return page.evaluate(POINTS_JS, name)


def model_tab(states):
    return states[-1].tabs.get("Model") if states else None


@pytest.fixture
def model_tab_only(monkeypatch):
    """Explore and this tab only (before `served` builds the app): the other tabs have their own
    browser tests, and less to render leaves the busy CPU to the training."""
    monkeypatch.setattr("explorer.dashboard.app.TAB_NAMES", ("Model",))


def test_page_then_live_training_stop_and_sample(browser, model_tab_only, served, tmp_path):  # noqa: F811
    url, states = served
    shots = Path(os.environ.get("MODEL_SHOT_DIR", tmp_path))
    page, problems = open_page(browser, url)
    wait_until(lambda: states and states[-1].model is not None)
    page.locator(".bk-tab", has_text="Model").click()
    summary = page.locator(".meta-page")
    wait_until(lambda: "14,048" in summary.inner_text())
    text = summary.inner_text()
    for expected in ("Architecture", "masked diffusion", "NELBO 1.500 nats/char", "patterns"):
        assert expected in text, expected
    page.wait_for_function(f"() => ({POINTS_JS})('stored-train') === 1")  # the stored curve is drawn
    assert points(page, "live-lr-plan") > 100  # the chosen schedule, before any training
    page.screenshot(path=str(shots / "model-page.png"))

    tab = model_tab(states)
    page.locator(".train-schedule").get_by_text("linear").click()
    page.locator(".train-steps input").fill("3000")
    page.locator(".train-steps input").press("Enter")
    page.locator(".train-name input").fill("browser-run")
    page.locator(".train-name input").press("Tab")  # a text input commits its value on blur
    wait_until(lambda: (tab.lr_schedule, tab.train_steps, tab.new_name) == ("linear", 3000, "browser-run"))
    page.locator(".train-start button").click()
    page.wait_for_function(f"() => ({POINTS_JS})('live-train') >= 5", timeout=60_000)
    first = points(page, "live-train")
    page.wait_for_function(f"() => ({POINTS_JS})('live-train') > {first}", timeout=60_000)  # it keeps growing
    assert points(page, "live-lr-used") == points(page, "live-train")
    page.screenshot(path=str(shots / "model-training.png"), full_page=True)

    page.locator(".train-stop button").click()
    wait_until(lambda: not tab.training and tab.saved == "browser-run")
    assert (tmp_path / "browser-run.safetensors").exists() and "browser-run" in states[-1].param.checkpoint.objects
    wait_until(lambda: "saved checkpoints/browser-run.safetensors" in page.locator(".train-status-text").inner_text())
    page.locator(".train-sample button").click()
    wait_until(lambda: states[-1].model_info.get("name") == "browser-run")
    wait_until(lambda: "browser-run" in summary.inner_text())  # the page now describes the new model
    page.screenshot(path=str(shots / "model-saved.png"), full_page=True)
    # Known, not this tab's: switching the checkpoint while any tab but Explore is shown makes Panel
    # link its loading.css from the CDN, which an offline machine cannot resolve (the Sweep tab too).
    assert [p for p in problems if "ERR_NAME_NOT_RESOLVED" not in p] == []
