"""Token editing (edit_threshold, step.edit): step for step what diffusers' BlockRefinementScheduler does
with editing_threshold, driven by the loop of diffusers' LLaDA2 pipeline (copied below), on the same
scripted logits; and every batched, merged and packed run with editing equal to its solo run."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.sampling import SamplerConfig, sample, sample_many
from explorer.sampling.merged import merge_key
from explorer.sampling.packing import _walks
from explorer.sampling.step import EDIT_POST_STEPS
from tests.support.models import assert_same_run, gen
from tests.support.scripted import TOK, ScriptedDenoiser

diffusers = pytest.importorskip("diffusers")  # the `test` extra installs it
MASK = TOK.mask_id


def diffusers_run(model, *, length: int, block_length: int, steps: int, threshold: float, editing_threshold: float,
                  max_post_steps: int = EDIT_POST_STEPS) -> list[dict]:
    """Greedy decoding of one all-[MASK] row by the loop of diffusers' LLaDA2Pipeline.__call__ (its
    block loop, post steps and check_block_should_continue; no prompt, no EOS stop) around
    BlockRefinementScheduler.step. One difference, the model's: it is called on the whole canvas (later
    blocks still [MASK]), as the project's sampler calls it, instead of on the blocks up to the current
    one. Returns one record per step: the canvas after it, the positions committed and edited."""
    scheduler = diffusers.BlockRefinementScheduler(block_length=block_length, num_inference_steps=steps,
                                                   threshold=threshold, editing_threshold=editing_threshold)
    scheduler.set_timesteps(steps, block_length=block_length)
    x = torch.full((1, length), MASK, dtype=torch.long)
    records = []
    for start in range(0, length, block_length):
        block = slice(start, start + block_length)
        post_steps, step_idx, go_on = 0, 0, True
        while go_on:
            tokens = x[:, block]
            masks_remaining = bool((tokens == MASK).any())
            post_steps += not masks_remaining
            logits = model(x, None)[:, block]  # (1, block_length, V)
            out = scheduler.step(logits, step_idx, tokens, mask_token_id=MASK, temperature=0.0,
                                 threshold=threshold, editing_threshold=editing_threshold, minimal_topk=1)
            final = out.transfer_index | out.editing_transfer_index
            x = x.clone()
            x[:, block] = torch.where(final, out.prev_sample, tokens)
            committed, edited = torch.zeros(length, dtype=torch.bool), torch.zeros(length, dtype=torch.bool)
            committed[block], edited[block] = out.transfer_index[0], out.editing_transfer_index[0]
            records.append(dict(x=x[0].clone(), committed=committed, edited=edited))
            step_idx += masks_remaining
            go_on = scheduler.check_block_should_continue(
                step_idx=step_idx, masks_remaining=masks_remaining, editing_enabled=True,
                editing_transfer_index=out.editing_transfer_index, post_steps=post_steps,
                max_post_steps=max_post_steps, finished=torch.zeros(1, dtype=torch.bool))
    return records


def assert_same_steps(traj, records):
    assert traj.n_steps == len(records)
    for s, rec in enumerate(records):
        assert traj.committed[s, 0].tolist() == rec["committed"].tolist(), f"step {s}: committed"
        assert traj.edited[s, 0].tolist() == rec["edited"].tolist(), f"step {s}: edited"
        assert traj.tokens[s + 1, 0].tolist() == rec["x"].tolist(), f"step {s}: canvas"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_schedule_decoding_edits_as_diffusers_block_refinement(seed):
    """Our linear schedule is diffusers' transfer schedule (block_length spread evenly over the steps, the
    first steps one more) when its threshold can never be passed (1.0: nothing is > 1): the block takes
    its steps (at most one per position), editing rides along, and no post steps follow (diffusers stops
    a block at its last step)."""
    model = ScriptedDenoiser(block_size=12, seed=seed)
    ours = sample(model, SamplerConfig(steps=3 * 3, block_length=4, temperature=0, edit_threshold=0.5),
                  length=12)
    theirs = diffusers_run(model, length=12, block_length=4, steps=3, threshold=1.0, editing_threshold=0.5)
    assert_same_steps(ours, theirs)
    assert ours.edited.any()  # there was something to edit


@pytest.mark.parametrize("seed", [0, 1, 4])
def test_threshold_decoding_edits_and_takes_post_steps_as_diffusers(seed):
    """diffusers with one commit per step at least (num_inference_steps = block_length) and a threshold is
    our threshold rule (every position above it, at least the best); a filled block then takes post steps
    while they edit, at most max_post_steps + 1. (diffusers' loop takes none after a block that used
    all its num_inference_steps, one commit each; threshold decoding has no step budget, so here a
    filled block always takes its post step: the seeds are ones whose blocks fill sooner.)"""
    model = ScriptedDenoiser(block_size=12, seed=seed)
    ours = sample(model, SamplerConfig(threshold=0.6, block_length=4, temperature=0, edit_threshold=0.6),
                  length=12)
    theirs = diffusers_run(model, length=12, block_length=4, steps=4, threshold=0.6, editing_threshold=0.6)
    commits = ours.committed[:, 0].reshape(ours.n_steps, 3, 4).any(axis=2)  # (S, blocks): every filling step commits
    assert commits.sum(axis=0).max() < 4  # every block filled in fewer steps than it has positions
    assert_same_steps(ours, theirs)
    assert ours.edited.any() and commits.sum() < ours.n_steps  # edits, and post steps


def test_a_post_step_that_edits_nothing_ends_the_block():
    """Calm logits (little noise): the one post step of each block finds nothing to edit, and the next
    block starts from the same canvas, so it reuses that call's logits (no model call)."""
    model = ScriptedDenoiser(block_size=8, seed=3, noise=0.0)
    tr = sample(model, SamplerConfig(threshold=0.9, block_length=4, temperature=0, edit_threshold=0.5), length=8)
    plain = sample(model, SamplerConfig(threshold=0.9, block_length=4, temperature=0), length=8)
    assert not tr.edited.any() and (tr.final == plain.final).all()
    assert tr.n_steps == plain.n_steps + 2 and tr.nfe == plain.nfe + 1  # a post step each; the last block's calls


