"""Merged runs (sampling/merged.py): runs that differ only in steps, strategy, schedule,
temperature and seed step as one batch inside sample_many, and each still returns exactly what sample()
returns for it alone; runs that cannot merge exactly are never merged."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.sampling import SamplerConfig, sample, sample_many
from explorer.sampling.merged import merge_key
from explorer.sampling.packing import _walks
from tests.support.models import make_model
from tests.support.models import assert_same_run
from tests.support.models import adaln_patterns_model, CountingModel, gen

GRID = [SamplerConfig(steps=steps, strategy=strategy, schedule=schedule, temperature=temperature, top_k=9)
        for steps, strategy, schedule, temperature in [
            (1, "confidence", "linear", 1.0), (3, "random", "seed", 0.7), (7, "margin", "cosine", 1.3),
            (24, "entropy", "linear", 0.0), (5, "left_to_right", "seed", 1.0), (12, "confidence", "cosine", 0.0),
            (32, "random", "linear", 1.0), (2, "confidence", "seed", 1.0)]]


def runs_of(configs, sizes, **extra):
    return [dict(config=c, batch_size=n, generator=gen(40 + i), record=False, **extra)
            for i, (c, n) in enumerate(zip(configs, sizes))]


@pytest.mark.slow
@pytest.mark.parametrize("template", [None, "AB█CD[___]E"])
def test_merged_runs_equal_their_solo_runs(template):
    model = CountingModel(adaln_patterns_model())
    sizes = [3, 20, 7, 16, 1, 30, 18, 5]  # below and above packing's MIN_PACK_ROWS
    runs = runs_of(GRID, sizes, template=template)
    assert _walks(runs, merge=True) == [list(range(len(GRID)))]  # one batch for all eight
    merged = sample_many(model, runs)
    merged_calls, model.calls = model.calls, 0
    for i, (config, n) in enumerate(zip(GRID, sizes)):
        assert_same_run(merged[i], sample(model, config, batch_size=n, generator=gen(40 + i), record=False,
                                          template=template))
    assert merged_calls < model.calls  # and the calls were still shared
    if template is not None:
        assert all(t.final[:, :2].tolist() == [[0, 1]] * t.final.shape[0] for t in merged)  # "AB" kept


@pytest.mark.parametrize("template", [None, "AB█CD[___]E"])
def test_recorded_merged_runs_equal_their_solo_runs_step_for_step(template):
    """With record=True and an on_step callback (the dashboard's runs), every group's recorded steps and
    each record handed to its on_step are its solo run's."""
    model = adaln_patterns_model()
    sizes = [2, 1, 3, 1, 1, 2, 1, 1]
    streamed = {i: [] for i in range(len(GRID))}
    runs = [dict(config=c, batch_size=n, generator=gen(40 + i), record=True,
                 on_step=lambda rec, i=i: streamed[i].append(rec), template=template)
            for i, (c, n) in enumerate(zip(GRID, sizes))]
    assert _walks(runs, merge=True) == [list(range(len(GRID)))]
    merged = sample_many(model, runs)
    for i, (config, n) in enumerate(zip(GRID, sizes)):
        alone = []
        want = sample(model, config, batch_size=n, generator=gen(40 + i), template=template, on_step=alone.append)
        assert_same_run(merged[i], want)
        assert len(streamed[i]) == len(alone) == want.n_steps
        for got, rec in zip(streamed[i], alone):
            for field in ("index", "tokens", "proposals", "scores", "confidence", "committed", "remasked", "t",
                          "temperature", "called_model"):
                a, b = getattr(got, field), getattr(rec, field)
                assert np.array_equal(a, b, equal_nan=True) if isinstance(b, np.ndarray) else a == b, (i, field)
    # recorded on the device, to the host once at the end (fresh generators: the first pack drew from them)
    kept = [dict(r, on_step=None, generator=gen(40 + i)) for i, r in enumerate(runs)]
    for i, traj in enumerate(sample_many(model, kept)):
        assert_same_run(traj, sample(model, GRID[i], batch_size=sizes[i], generator=gen(40 + i), template=template))


def test_only_exact_merges_are_made():
    """Runs whose sampling merged.py does not reproduce exactly stay alone (and packed)."""
    base = dict(config=SamplerConfig(), batch_size=4, record=False)
    assert merge_key(base) is not None
    assert merge_key(dict(base, config=SamplerConfig(steps=5, strategy="random", seed=3))) == merge_key(base)
    for other in (SamplerConfig(top_p=0.9), SamplerConfig(top_k=3)):  # shared knobs: another batch
        assert merge_key(dict(base, config=other)) not in (None, merge_key(base))
    assert merge_key(dict(base, length=12)) != merge_key(base)
    for config in (SamplerConfig(threshold=0.5), SamplerConfig(factor=1.0), SamplerConfig(remask=0.2),
                   SamplerConfig(block_length=4), SamplerConfig(alg_temp=0.5), SamplerConfig(temperature_end=0.2),
                   SamplerConfig(cfg_scale=1.0), SamplerConfig(suppress_eos="both")):
        assert merge_key(dict(base, config=config)) is None, config
    assert merge_key(dict(base, record=True)) == merge_key(base)  # recorded and streamed runs merge too
    assert merge_key(dict(base, on_step=lambda rec: None)) == merge_key(base)
    assert merge_key(dict(base, generator=[gen(0), gen(1)], batch_size=None)) is None


def test_a_mixed_pack_merges_what_it_can_and_every_run_is_its_solo_run():
    model = adaln_patterns_model()
    configs = [SamplerConfig(steps=4), SamplerConfig(threshold=0.3), SamplerConfig(steps=9, strategy="random"),
               SamplerConfig(steps=6, block_length=8)]
    runs = runs_of(configs, [10, 10, 10, 10])
    assert _walks(runs, merge=True) == [[0, 2], [1], [3]]
    done = []
    trajs = sample_many(model, runs, on_finish=lambda i, t: done.append(i))
    assert sorted(done) == [0, 1, 2, 3] and done.index(0) < done.index(2)  # 4 steps end before 9
    for i, config in enumerate(configs):
        assert_same_run(trajs[i], sample(model, config, batch_size=10, generator=gen(40 + i), record=False))


def test_a_cancelled_merged_run_is_none_and_the_others_finish():
    model = adaln_patterns_model()
    steps_seen = []

    def stop_after_two():
        steps_seen.append(1)
        return len(steps_seen) >= 2

    runs = runs_of([SamplerConfig(steps=8), SamplerConfig(steps=8, strategy="random")], [6, 6])
    runs[0]["should_stop"] = stop_after_two
    trajs = sample_many(model, runs)
    assert trajs[0] is None and trajs[1] is not None
    assert_same_run(trajs[1], sample(model, runs[1]["config"], batch_size=6, generator=gen(41), record=False))
    done = []
    runs = runs_of([SamplerConfig(steps=8), SamplerConfig(steps=12)], [6, 6], should_stop=lambda: True)
    assert sample_many(model, runs, on_finish=lambda i, t: done.append((i, t))) == [None, None]  # all cancelled
    assert sorted(done, key=lambda d: d[0]) == [(0, None), (1, None)]


def test_merging_can_be_switched_off_with_the_same_results():
    model = adaln_patterns_model()
    runs = runs_of(GRID[:4], [8, 8, 8, 8])
    merged = sample_many(model, runs)
    alone = sample_many(model, runs_of(GRID[:4], [8, 8, 8, 8]), merge=False)
    for a, b in zip(merged, alone):
        assert np.array_equal(a.final, b.final) and a.nfe == b.nfe and np.array_equal(a.step_t, b.step_t)
    assert torch.equal(torch.as_tensor(merged[0].committed_at), torch.as_tensor(alone[0].committed_at))


def test_a_groups_masked_count_is_recovered_exactly_from_its_float32_t():
    """merged._statistics reads each group's t (a float32 mean of 0/1 values, as the run alone computes
    it) and takes its masked count as round(t x positions) instead of reducing again on the device: exact
    for any count up to 2^24 positions, whether the mean divides by N (CPU) or multiplies by 1/N (CUDA)."""
    rng = np.random.default_rng(0)
    for N in [1, 2, 3, 24, 720, 12_960, 99_991, 2**20 + 7, 2**24]:
        counts = np.unique(np.concatenate([[0, 1, N - 1, N], rng.integers(0, N + 1, 2000)]))
        divided = (counts.astype(np.float32) / np.float32(N)).astype(np.float32)
        multiplied = (counts.astype(np.float32) * (np.float32(1) / np.float32(N))).astype(np.float32)
        for t in (divided, multiplied):
            assert (np.round(t.astype(np.float64) * N).astype(np.int64) == counts).all(), N


class RowsModel(torch.nn.Module):
    """Wraps a model, keeping each call's row count (rows that no longer differ may be computed once:
    packing._distinct_rows, so a call can see fewer rows than its runs hold, never more)."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.config, self.rows = inner, inner.config, []

    def forward(self, x, t=None):
        self.rows.append(x.shape[0])
        return self.inner(x, t)


@pytest.mark.slow
def test_a_large_vocabularys_logits_budget_cuts_merged_walks_and_runs_under_way_with_the_same_results():
    """A merged walk holds (rows, L, V) float32 logits for all its runs at once: with a real dLLM's
    vocabulary a sweep's grid merged whole ran out of memory (benchmarks/bench_sweep_memory.py). The
    budget (logits_in_flight, bytes) cuts walks and runs under way to it; every run is still its solo run."""
    model = RowsModel(make_model(vocab_size=2000, mask_id=1999, block_size=8, n_embd=32))
    configs = [SamplerConfig(steps=4), SamplerConfig(steps=4, strategy="random"),
               SamplerConfig(steps=4, temperature=0.5), SamplerConfig(steps=4, strategy="margin")]
    one_run = 16 * 8 * 2000 * 4  # rows x length x vocabulary x float32 bytes
    assert _walks(runs_of(configs, [16] * 4), True, [16 * 8] * 4, 2 * 16 * 8) == [[0, 1], [2, 3]]
    assert _walks(runs_of(configs, [16] * 4), True, [16 * 8] * 4, 8) == [[0], [1], [2], [3]]  # one always fits
    whole = sample_many(model, runs_of(configs, [16] * 4), logits_in_flight=1 << 40)
    assert max(model.rows) > 32  # the four runs' calls shared
    for budget, most_rows in ((2 * one_run, 32), (one_run // 2, 16)):
        model.rows = []
        cut = sample_many(model, runs_of(configs, [16] * 4), logits_in_flight=budget)
        assert 16 <= max(model.rows) <= most_rows, budget
        for a, b in zip(whole, cut):
            assert_same_run(a, b)
    for i, config in enumerate(configs):
        assert_same_run(whole[i], sample(model, config, batch_size=16, generator=gen(40 + i), record=False))


@pytest.mark.parametrize("knob", ["tokens_per_call", "tokens_in_flight", "logits_in_flight"])
def test_sample_many_refuses_a_limit_that_is_not_a_positive_whole_number(knob):
    model = adaln_patterns_model()
    for bad in (0, -5, 2.5):
        with pytest.raises(ValueError, match=f"{knob} must be a positive whole number"):
            sample_many(model, runs_of(GRID[:2], [4, 4]), **{knob: bad})
