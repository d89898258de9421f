"""Token editing (edit_threshold, step.propose_block / step.edit): step for step what diffusers'
BlockRefinementScheduler does with editing_threshold, driven by the loop of diffusers' LLaDA2 pipeline
(copied below), on the same scripted logits and the same generator, at every temperature, with top-k /
top-p, under a schedule (its steps left once a block is filled become post steps) and under threshold
decoding (a block that took its whole budget takes no post step); and every batched and packed run with
editing equal to its solo run."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.sampling import SamplerConfig, plan_run, sample, sample_many
from explorer.sampling.merged import merge_key
from explorer.sampling.packing import _walks
from explorer.sampling.step import EDIT_POST_STEPS
from tests.support.models import assert_same_run, gen
from tests.support.scripted import TOK, ScriptedDenoiser

MASK = TOK.mask_id


def block_refinement_scheduler(**kwargs):
    """diffusers' BlockRefinementScheduler (the `test` extra installs diffusers). Imported when a test first
    needs it, not at collection: the import takes seconds, and every worker of a parallel run collects this
    module while only one runs it."""
    return pytest.importorskip("diffusers").BlockRefinementScheduler(**kwargs)


def diffusers_run(model, *, length: int, block_length: int, steps: int, threshold: float, editing_threshold: float,
                  temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None, seed: int = 0,
                  max_post_steps: int = EDIT_POST_STEPS) -> list[dict]:
    """Decoding of one all-[MASK] row by the loop of diffusers' LLaDA2Pipeline.__call__ (its block loop,
    post steps and check_block_should_continue; multinomial sampling, its default; no prompt, no EOS stop)
    around BlockRefinementScheduler.step, with a generator seeded with `seed`. One difference, the
    model's: it is called on the whole canvas (later blocks still [MASK]), as the project's sampler calls
    it, instead of on the blocks up to the current one. Returns one record per step: the canvas after it,
    the positions committed and edited."""
    scheduler = block_refinement_scheduler(block_length=block_length, num_inference_steps=steps,
                                           threshold=threshold, editing_threshold=editing_threshold)
    scheduler.set_timesteps(steps, block_length=block_length)
    generator = gen(seed)
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
            out = scheduler.step(logits, step_idx, tokens, mask_token_id=MASK, temperature=temperature,
                                 top_k=top_k, top_p=top_p, sampling_method="multinomial", threshold=threshold,
                                 editing_threshold=editing_threshold, minimal_topk=1, generator=generator)
            final = out.transfer_index | out.editing_transfer_index
            x = x.clone()
            x[:, block] = torch.where(final, out.prev_sample, tokens)
            committed, edited = torch.zeros(length, dtype=torch.bool), torch.zeros(length, dtype=torch.bool)
            committed[block], edited[block] = out.transfer_index[0], out.editing_transfer_index[0]
            records.append(dict(x=x[0].clone(), committed=committed, edited=edited, filling=masks_remaining))
            step_idx += masks_remaining
            go_on = scheduler.check_block_should_continue(
                step_idx=step_idx, masks_remaining=masks_remaining, editing_enabled=True,
                editing_transfer_index=out.editing_transfer_index, post_steps=post_steps,
                max_post_steps=max_post_steps, finished=torch.zeros(1, dtype=torch.bool))
    return records


def assert_same_steps(traj, records):
    """Our run (row 0) took diffusers' steps: the same commits, edits and canvas at each, and as many."""
    for s, rec in enumerate(records[:traj.n_steps]):
        assert traj.committed[s, 0].tolist() == rec["committed"].tolist(), f"step {s}: committed"
        assert traj.edited[s, 0].tolist() == rec["edited"].tolist(), f"step {s}: edited"
        assert traj.tokens[s + 1, 0].tolist() == rec["x"].tolist(), f"step {s}: canvas"
    assert traj.n_steps == len(records)


