"""A uniform-state (DiffusionGemma-style) model in the served dashboard, in a real Chromium: a tiny random
DiffusionGemma written to a temp dir and listed by the operator; the page samples it block after block,
the heatmap shows random-token noise, accepted and settled cells with their key, and the hover names them.
The 1366x768 screenshot is left in the test's temp dir (MDLM_EXPLORER_SCREENSHOTS: a folder to copy it to)."""
from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("transformers.models.diffusion_gemma")

from explorer.dashboard import checkpoints as dashboard_checkpoints  # noqa: E402
from explorer.dashboard.runtime.cache import LISTED_MODELS  # noqa: E402
from tests.support.browser import FRAME_JS, POLL_MS, TOOLTIP_JS, wait_finished, wait_rows  # noqa: E402
from tests.support.dashboard import explore, save_tiny_checkpoints  # noqa: E402
from tests.support.hf import diffusion_gemma_dir  # noqa: E402
from tests.support.serving import serve_in_process  # noqa: E402


# The range inputs' max in the page (the step scrubber is the only one: Panel's Player draws its slider so)
SLIDER_MAX_JS = """() => { const out = []; const walk = root => { for (const el of root.querySelectorAll('*')) {
  if (el.shadowRoot) walk(el.shadowRoot); if (el.tagName === 'INPUT' && el.type === 'range') out.push(el.max); } };
  walk(document); return out; }"""


@pytest.fixture
def served_gemma(tmp_path, monkeypatch):
    from explorer.dashboard import create_app

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path / "ckpt")))
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    gemma = str(diffusion_gemma_dir(tmp_path / "gemma"))
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([gemma])
    with serve_in_process(lambda: create_app(checkpoint=gemma, device="cpu")) as (url, states):
        yield url, states


def test_a_uniform_state_model_runs_block_by_block_in_the_page(browser, served_gemma, tmp_path):
    from explorer.dashboard.frames import STATES

    url, states = served_gemma
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    # a loose stop (the random model's entropy is about ln 80 = 4.38, the stop by confidence alone): each block
    # after the first ends after one of its ten steps
    page.goto(url + "?steps=10&length=16&seed=3&stop_entropy=4.37&stable_steps=0&template=to%20be")
    wait_finished(page, states)
    ex = explore(states[-1])
    frames, traj = ex.frames, ex.trajectory
    assert traj.process == "uniform" and frames.process == "uniform"
    wait_rows(page, frames.n_rows, states=states)
    shown = {STATES[c] for row in frames.state for c in row}
    assert {"noise", "accepted", "settled", "earlier", "fixed"} <= shown
    page.get_by_text("random token (re-noised)").wait_for(timeout=10_000)  # the key of this process
    page.get_by_text("block not started").wait_for(timeout=10_000)
    shot = tmp_path / "uniform-explore-1366x768.png"
    page.screenshot(path=str(shot))
    if os.environ.get("MDLM_EXPLORER_SCREENSHOTS"):
        shutil.copy(shot, os.environ["MDLM_EXPLORER_SCREENSHOTS"])
    # its blocks stopped early: the heatmap's rows and the step slider end at the run's last row, not the planned
    assert frames.n_rows < frames.expected_rows
    page.wait_for_function(f"() => ({FRAME_JS})()[6] === {frames.n_rows - 0.5}", timeout=10_000, polling=POLL_MS)
    assert page.evaluate(SLIDER_MAX_JS) == [str(frames.n_rows - 1)]
    left, top, width, height, x0, x1, y0, y1 = page.evaluate(FRAME_JS)
    settle_row = next(r for r, row in enumerate(frames.state) if STATES[row[-1]] == "settled")
    x = frames.length - 1
    page.mouse.move(left + (x - x0) / (x1 - x0) * width, top + (settle_row - y1) / (y0 - y1) * height)
    page.wait_for_function(f"() => ({TOOLTIP_JS})()[1] === {f'{settle_row}: settled'!r}",
                           timeout=10_000, polling=POLL_MS)
    assert problems == []
