"""The dashboard plans a run once (session.run_plan, sampling.plan): row 0 and the heatmap's rows come
from the plan, and the sampler is handed that plan, never the canvas written back as text."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.dashboard.session import run_plan, sample_canvas
from explorer.dashboard.tabs.explore import open_session
from explorer.data.tokenizer import CharTokenizer
from explorer.sampling import Canvas, SamplerConfig
from tests.support.dashboard import explore
from tests.support.models import make_model


def test_a_run_starts_from_the_canvas_drawn_not_from_it_written_back_as_text():
    """Given text "[___]" reads, as a template, as five blanks: a run handed the canvas's text started
    from a canvas of twelve [MASK]s, not from the one the views drew."""
    tok = CharTokenizer("[_]ab")
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=12)
    model.tokenizer = tok
    tokens = np.array([0, 1, 1, 1, 2] + [tok.mask_id] * 7, dtype=np.int64)
    canvas = Canvas(tokens, tokens != tok.mask_id)
    traj = sample_canvas(model, SamplerConfig(steps=4), canvas)
    assert (traj.tokens[0, 0] == tokens).all() and (traj.fixed[0] == canvas.fixed).all()
    assert tok.decode(traj.final[0]).startswith("[___]") and (traj.final[0] != tok.mask_id).all()


@pytest.fixture
def state(checkpoints):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    assert s.model is not None and s.error == ""
    return s


@pytest.mark.parametrize("knobs", [dict(steps=7, block_length=5), dict(steps=2, block_length=4),
                                   dict(steps=6, template="AB█C[___]"), dict(threshold=0.5)])
def test_the_heatmap_is_sized_and_drawn_from_the_plan_the_run_walks(state, knobs):
    state.param.update(**knobs)
    plan = run_plan(state.model, state.sampler_config(), state.canvas())
    e = explore(state)
    assert e.start_run(wait=True)
    assert e.frames.expected_rows == plan.rows and e.frames.rows_known == plan.rows_exact
    assert (e.frames.tokens[0] == plan.canvas.tokens).all() and (e.trajectory.tokens[0, 0] == plan.canvas.tokens).all()
    if plan.rows_exact:
        assert e.trajectory.n_steps + 1 == plan.rows == e.frames.n_rows
    else:
        assert e.trajectory.n_steps <= plan.max_steps


def test_an_ar_run_starts_from_the_ar_canvas_of_its_plan(state):
    state.load("tiny-ar", wait=True)
    plan = run_plan(state.model, state.sampler_config(), state.canvas())
    assert plan.kind == "ar" and plan.canvas.fixed[0] and not plan.canvas.fixed[1:].any()
    e = explore(state)
    assert e.start_run(wait=True)
    assert e.frames.expected_rows == plan.rows == e.trajectory.n_steps + 1
    assert (e.trajectory.tokens[0, 0] == plan.canvas.tokens).all()