def ours_and_theirs(*, seed: int, model_seed: int, length: int, block_length: int, steps: int | None,
                    threshold: float | None, edit: float, temperature: float, top_k: int = 0, top_p: float = 1.0):
    """Our run and diffusers' of one setting: a schedule of `steps` per block (diffusers' threshold 1.0: none
    passes, its transfer schedule alone is our linear schedule), or threshold decoding (diffusers with
    num_inference_steps = block_length: at least one commit a step, every position above the threshold)."""
    model = ScriptedDenoiser(block_size=length, seed=model_seed)
    n_blocks = -(-length // block_length)
    knobs = dict(steps=steps * n_blocks, schedule="linear") if threshold is None else dict(threshold=threshold)
    ours = sample(model, SamplerConfig(block_length=block_length, temperature=temperature, top_k=top_k, top_p=top_p,
                                       edit_threshold=edit, **knobs), length=length, generator=gen(seed))
    theirs = diffusers_run(model, length=length, block_length=block_length, seed=seed,
                           steps=steps if threshold is None else block_length,
                           threshold=1.0 if threshold is None else threshold, editing_threshold=edit,
                           temperature=temperature, top_k=top_k or None, top_p=None if top_p >= 1 else top_p)
    return ours, theirs


def block_steps(records, block_length: int) -> list[tuple[int, int]]:
    """(filling steps, post steps) of each block of a diffusers run."""
    blocks = {}
    for rec, block in zip(records, _block_of_steps(records, block_length)):
        f, p = blocks.get(block, (0, 0))
        blocks[block] = (f + rec["filling"], p + (not rec["filling"]))
    return [blocks[b] for b in sorted(blocks)]


def _block_of_steps(records, block_length: int) -> list[int]:
    """The block each step worked on: the first block holding a [MASK] before the step, or, a post step,
    the block whose last [MASK] went before it."""
    blocks, before = [], torch.full_like(records[0]["x"], MASK)
    for rec in records:
        masked = np.flatnonzero((before == MASK).numpy())
        current = int(masked[0]) // block_length if rec["filling"] else blocks[-1]
        blocks.append(current)
        before = rec["x"]
    return blocks


SCHEDULED = [  # (block_length, steps per block, edit threshold, temperature, top_k, top_p)
    (4, 3, 0.5, 0.0, 0, 1.0),
    (4, 3, 0.5, 0.8, 0, 1.0),
    (3, 3, 0.4, 1.0, 3, 1.0),
    (4, 6, 0.5, 0.0, 0, 1.0),  # spare steps: 2 a block after its 4 commits
    (3, 5, 0.3, 0.7, 0, 0.9),
    (6, 8, 0.6, 1.3, 4, 0.95),
    (2, 4, 0.2, 0.5, 2, 1.0),
]


@pytest.mark.parametrize("case", SCHEDULED, ids=lambda c: "bl{}-S{}-e{}-T{}-k{}-p{}".format(*c))
@pytest.mark.parametrize("seed", [0, 1])
def test_schedule_decoding_edits_as_diffusers_block_refinement(case, seed):
    """Our linear schedule is diffusers' transfer schedule (block_length spread evenly over the steps, the
    first steps one more; 0 once the block's positions are spent) when its threshold can never be passed
    (1.0: nothing is > 1). A block filled at its last step takes no post step; one filled sooner (more
    steps than positions) spends its spare steps as diffusers does: post steps while they edit."""
    bl, steps, edit, temperature, top_k, top_p = case
    ours, theirs = ours_and_theirs(seed=seed, model_seed=seed + 3, length=12, block_length=bl, steps=steps,
                                   threshold=None, edit=edit, temperature=temperature, top_k=top_k, top_p=top_p)
    assert_same_steps(ours, theirs)
    if steps > bl:
        assert sum(p for _, p in block_steps(theirs, bl)) > 0  # spare steps became post steps


THRESHOLDS = [  # (block_length, commit threshold, edit threshold, temperature, top_k, top_p)
    (4, 0.6, 0.6, 0.0, 0, 1.0),
    (4, 0.95, 0.5, 0.0, 0, 1.0),  # one commit a step: blocks that take their whole budget
    (3, 0.7, 0.4, 0.9, 0, 1.0),
    (6, 0.5, 0.5, 1.2, 3, 1.0),
    (4, 0.99, 0.3, 0.6, 0, 0.9),
    (2, 0.8, 0.2, 1.0, 0, 1.0),
]


@pytest.mark.parametrize("case", THRESHOLDS, ids=lambda c: "bl{}-t{}-e{}-T{}-k{}-p{}".format(*c))
@pytest.mark.parametrize("seed", [0, 1, 4])
def test_threshold_decoding_edits_and_takes_post_steps_as_diffusers(case, seed):
    """diffusers with one commit per step at least (num_inference_steps = block_length) and a threshold is
    our threshold rule (every position above it, at least the best); a block filled in fewer steps than
    its positions takes post steps while they edit (at most max_post_steps + 1), one that used them all
    takes none (diffusers stops a block at its last step)."""
    bl, threshold, edit, temperature, top_k, top_p = case
    ours, theirs = ours_and_theirs(seed=seed, model_seed=seed, length=12, block_length=bl, steps=None,
                                   threshold=threshold, edit=edit, temperature=temperature, top_k=top_k, top_p=top_p)
    assert_same_steps(ours, theirs)


def test_the_cases_reach_a_full_budget_spare_steps_and_edits():
    """The cases above are not vacuous: under threshold decoding some block takes its whole budget (and
    then no post step) and some fills early; edits happen in filling steps and in post steps, at T = 0 and
    above; under a schedule with steps to spare, post steps follow and edit."""
    full = early = 0
    edits = {(filling, hot): 0 for filling in (True, False) for hot in (True, False)}
    for seed in (0, 1, 4):
        for bl, threshold, edit, temperature, top_k, top_p in THRESHOLDS:
            model = ScriptedDenoiser(block_size=12, seed=seed)
            theirs = diffusers_run(model, length=12, block_length=bl, steps=bl, threshold=threshold,
                                   editing_threshold=edit, temperature=temperature, top_k=top_k or None,
                                   top_p=None if top_p >= 1 else top_p, seed=seed)
            counts = block_steps(theirs, bl)
            full += sum(f == bl and p == 0 for f, p in counts)
            early += sum(f < bl and p > 0 for f, p in counts)
            for rec in theirs:
                edits[rec["filling"], temperature > 0] += bool(rec["edited"].any())
    assert full and early and all(edits.values()), (full, early, edits)
    spare = [block_steps(diffusers_run(ScriptedDenoiser(block_size=12, seed=3), length=12, block_length=bl,
                                       steps=steps, threshold=1.0, editing_threshold=edit), bl)
             for bl, steps, edit, *_ in SCHEDULED if steps > bl]
    assert all(p > 0 for counts in spare for _, p in counts)  # every block filled early takes a post step


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), bl=st.sampled_from([2, 3, 4, 5]), n_blocks=st.integers(1, 3),
       steps=st.integers(1, 7),
       threshold=st.sampled_from([None, 0.5, 0.8, 0.97]), edit=st.sampled_from([0.05, 0.3, 0.6, 0.9]),
       temperature=st.sampled_from([0.0, 0.5, 1.0, 1.7]), top_k=st.sampled_from([0, 2, 4]),
       top_p=st.sampled_from([1.0, 0.85]))
