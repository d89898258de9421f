"""A run's plan (sampling/plan.py): what it starts from and how it walks, known before it runs, and a
run built from it is the run sample() makes from length and template."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.data.tokenizer import CharTokenizer
from explorer.sampling import Canvas, SamplerConfig, plan_run, sample, sample_any, sample_ar, sample_many, start_canvas
from tests.support.models import assert_same_run, make_model

TOK = CharTokenizer("abcdefghij")  # ids 0-9, [MASK] = 10
TEMPLATE = "ab█c[___]█d██"


def tiny(kind="diffusion", tok=TOK):
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=16, kind=kind)
    model.tokenizer = tok
    return model


SCHEDULED = {
    "one block": SamplerConfig(steps=8),
    "uneven blocks": SamplerConfig(steps=7, block_length=5),  # 16 positions: blocks of 5, 5, 5, 1
    "fewer steps than blocks": SamplerConfig(steps=2, block_length=4),  # each block still gets one
    "revision": SamplerConfig(steps=9, remask=0.4, remask_t_on=0.9, block_length=6),
}


@pytest.mark.parametrize("name", list(SCHEDULED))
@pytest.mark.parametrize("template", [None, TEMPLATE])
def test_a_plan_knows_the_canvas_blocks_and_rows_its_run_records(name, template):
    model, config = tiny(), SCHEDULED[name]
    plan = plan_run(model, config, template=template)
    traj = sample(model, config, plan=plan, batch_size=2)
    assert plan.rows_exact and plan.rows == traj.n_steps + 1 == sum(plan.steps) + 1 == plan.max_steps + 1
    assert (traj.tokens[0] == plan.canvas.tokens).all() and (traj.fixed == plan.canvas.fixed).all()
    assert (traj.blocks == plan.blocks).all() and len(plan.steps) == plan.n_blocks
    assert_same_run(traj, sample(model, config, template=template, batch_size=2))  # the run sample() builds


def test_the_blocks_split_steps_as_the_sampler_walks_them():
    plan = plan_run(tiny(), SamplerConfig(steps=7, block_length=5))
    assert plan.blocks.tolist() == [0] * 5 + [1] * 5 + [2] * 5 + [3] and plan.steps == (2, 2, 2, 1)
    plan = plan_run(tiny(), SamplerConfig(steps=2, block_length=4), template="ab██████")
    assert plan.blocks.tolist() == [-1, -1, 0, 0, 0, 0, 1, 1] and plan.steps == (1, 1)


@pytest.mark.parametrize("config", [SamplerConfig(threshold=0.3), SamplerConfig(factor=1.0, block_length=5)])
def test_threshold_decoding_plans_a_guess_and_never_runs_past_its_bound(config):
    model = tiny()
    plan = plan_run(model, config)
    assert plan.steps is None and not plan.rows_exact and plan.max_steps == plan.n_generate == 16
    for seed in range(4):
        traj = sample(model, config.replace(seed=seed), batch_size=3)
        assert 1 <= traj.n_steps <= plan.max_steps


def test_one_generator_per_row_and_sample_many_take_a_plan():
    model, config = tiny(), SamplerConfig(steps=5, strategy="random")
    plan = plan_run(model, config, template=TEMPLATE)
    gens = lambda: [torch.Generator().manual_seed(s) for s in (4, 9)]  # noqa: E731
    assert_same_run(sample(model, config, plan=plan, generator=gens()),
                    sample(model, config, template=TEMPLATE, generator=gens()))
    runs = [dict(config=config.replace(steps=s), plan=plan_run(model, config.replace(steps=s), template=TEMPLATE),
                 batch_size=3, record=False) for s in (2, 5)]
    for run, traj in zip(runs, sample_many(model, runs)):
        assert_same_run(traj, sample(model, run["config"], template=TEMPLATE, batch_size=3, record=False))


def test_an_ar_plan_is_the_ar_canvas_and_its_start_token_is_the_seeds():
    model, config = tiny("ar"), SamplerConfig(steps=4, seed=5)  # no "\n" in the vocabulary: a drawn start
    plan = plan_run(model, config, length=10)
    assert plan.kind == "ar" and plan.start_token and plan.canvas.fixed.tolist() == [True] + [False] * 9
    assert plan.rows == 10 and plan.rows_exact and plan.blocks.tolist() == [-1] + [0] * 9
    traj = sample_ar(model, config, plan=plan, batch_size=2)
    assert traj.tokens[0, 0, 0] == plan.canvas.tokens[0] and traj.n_steps + 1 == plan.rows
    assert_same_run(traj, sample_ar(model, config, length=10, batch_size=2))
    prompted = plan_run(model, config, template="abc", length=10)
    assert not prompted.start_token and prompted.canvas.fixed.sum() == 3
    assert_same_run(sample_any(model, config, plan=prompted), sample_any(model, config, template="abc", length=10))


def test_a_given_canvas_is_planned_as_it_is():
    model, config = tiny(), SamplerConfig(steps=4)
    canvas = start_canvas(model, template=TEMPLATE)
    plan = plan_run(model, config, canvas=canvas)
    assert plan.canvas is canvas and plan.canvas_key == plan_run(model, config, template=TEMPLATE).canvas_key
    assert plan.canvas_key != plan_run(model, config, template="ab██").canvas_key


def test_chat_prompts_need_a_chat_template():
    with pytest.raises(ValueError, match="chat template"):
        plan_run(tiny(), SamplerConfig(), chat="hello")
    with pytest.raises(ValueError, match="either a template or a chat prompt"):
        start_canvas(tiny(), template="ab", chat="hello")


def test_a_plan_that_does_not_fit_the_run_is_one_clear_error():
    model, config = tiny(), SamplerConfig(steps=4)
    plan = plan_run(model, config, template=TEMPLATE)
    with pytest.raises(ValueError, match="either a plan or length / template"):
        sample(model, config, plan=plan, template=TEMPLATE)
    with pytest.raises(ValueError, match="other sampler knobs"):
        sample(model, config.replace(steps=5), plan=plan)
    with pytest.raises(ValueError, match="kind 'diffusion'; this one is of kind 'ar'"):
        sample_ar(tiny("ar"), config, plan=plan)
    with pytest.raises(ValueError, match="kind 'ar'; this one is of kind 'diffusion'"):
        sample(model, config, plan=plan_run(tiny("ar"), config, length=8))
    with pytest.raises(TypeError, match="plan must be a RunPlan"):
        sample(model, config, plan="ab██")
    other = tiny(tok=CharTokenizer("abcdefghijk"))  # [MASK] is 11 there
    with pytest.raises(ValueError, match="not made for this model"):
        sample(other, config, plan=plan)
    with pytest.raises(ValueError, match="either a canvas or length"):
        plan_run(model, config, canvas=plan.canvas, length=16)
    too_long = Canvas(np.full(17, 10, dtype=np.int64), np.zeros(17, dtype=bool))
    with pytest.raises(ValueError, match="context is 16"):
        plan_run(model, config, canvas=too_long)
