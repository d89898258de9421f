"""The Inspect tab in a real headless Chromium: the masked text, the candidates under each █ and the
validation plots show; the t slider re-masks the text at once; a bad character is a notice.
Saves a screenshot (INSPECT_SHOT, else in tmp)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from explorer.dashboard.tabs.inspect.masking import draw_mask
from explorer.dashboard.tabs.inspect.state import ACC_TS
from tests.support.browser import open_tab_after_explore, wait_until
from tests.support.dashboard import LENGTH


@pytest.fixture(autouse=True)
def only_inspect(monkeypatch):
    """Explore and Inspect only: the other tabs have their own browser tests."""
    monkeypatch.setattr("explorer.dashboard.app.TAB_NAMES", ("Inspect",))


def inspect_tab(states):
    return states[-1].tabs.get("Inspect") if states else None


def complete(tab) -> bool:
    return (tab is not None and tab.predictions is not None and tab.positions is not None
            and tab.accuracy is not None and len(tab.accuracy) == len(ACC_TS))


def masked_shown(page) -> int:
    return page.locator(".inspect-forward .fwd").inner_text().count("█")


def test_inspect_shows_masked_text_candidates_and_plots(browser, served, tmp_path):
    url, states = served
    page, problems = open_tab_after_explore(browser, url, states, "Inspect")
    wait_until(lambda: complete(inspect_tab(states)))
    tab = inspect_tab(states)
    mask = draw_mask(LENGTH, tab.t, tab.mask_seed)
    wait_until(lambda: masked_shown(page) == mask.sum())
    cols = page.locator(".inspect-predictions .col[title]")
    wait_until(lambda: cols.count() == mask.sum())
    assert cols.first.locator(".cd").count() == tab.k  # k candidates under each masked character
    assert page.locator(".inspect-predictions .cd.t1").count() == mask.sum()
    for plot in (".inspect-fraction", ".inspect-accuracy", ".inspect-positions"):
        box = page.locator(plot).first.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 200, plot
    page.wait_for_timeout(500)
    shot = Path(os.environ.get("INSPECT_SHOT", tmp_path / "inspect.png"))
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000

    page.locator(".inspect-t .noUi-handle").first.focus()  # the slider: the masked text follows at once
    for _ in range(20):
        page.keyboard.press("ArrowRight")
    wait_until(lambda: tab.t == pytest.approx(0.7))
    wait_until(lambda: masked_shown(page) == draw_mask(LENGTH, 0.7, tab.mask_seed).sum())
    wait_until(lambda: tab.predictions is not None and tab.predictions["t"] == pytest.approx(0.7))

    seed = tab.mask_seed
    page.locator(".inspect-redraw button").click()
    wait_until(lambda: tab.mask_seed != seed)

    box = page.locator(".inspect-text-input textarea")
    box.fill("ABCé ABC")
    box.blur()
    page.get_by_text("this model does not know: 'é', ' '").wait_for(state="visible", timeout=30_000)
    wait_until(lambda: tab.predictions is not None and tab.predictions["text"] == "ABCABC")
    assert not tab.default_text
    assert problems == [], problems