def test_editing_off_changes_nothing():
    model = ScriptedDenoiser(block_size=10, seed=4)
    for config in (SamplerConfig(steps=6), SamplerConfig(threshold=0.7, block_length=5)):
        a = sample(model, config, length=10, generator=gen(5))
        b = sample(model, config.replace(edit_threshold=0.0), length=10, generator=gen(5))
        assert_same_run(a, b)
        assert not a.edited.any()


CASES = {
    "schedule": SamplerConfig(steps=6, edit_threshold=0.5, temperature=0.8),
    "schedule, blocks, random": SamplerConfig(steps=8, block_length=4, strategy="random", edit_threshold=0.4),
    "threshold, blocks": SamplerConfig(threshold=0.7, block_length=4, edit_threshold=0.6, temperature=1.2),
    "entropy bound": SamplerConfig(entropy_bound=1.0, edit_threshold=0.5, temperature=0.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_row_with_editing_is_its_solo_run(name):
    model, config, seeds = ScriptedDenoiser(block_size=12, seed=6), CASES[name], [3, 11, 3, 42]
    batch = sample(model, config, generator=[gen(s) for s in seeds], template="ab██████c██d")
    assert batch.edited.any()
    for i, seed in enumerate(seeds):
        assert_same_run(batch.row(i), sample(model, config, generator=gen(seed), template="ab██████c██d"))


def test_merged_and_packed_runs_with_editing_equal_their_solo_runs():
    """Runs that share edit_threshold merge (merged.py edits as step.edit does); threshold and
    entropy-bound runs with editing are packed; each run is its solo run."""
    model = ScriptedDenoiser(block_size=12, seed=7)
    configs = [SamplerConfig(steps=5, edit_threshold=0.5), SamplerConfig(steps=9, strategy="margin", edit_threshold=0.5),
               SamplerConfig(steps=12, strategy="random", edit_threshold=0.5, temperature=0),
               SamplerConfig(threshold=0.6, edit_threshold=0.5), SamplerConfig(entropy_bound=0.8, edit_threshold=0.5)]
    runs = [dict(config=c, batch_size=3, generator=gen(20 + i), record=False) for i, c in enumerate(configs)]
    assert merge_key(runs[0]) == merge_key(runs[1]) != merge_key(dict(runs[0], config=SamplerConfig(steps=5)))
    assert _walks(runs, merge=True) == [[0, 1, 2], [3], [4]]
    got = sample_many(model, runs)
    for i, config in enumerate(configs):
        assert_same_run(got[i], sample(model, config, batch_size=3, generator=gen(20 + i), record=False))
    edited = [sample(model, c, batch_size=3, generator=gen(20 + i)).edited.any() for i, c in enumerate(configs)]
    assert all(edited), edited


def test_an_edit_is_recorded_with_its_step_and_confidence():
    model = ScriptedDenoiser(block_size=10, seed=8)
    tr = sample(model, SamplerConfig(steps=5, edit_threshold=0.5, temperature=0), length=10)
    s, b, i = map(int, np.argwhere(tr.edited)[0])
    before, after = tr.tokens[s, b, i], tr.tokens[s + 1, b, i]
    assert before != MASK and after != MASK and before != after  # a committed token replaced by another
    assert not tr.committed[s, b, i]
    logits = model.row_logits(torch.as_tensor(tr.tokens[s, b]))[i]  # what the model said at that step
    p = torch.softmax(logits, dim=-1)
    assert int(p.argmax()) == after and float(p.max()) > 0.5
    # recorded as a commit is: the new token as the step's proposal, its probability as its confidence
    assert tr.proposals[s, b, i] == after and np.isclose(tr.confidence[s, b, i], float(p.max()))
    last = np.flatnonzero(tr.edited[:, b, i] | tr.committed[:, b, i])[-1]  # the final token's step
    assert tr.committed_at[b, i] == last
