"""A Hugging Face model in the served dashboard, in a real Chromium: a tiny BERT written to a
temp dir and listed by the operator; the page runs it, the heatmap hover names tokens and their ids,
and the text view shows one span per token."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from explorer.dashboard import checkpoints as dashboard_checkpoints  # noqa: E402
from explorer.dashboard.runtime.cache import LISTED_MODELS  # noqa: E402
from tests.support.browser import FRAME_JS, POLL_MS, TOOLTIP_JS, open_page, wait_finished, wait_rows  # noqa: E402
from tests.support.dashboard import explore, save_tiny_checkpoints  # noqa: E402
from tests.support.hf import bert_dir  # noqa: E402
from tests.support.serving import serve_in_process  # noqa: E402


@pytest.fixture
def served_bert(tmp_path, monkeypatch):
    from explorer.dashboard import create_app

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path / "ckpt")))
    bert = str(bert_dir(tmp_path / "bert"))
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([bert])
    with serve_in_process(lambda: create_app(checkpoint=bert, device="cpu")) as (url, states):
        yield url, states, bert


def test_a_listed_model_runs_in_the_page_with_tokens(browser, served_bert):
    from explorer.dashboard.ui.heatmap import display_glyphs

    url, states, bert = served_bert
    page, problems = open_page(browser, url + "?steps=4&length=12&seed=3")
    wait_rows(page, 5, states=states)
    wait_finished(page, states)
    frames = explore(states[-1]).frames
    assert states[-1].model.config.family == "mlm"
    assert page.locator(".sample-text .canvas .t").count() == 12  # a span (with its edge) per token
    page.get_by_text("(diffusion, mlm)").wait_for(timeout=10_000)  # the header names the family (and dtype)
    page.get_by_text("fp32 weights").wait_for(timeout=10_000)
    left, top, width, height, x0, x1, y0, y1 = page.evaluate(FRAME_JS)
    x, step = 5, frames.n_rows - 1
    page.mouse.move(left + (x - x0) / (x1 - x0) * width, top + (step - y1) / (y0 - y1) * height)
    want = f"{x}: {display_glyphs(frames.chars(step))[x]} (id {frames.tokens[step][x]})"
    page.wait_for_function(f"() => ({TOOLTIP_JS})()[0] === {want!r}", timeout=10_000, polling=POLL_MS)
    assert problems == []
