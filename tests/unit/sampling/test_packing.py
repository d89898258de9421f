"""Packed model calls: sample_many advances many sampler runs together and serves their model
calls with shared ones; every run still returns exactly what sample() returns for it alone, and a packed
sweep's table equals the cell-after-cell one in every column but the timings."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import torch

from explorer.experiments import SweepCancelled, sweep
from explorer.sampling import SamplerConfig, sample, sample_many
from explorer.sampling.packing import CPU_CALL_TOKENS, MIN_PACK_ROWS, _in_cpu_calls, _serve, _units
from explorer.sampling.sampler import ModelCall, call_model
from tests.support.models import CountingModel, adaln_patterns_model, assert_same_run, gen, make_model

TIMING = ["seconds", "solo_seconds", "tokens_per_s", "ms_per_sample"]
# the sweep of "Sampling Strategies & Speed Tradeoffs"
STRATEGY_SWEEP = {"steps": [1, 2, 3, 5, 8, 12, 16, 24, 32], "strategy": ["confidence", "random"]}


def test_on_the_cpu_a_shared_calls_rows_go_through_the_model_in_near_equal_calls_of_enough_rows():
    """_in_cpu_calls: about CPU_CALL_TOKENS per model call, never fewer than MIN_PACK_ROWS rows a call, and
    every row's logits exactly those of one call of all the rows."""
    model = CountingModel(adaln_patterns_model())
    L = model.config.block_size
    for rows, calls in [(CPU_CALL_TOKENS // L, 1), (CPU_CALL_TOKENS // L + 50, 2), (3 * CPU_CALL_TOKENS // L, 3),
                        (MIN_PACK_ROWS + 3, 1)]:
        x = torch.randint(0, model.config.mask_id + 1, (rows, L), generator=gen(rows))
        t = torch.rand(rows, generator=gen(rows))
        model.calls, model.rows = 0, []
        with torch.no_grad():
            out, whole = _in_cpu_calls(model, x, t), model.inner(x, t)
        assert model.calls == calls and sum(model.rows) == rows and min(model.rows) >= MIN_PACK_ROWS
        assert max(model.rows) - min(model.rows) <= 1 and torch.equal(out, whole)


def test_a_calls_logits_do_not_depend_on_what_shares_its_model_call():
    model = adaln_patterns_model()
    L, mask = 24, model.config.mask_id
    rand = torch.Generator().manual_seed(0)

    def call(B, masked_frac=0.5):
        x = torch.randint(0, mask, (B, L), generator=rand)
        x[torch.rand((B, L), generator=rand) < masked_frac] = mask
        return ModelCall(x, (x == mask).float().mean(dim=1))

    all_masked = ModelCall(torch.full((30, L), mask), torch.ones(30))
    calls = [call(30), call(MIN_PACK_ROWS), call(2), call(5), all_masked, call(40, 0.9),
             ModelCall(torch.full((7, L), mask), torch.ones(7))]
    calls.append(ModelCall(calls[0].x.clone(), calls[0].t.clone()))  # another run asking the same
    units = _units(calls, tokens_per_call=2000)  # small: the 30 + 16 + 40 rows need two shared calls
    with torch.no_grad():
        for unit in units:
            _serve(model, unit)
        for c in calls:
            alone = call_model(model, c.x, c.t)  # (B, L, V) what the call's own run computes
            assert torch.equal(c.logits, alone), f"{tuple(c.x.shape)}: off by {(c.logits - alone).abs().max()}"
    assert all(c.seconds is not None and c.seconds >= 0 for c in calls)
    shared = [u for u in units if len(u.groups) > 1]
    assert shared and all(g[0].x.shape[0] >= MIN_PACK_ROWS for u in shared for g in u.groups)
    one_row = [u for u in units if u.one_row]
    assert len(one_row) == 1 and len(one_row[0].groups[0]) == 2  # both all-[MASK] calls: one row
    assert len(units) == 2 + 1 + 2  # two shared calls (the duplicate rides along), the one row, 2 and 5 rows alone


RUNS = [  # different step counts, strategies, schedules, generators, batch sizes and canvases
    dict(config=SamplerConfig(steps=1), batch_size=20),
    dict(config=SamplerConfig(steps=6, strategy="random"), batch_size=20),
    dict(config=SamplerConfig(steps=6), batch_size=20),  # random vs confidence: same first call
    dict(config=SamplerConfig(steps=11, strategy="margin", schedule="cosine", temperature_end=0.3), batch_size=17),
    dict(config=SamplerConfig(steps=9, remask=0.3, remask_t_on=0.9, block_length=8), batch_size=16),
    dict(config=SamplerConfig(threshold=0.075, temperature=0.7), generator=[gen(s) for s in range(18)]),
    dict(config=SamplerConfig(steps=4, temperature=0), batch_size=3),  # too few rows to share a call
    dict(config=SamplerConfig(steps=5, strategy="entropy"), batch_size=16, template="ABC█[___]C[___]"),
    dict(config=SamplerConfig(steps=7, strategy="left_to_right"), batch_size=16, length=12),
]


def fresh(run: dict) -> dict:
    """The run with new generators (they are consumed by sampling)."""
    run = dict(run)
    if isinstance(run.get("generator"), list):
        run["generator"] = [gen(s) for s in range(len(run["generator"]))]
    return run


@pytest.mark.slow
def test_every_packed_run_equals_its_solo_run_record_and_all():
    model = CountingModel(adaln_patterns_model())
    packed = sample_many(model, [fresh(r) for r in RUNS])
    shared_calls, shared_rows = model.calls, list(model.rows)
    model.calls, model.rows = 0, []
    for run, got in zip(RUNS, packed):
        assert_same_run(got, sample(model, **fresh(run)))  # every step's scores, proposals, confidence...
    assert shared_calls < model.calls and sum(shared_rows) < sum(model.rows)
    assert max(shared_rows) > max(model.rows)  # packed calls carried several runs' rows
    assert packed[5].row_steps.min() < packed[5].row_steps.max()  # threshold rows did walk apart


def test_packed_runs_seconds_add_up_to_the_packs_wall_time():
    model = adaln_patterns_model()
    start = time.perf_counter()
    trajs = sample_many(model, [dict(fresh(r), record=False) for r in RUNS])
    wall = time.perf_counter() - start
    # each run is charged its own steps and its share of each shared call, never its neighbours' work
    assert 0 < sum(t.seconds for t in trajs) <= wall
    for t in trajs:
        assert 0 < t.step_seconds.sum() <= t.seconds


def test_time_a_run_waits_in_its_cancel_check_is_not_its_own():
    """A dashboard task's cancel check is where it lends the device to other sessions' runs
    (runtime.tasks.Job.cancelled): what it waits there is left out of the run's seconds, alone, packed
    and merged, so a sweep's speed columns and the rate measured from them are the sweep's."""
    model = adaln_patterns_model()
    waited = []

    def lend():
        began = time.perf_counter()
        time.sleep(0.005)  # another session's run has the device meanwhile
        waited.append(time.perf_counter() - began)
        return False

    start = time.perf_counter()
    alone = sample(model, SamplerConfig(steps=6), batch_size=4, record=False, should_stop=lend)
    wall = time.perf_counter() - start
    assert len(waited) == 6 and 0 < alone.step_seconds.sum() <= alone.seconds <= wall - sum(waited)
    waited.clear()
    start = time.perf_counter()
    trajs = sample_many(model, [dict(fresh(r), record=False, should_stop=lend) for r in RUNS])
    wall = time.perf_counter() - start
    assert waited and 0 < sum(t.seconds for t in trajs) <= wall - sum(waited)
    for t in trajs:
        assert 0 < t.step_seconds.sum() <= t.seconds


def test_runs_in_flight_are_limited_and_results_do_not_change():
    model = CountingModel(adaln_patterns_model())
    runs = [dict(config=SamplerConfig(steps=s, strategy=st), batch_size=20) for s in (2, 5) for st in ("confidence", "random")]
    wide = sample_many(model, [fresh(r) for r in runs])
    assert max(model.rows) == 80  # the four runs' second calls (their all-[MASK] first: one row)
    model.rows, order = [], []
    narrow = sample_many(model, [fresh(r) for r in runs], tokens_in_flight=2 * 20 * 24,
                         on_finish=lambda i, traj: order.append(i))
    assert max(model.rows) == 40 and order == [0, 1, 2, 3]
    for a, b in zip(wide, narrow):
        assert np.array_equal(a.final, b.final) and a.nfe == b.nfe


def test_bad_runs_fail_before_anything_runs():
    model = CountingModel(adaln_patterns_model())
    with pytest.raises(ValueError, match="batch_size"):
        sample_many(model, [dict(config=SamplerConfig()), dict(config=SamplerConfig(), batch_size=0)])
    with pytest.raises(ValueError, match="unknown strategy"):
        sample_many(model, [dict(config={"strategy": "bogus"})])
    assert model.calls == 0
    with pytest.raises(ValueError, match="diffusion model"):
        sample_many(make_model(kind="ar"), [dict(config=SamplerConfig())])


@pytest.mark.slow
def test_packed_strategy_sweep_equals_cell_after_cell_and_each_batch_its_solo_run():
    model = CountingModel(adaln_patterns_model())
    base = SamplerConfig(schedule="remaining")
    # time_alone=False: the calls counted are the sweeps' own (each cell's timed solo run adds the same to both)
    packed, packed_summary = sweep(model, base, STRATEGY_SWEEP, n_samples=30, seed=0, time_alone=False)
    packed_calls, model.calls = model.calls, 0
    alone, alone_summary = sweep(model, base, STRATEGY_SWEEP, n_samples=30, seed=0, pack=False, time_alone=False)
    # 1 warm-up + 24 shared calls, whose distinct rows the CPU computes in calls of about
    # packing.CPU_CALL_TOKENS (53 model calls in all), vs 1 + 190
    assert packed_calls < model.calls / 3
    pd.testing.assert_frame_equal(packed.drop(columns=TIMING), alone.drop(columns=TIMING))
    pd.testing.assert_frame_equal(packed_summary.drop(columns=[c for c in packed_summary if c.startswith(tuple(TIMING))]),
                                  alone_summary.drop(columns=[c for c in alone_summary if c.startswith(tuple(TIMING))]))
    for (steps, strategy), rows in packed.groupby(["steps", "strategy"]):
        solo = sample(model, base.replace(steps=int(steps), strategy=strategy), batch_size=30, generator=gen(0),
                      record=False)
        assert list(rows["text"]) == [model.tokenizer.decode(r) for r in solo.final]
        assert (rows["nfe"] == solo.nfe).all()
    assert (packed["seconds"] > 0).all() and packed["tokens_per_s"].notna().all()


def test_packed_sweep_cancel_mid_sweep_keeps_the_finished_batches():
    # call 1 is the warm-up, call 2 every run's shared all-[MASK] row (the 1-step cell is then done),
    # call 3 the 4- and 64-step cells' second calls: the cancel trips there, and both stop after that step
    model = CountingModel(adaln_patterns_model(), trip_at=3)
    base = SamplerConfig(schedule="remaining")
    with pytest.raises(SweepCancelled) as info:
        sweep(model, base, {"steps": [1, 4, 64]}, n_samples=20, cancel=model.stop)
    assert model.calls == 3 and info.value.done == 20 and info.value.total == 60
    table = info.value.table
    full = sweep(adaln_patterns_model(), base, {"steps": [1]}, n_samples=20)[0]
    pd.testing.assert_frame_equal(table.drop(columns=TIMING), full.drop(columns=TIMING))
    with pytest.raises(SweepCancelled) as info:  # cancelled before it starts: nothing runs
        sweep(model, base, {"steps": [1, 4]}, n_samples=20, cancel=lambda: True)
    assert info.value.done == 0 and info.value.table.empty


def test_the_grouping_keys_come_from_one_host_copy_per_canvas_length():
    """Off the CPU, _groups reads every call's canvas and t from one copy per canvas length (each
    copy to the host waits for the device); the copies are each call's own rows, in order."""
    from explorer.sampling.packing import _groups, host_copies

    g = torch.Generator().manual_seed(0)
    calls = [ModelCall(torch.randint(0, 9, (rows, length), generator=g), torch.rand(rows, generator=g))
             for rows, length in ((3, 8), (1, 5), (4, 8), (2, 5), (1, 8))]
    calls.append(ModelCall(calls[0].x.clone(), calls[0].t.clone()))  # identical to the first: one group
    copied = host_copies(calls)
    assert all(torch.equal(x, c.x) and torch.equal(t, c.t) for (x, t), c in zip(copied, calls))
    assert [len(group) for _, group in _groups(calls)] == [2, 1, 1, 1, 1]
