"""The Generation lesson's masked-vs-uniform figure in a real headless Chromium: its link opens Compare with
one column per checkpoint (`shakespeare` and `shakespeare-uniform`, here tiny random models of Shakespeare's
alphabet under those names) and both trajectories are drawn, each its own process's, under a key of both
processes' cells."""
from __future__ import annotations

import string

import pytest

from explorer.dashboard.lessons import figure_url, lesson
from explorer.data.tokenizer import CharTokenizer
from tests.support.browser import open_page, wait_until
from tests.support.dashboard import save_tiny_checkpoints, save_twins
from tests.support.serving import serve_in_process

FIGURE = next(f for f in lesson("generation").figures if "compare.columns=model=shakespeare" in f.query)
CHARS = "\n !$&',-.3:;?" + string.ascii_uppercase + string.ascii_lowercase  # the shipped models' 65

# Per compare column (its heatmap's image source, ui/heatmap.py's names): [rows, positions] the page draws.
IMAGES_JS = """() => { const out = []; for (const i of [1, 2]) { let got = null;
  for (const doc of Bokeh.documents) { const m = doc.get_model_by_name(`compare-${i}-image`);
    if (m) got = [m.data.rows[0], m.data.dw[0]]; }
  out.push(got); } return out; }"""


@pytest.fixture
def served_pair(tmp_path, monkeypatch):
    """The app as `python run.py` serves it (the link's checkpoint= opens that checkpoint: app.served_args),
    over the tiny checkpoints and the pair; Explore and Compare only, a lighter page (the other tabs have
    their own browser tests)."""
    from explorer.dashboard.app import create_app, served_args

    save_tiny_checkpoints(tmp_path)
    save_twins(tmp_path, names=("shakespeare", "shakespeare-uniform"), tok=CharTokenizer(CHARS), block_size=64)
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    monkeypatch.setattr("explorer.dashboard.app.TAB_NAMES", ("Compare",))
    with serve_in_process(lambda: create_app(**served_args(device="cpu"))) as served_app:
        yield served_app


def test_the_link_draws_the_masked_and_the_uniform_state_trajectory_side_by_side(browser, served_pair):
    url, states = served_pair
    page, problems = open_page(browser, figure_url(FIGURE, base=url))
    tab = lambda: states[-1].tabs.get("Compare") if states else None  # noqa: E731
    wait_until(lambda: tab() is not None and len(tab().results) == 2 and all(tab().results) and not tab().running)
    masked, uniform = tab().results
    assert masked["error"] == uniform["error"] == "", (masked["error"], uniform["error"])
    assert (masked["model"], masked["traj"].process) == ("shakespeare", "masked")
    assert (uniform["model"], uniform["traj"].process) == ("shakespeare-uniform", "uniform")
    assert masked["text"].startswith("ROMEO:") and uniform["text"].startswith("ROMEO:")
    want = [[r["traj"].n_steps + 1, 64] for r in (masked, uniform)]
    wait_until(lambda: page.evaluate(IMAGES_JS) == want, 20)  # both drawn in the page, each step a row
    texts = page.locator(".compare-text .canvas")
    wait_until(lambda: texts.count() == 2 and texts.nth(1).inner_text() == uniform["text"])
    # the key explains both columns' cells, each under its process's name
    key = page.get_by_text("uniform-state:")
    key.first.wait_for(timeout=20_000)
    assert page.get_by_text("random token (re-noised)").count() > 0 and page.get_by_text("still masked").count() > 0
    assert problems == [], problems
