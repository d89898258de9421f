"""The Compare tab in a real headless Chromium: a preset runs two columns, whose heatmaps, texts and
metrics show side by side; a bad override is a notice. Saves a screenshot (COMPARE_SHOT or tmp)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.browser import open_tab_after_explore, wait_until


@pytest.fixture(autouse=True)
def only_compare(monkeypatch):
    """Explore and Compare only: the other tabs have their own browser tests, and a lighter page
    keeps this one fast."""
    monkeypatch.setattr("explorer.dashboard.app.TAB_NAMES", ("Compare",))


def compare_tab(states):
    return states[-1].tabs["Compare"] if states and "Compare" in states[-1].tabs else None


def heatmap(page, i: int):
    """The i-th column's heatmap canvas (the Bokeh pane is the figure itself: no css class of its own)."""
    return page.locator(".compare-column").nth(i).locator(".bk-Canvas").first


def finished(tab) -> bool:
    return tab is not None and not tab.running and len(tab.results) == 2 and all(tab.results)


def test_preset_shows_two_heatmaps_texts_and_metrics(browser, served, tmp_path):
    url, states = served
    page, problems = open_tab_after_explore(browser, url, states, "Compare")
    page.locator(".compare-presets").get_by_text("steps 4 vs 32").click()
    tab = compare_tab(states)
    # the preset's own results: the tab's first comparison may still be what is finished a moment
    wait_until(lambda: finished(tab) and [r["config"].steps for r in tab.results] == [4, 32])
    assert tab.preset == "steps" and all(r["error"] == "" for r in tab.results)

    texts = page.locator(".compare-text .canvas")
    wait_until(lambda: texts.count() == 2 and texts.nth(1).inner_text() == tab.results[1]["text"])
    assert texts.nth(0).inner_text() == tab.results[0]["text"]
    for i in range(2):
        box = heatmap(page, i).bounding_box()
        assert box and box["width"] > 250 and box["height"] > 200
        assert "pattern quality" in page.locator(".compare-metrics table").nth(i).inner_text()
    boxes = [heatmap(page, i).bounding_box() for i in range(2)]
    assert boxes[0]["y"] == pytest.approx(boxes[1]["y"]) and boxes[0]["x"] < boxes[1]["x"]  # side by side
    page.wait_for_timeout(500)
    shot = Path(os.environ.get("COMPARE_SHOT", tmp_path / "compare.png"))
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000

    editor = page.locator(".compare-editor input").nth(1)
    editor.fill("steps=many")
    editor.press("Enter")
    notice = page.locator(".compare-notice").get_by_text("'many' is not a whole number")
    notice.wait_for(state="visible", timeout=30_000)
    assert tab.columns.endswith("steps=32") and texts.nth(1).inner_text() == tab.results[1]["text"]
    assert problems == [], problems