def test_property_random_scripted_logits_match_diffusers(seed, bl, n_blocks, steps, threshold, edit, temperature,
                                                          top_k, top_p):
    """Any scripted model, block length, schedule or threshold, edit threshold, temperature, top-k / top-p:
    the same steps as diffusers."""
    ours, theirs = ours_and_theirs(seed=seed, model_seed=seed % 97, length=bl * n_blocks, block_length=bl, steps=steps,
                                   threshold=threshold, edit=edit, temperature=temperature, top_k=top_k, top_p=top_p)
    assert_same_steps(ours, theirs)


def test_a_post_step_that_edits_nothing_ends_the_block():
    """Calm logits (little noise): the one post step of each block finds nothing to edit, and the next
    block starts from the same canvas, so it reuses that call's logits (no model call). A block that took
    one step per position (its whole budget) takes no post step at all."""
    model = ScriptedDenoiser(block_size=8, seed=3, noise=0.0)
    for threshold, post_steps in ((0.5, 2), (0.9, 0)):
        tr = sample(model, SamplerConfig(threshold=threshold, block_length=4, temperature=0, edit_threshold=0.5),
                    length=8)
        plain = sample(model, SamplerConfig(threshold=threshold, block_length=4, temperature=0), length=8)
        assert not tr.edited.any() and (tr.final == plain.final).all()
        assert tr.n_steps == plain.n_steps + post_steps  # a post step each block, or none
        assert tr.nfe == plain.nfe + (post_steps > 0)  # the last block's post step calls the model


