"""Several items in one view from one link, in a real headless Chromium at a projector's 1366x768 with
presentation type: Inspect's forward process at six t and three texts at one t (inspect.ts,
inspect.texts), Explore's eight samples and three prompts (samples, prompts). The page shows every item,
each what the Python API gives for it alone. Two pages: each link opens Inspect and carries Explore's knobs
too, and Explore is opened on the same page after Inspect's check. Screenshots go to pytest's tmp directory."""
from __future__ import annotations

import pytest
import torch

from explorer.dashboard.tabs.inspect.masking import draw_mask
from tests.support.browser import open_page, wait_until
from tests.support.dashboard import LENGTH, explore
from tests.support.module_app import serve_tiny, sessions_of_this_test

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
TEXTS = ("ABCABCABCABCABCABC", "AAAABBBBAAAABBBB", "ABABABABABAB")


@pytest.fixture(autouse=True)
def two_tabs(monkeypatch):
    """Explore and Inspect only: the other tabs have their own browser tests."""
    monkeypatch.setattr("explorer.dashboard.app.TAB_NAMES", ("Inspect",))


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One served app over the tiny checkpoints for the module (its loaded model, and so Inspect's
    validation statistics, shared by both pages); yields (url, the sessions' states)."""
    with serve_tiny(tmp_path_factory.mktemp("ckpt")) as served_app:
        yield served_app


@pytest.fixture
def served(app):
    """The module's app; the sessions a test opens end with it."""
    with sessions_of_this_test(app[1]):
        yield app


def projector(browser, url):
    page, problems = open_page(browser, url)
    page.set_viewport_size({"width": 1366, "height": 768})
    return page, problems


def solo(steps: int, seed: int, template: str = "") -> str:
    """One run through the Python API (no dashboard involved)."""
    from explorer.dashboard import checkpoints
    from explorer.sampling import SamplerConfig, sample

    model = checkpoints.load("tiny", torch.device("cpu"))
    config = SamplerConfig(steps=steps, seed=seed, strategy="confidence", temperature=1.0)
    return sample(model, config, length=LENGTH, template=template or None, record=False).texts()[0]


# Explore's knobs, in the links below too: its samples' rows are checked against the Python API's
EXPLORE = "steps=4&seed=7&strategy=confidence&temperature=1"
SAMPLES = ("samples=8", [("", 7 + j) for j in range(8)])
PROMPTS = ("prompts=AB%7CC%E2%96%88%E2%96%88D%7CEEE", [("AB", 7), ("C██D", 7), ("EEE", 7)])


def check_explore_rows(page, states, tmp_path, query: str, rows) -> None:
    """Open Explore (the link's Explore knobs wait for it: a link to another tab runs that tab first) and
    check that it shows `rows`, (template, seed) each, as the Python API gives them alone."""
    page.locator(".bk-tab").get_by_text("Explore", exact=True).click()
    shown = page.locator(".explore-samples table.smp tr")
    wait_until(lambda: shown.count() == len(rows))
    texts = [shown.nth(i).locator("pre").inner_text() for i in range(len(rows))]
    assert texts == [solo(4, seed, template).replace("\n", "↵") for template, seed in rows]
    labels = [shown.nth(i).locator("th").inner_text() for i in range(len(rows))]
    assert all(f"seed {seed}" in label for label, (_, seed) in zip(labels, rows))
    if not rows[0][0]:  # the sidebar's template: row 0 is the run above
        assert texts[0] == explore(states[-1]).trajectory.texts()[0] and "in the heatmap" in labels[0]
    last = shown.nth(len(rows) - 1).bounding_box()
    assert last["y"] + last["height"] <= 768 and last["x"] + last["width"] <= 1366  # all in the first screen
    page.screenshot(path=str(tmp_path / f"explore-{query.split('=')[0]}.png"), full_page=True)


def test_one_link_shows_the_forward_process_at_every_t_and_every_sample(browser, served, tmp_path):
    """Inspect's forward process at six t; then, on the same page, Explore's eight samples from the
    link's samples=8 (one page for both: each page costs the browser seconds of layout)."""
    url, states = served
    link = ("?tab=Inspect&presentation=true&inspect.mask_seed=3&inspect.ts=" + ",".join(f"{t:g}" for t in TS)
            + f"&{EXPLORE}&{SAMPLES[0]}")
    page, problems = projector(browser, url + link)
    rows = page.locator(".inspect-several table.sev tr.t0")
    predicted = page.locator(".inspect-several td.lab", has_text="predicts")
    wait_until(lambda: rows.count() == len(TS) and predicted.count() == len(TS))
    seen = [rows.nth(i).locator("td.txt").inner_text().count("█") for i in range(len(TS))]
    assert seen == [int(draw_mask(LENGTH, t, 3).sum()) for t in TS] and seen[0] == 0 and seen[-1] == LENGTH
    box = page.locator(".inspect-several").bounding_box()
    assert box["y"] < 768 / 2 and box["x"] + box["width"] <= 1366  # the figure first, nothing off the side
    page.screenshot(path=str(tmp_path / "inspect-ts.png"))
    check_explore_rows(page, states, tmp_path, *SAMPLES)
    assert problems == [], problems


def test_one_link_shows_three_texts_at_one_t_and_three_prompts(browser, served, tmp_path):
    """Inspect's three texts at one t; then, on the same page, Explore's rows of the link's three prompts."""
    url, states = served
    link = "?tab=Inspect&presentation=true&inspect.t=0.4&inspect.texts=" + "%7C".join(TEXTS) + f"&{EXPLORE}&{PROMPTS[0]}"
    page, problems = projector(browser, url + link)
    tables = page.locator(".inspect-several table.sev")
    wait_until(lambda: tables.count() == len(TEXTS) and page.locator(".inspect-several .acc").count() == len(TEXTS))
    inspect = states[-1].tabs["Inspect"]
    for i, text in enumerate(TEXTS):
        row = inspect.several["rows"][i]
        assert row["text"] == text and tables.nth(i).locator("tr").first.locator("td.txt").inner_text() == text
        hits, n = int(row["table"]["correct"].sum()), len(row["table"])
        assert f"{hits} of {n} right" in tables.nth(i).locator(".acc").inner_text()
    page.screenshot(path=str(tmp_path / "inspect-texts.png"))
    check_explore_rows(page, states, tmp_path, *PROMPTS)
    assert problems == [], problems