def test_editing_off_changes_nothing():
    model = ScriptedDenoiser(block_size=10, seed=4)
    for config in (SamplerConfig(steps=6), SamplerConfig(threshold=0.7, block_length=5)):
        a = sample(model, config, length=10, generator=gen(5))
        b = sample(model, config.replace(edit_threshold=0.0), length=10, generator=gen(5))
        assert_same_run(a, b)
        assert not a.edited.any()


CASES = {
    "schedule": SamplerConfig(steps=6, edit_threshold=0.5, temperature=0.8),
    "schedule, spare steps, top-p": SamplerConfig(steps=15, block_length=4, edit_threshold=0.3, top_p=0.9),
    "cosine, spare steps, top-k": SamplerConfig(steps=18, block_length=3, schedule="cosine", edit_threshold=0.4,
                                                top_k=3, temperature=1.3),
    "remaining, revision": SamplerConfig(steps=9, block_length=4, schedule="remaining", edit_threshold=0.5,
                                         remask=0.3),
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


def test_packed_runs_with_editing_equal_their_solo_runs():
    """Runs with editing never merge (each block's post steps are its run's own count): they are packed,
    schedule, threshold and entropy-bound alike, and each run is its solo run."""
    model = ScriptedDenoiser(block_size=12, seed=7)
    configs = [SamplerConfig(steps=5, edit_threshold=0.5),
               SamplerConfig(steps=14, strategy="margin", edit_threshold=0.5),
               SamplerConfig(steps=12, strategy="random", edit_threshold=0.5, temperature=0),
               SamplerConfig(threshold=0.6, edit_threshold=0.5), SamplerConfig(entropy_bound=0.8, edit_threshold=0.5)]
    runs = [dict(config=c, batch_size=3, generator=gen(20 + i), record=False) for i, c in enumerate(configs)]
    assert merge_key(runs[0]) is None and merge_key(dict(runs[0], config=SamplerConfig(steps=5))) is not None
    assert _walks(runs, merge=True) == [[0], [1], [2], [3], [4]]
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


def test_a_schedule_plan_with_editing_guesses_its_rows_and_bounds_them():
    """Under a schedule, editing makes the step count the run's own (spare steps become post steps): the
    plan's rows are a guess and max_steps a bound the runs reach but never pass."""
    model = ScriptedDenoiser(block_size=8, seed=3)
    config = SamplerConfig(steps=12, block_length=4, edit_threshold=0.1, temperature=1.0)
    plan = plan_run(model, config, length=8)
    assert not plan.rows_exact and plan.rows == 13 and plan.max_steps == 2 * (4 + EDIT_POST_STEPS + 1)
    lengths = [sample(model, config, plan=plan, generator=gen(seed), record=False).n_steps for seed in range(4)]
    assert max(lengths) <= plan.max_steps and len(set(lengths)) > 1
    assert plan_run(model, config.replace(edit_threshold=0.0), length=8).rows_exact


def test_eos_is_still_committed_last_with_editing():
    """suppress_eos="confidence" scores a proposed EOS -inf: under editing's torch.topk pick it still ranks
    above the block's committed positions, so it commits last, once, and nothing is committed twice."""
    from tests.support.models import PROBS, MockDenoiser, table_from_probs

    class EosTokenizer(type(TOK)):
        eos_ids = [3]  # 'd'

    probs = [list(p) for p in PROBS]
    probs[2] = [0.05, 0.05, 0.0, 0.9]  # position 2 proposes EOS with the highest confidence of all
    model = MockDenoiser(table_from_probs(probs), tokenizer=EosTokenizer("abcd"))
    tr = sample(model, SamplerConfig(steps=6, temperature=0, suppress_eos="confidence", edit_threshold=0.5))
    assert tr.committed_at[0, 2] == 5 and tr.final[0, 2] == 3 and tr.committed.sum() == 6
