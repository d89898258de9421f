"""Host syncs per step, counted on the CPU (tests/support/host_syncs.py): on a GPU each read the host
makes of a device tensor (.item(), bool(), .tolist(), nonzero without a size, a copy to the host)
waits for the device, and at small batches those waits, not the kernels, are a step's time. The
sampler's design (sampler.py's docstring, "Host syncs"): one read a step whatever `record` is (a
recorded run keeps its steps on the device and copies them to the host once, at its end), plus one
copy of the step for an on_step callback; the merged walk one read a step."""
from __future__ import annotations

import pytest
import torch

from explorer.devices import to_device
from explorer.sampling import SamplerConfig, sample
from explorer.sampling.merged import merged_steps
from explorer.sampling.recorder import ON_STEP_COPIES
from tests.support.host_syncs import counting_syncs, per_step_syncs
from tests.support.models import adaln_patterns_model, gen


def worst(steps: list[dict]) -> int:
    assert len(steps) >= 4  # the runs below have steps enough to see the steady state
    return max(sum(s.values()) for s in steps)


@pytest.mark.parametrize("record", [False, True])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("batch_size", [1, 32])
def test_a_step_reads_the_device_as_often_recorded_or_not(monkeypatch, record, temperature, batch_size):
    """Once a step (_read_step, which also reads whether a batch's rows are one canvas: call_model asked
    the device before each model call, one wait more). Recording adds nothing inside a step: its copies
    to the host (six a step before, seven with token editing) are one, when the run ends."""
    model = adaln_patterns_model()
    config = SamplerConfig(steps=8, temperature=temperature, strategy="margin")
    with torch.no_grad(), per_step_syncs(monkeypatch) as steps:
        sample(model, config, batch_size=batch_size, record=record)
    assert worst(steps) == 1, steps


@pytest.mark.parametrize("batch_size", [1, 32])
def test_a_recorded_run_copies_its_steps_to_the_host_once(batch_size):
    model = adaln_patterns_model()
    config = SamplerConfig(steps=8, temperature=1.0, remask=0.2, block_length=12)
    with torch.no_grad():
        with counting_syncs() as off:
            plain = sample(model, config, batch_size=batch_size, record=False)
        with counting_syncs() as on:
            recorded = sample(model, config, batch_size=batch_size, record=True)
    assert on.total == off.total + 1, (dict(off.names), dict(on.names))
    assert (recorded.final == plain.final).all() and recorded.tokens.shape == (recorded.n_steps + 1, batch_size, 24)
    assert (recorded.tokens[-1] == recorded.final).all() and recorded.scores.dtype.name == "float32"


def test_a_step_handed_to_on_step_is_one_copy_more(monkeypatch):
    """The dashboard's live rows: every step's arrays reach the host at once, in one copy (to_host)."""
    model = adaln_patterns_model()
    seen = []
    with torch.no_grad(), per_step_syncs(monkeypatch) as steps:
        sample(model, SamplerConfig(steps=8, temperature=1.0), on_step=seen.append)
    assert worst(steps) == 1 + ON_STEP_COPIES, steps
    assert len(seen) == 8 and seen[-1].tokens.dtype.name == "int64" and seen[-1].committed.dtype == bool


def test_a_batched_step_with_blocks_and_revision_reads_once(monkeypatch):
    """Whether all rows are one canvas (call_model computes them as one row) comes with the step's read."""
    model = adaln_patterns_model()
    for record in (False, True):
        with torch.no_grad(), per_step_syncs(monkeypatch) as steps:
            sample(model, SamplerConfig(steps=8, temperature=1.0, remask=0.2, block_length=12), batch_size=5,
                   record=record)
        assert worst(steps) == 1, steps


def test_a_step_with_one_generator_per_row_reads_once_plus_its_rows_facts(monkeypatch):
    """Plus the rows' t (one copy: the run records each row's own t)."""
    model = adaln_patterns_model()
    with torch.no_grad(), per_step_syncs(monkeypatch) as steps:
        sample(model, SamplerConfig(steps=8, temperature=1.0), generator=[gen(1), gen(2), gen(3)], record=False)
    assert worst(steps) == 2, steps


def test_a_merged_walk_reads_the_device_once_a_step(monkeypatch):
    model = adaln_patterns_model()
    runs = [dict(config=SamplerConfig(steps=s, strategy=st, temperature=1.0), batch_size=n, generator=gen(i),
                 record=False) for i, (s, st, n) in enumerate([(3, "confidence", 4), (8, "random", 2), (6, "margin", 3)])]
    with torch.no_grad(), per_step_syncs(monkeypatch) as steps:
        walk = merged_steps(model, runs, lambda k, result: None)
        for calls in walk:  # the model called directly: only the walk's own reads are counted
            for call in calls:
                call.logits = model(call.x, call.t)
    assert worst(steps) == 1, steps


def test_a_merged_walk_of_streamed_runs_copies_each_step_to_the_host_once(monkeypatch):
    """A class's runs merged in the dashboard's queue each hand every step to their page (on_step): the step
    of all of them goes to the host in one copy, so a step waits for the device twice (its statistics and
    that copy) however many runs stream, not once per run; a greedy run among sampled ones adds none."""
    model = adaln_patterns_model()
    seen = []
    runs = [dict(config=SamplerConfig(steps=8, strategy=st, temperature=T), batch_size=1, generator=gen(i),
                 record=True, on_step=seen.append)
            for i, (st, T) in enumerate([("confidence", 1.0), ("random", 0.7), ("margin", 1.3), ("entropy", 0.0)])]
    with torch.no_grad(), per_step_syncs(monkeypatch) as steps:
        walk = merged_steps(model, runs, lambda k, result: None)
        for calls in walk:
            for call in calls:
                call.logits = model(call.x, call.t)
    assert len(seen) == 4 * 8  # every run's every step reached its callback
    assert worst(steps) == 2, steps  # one copy per run was five a step here


def test_to_device_keeps_a_cpu_tensor_and_its_values_on_the_cpu():
    """devices.to_device is the plain copy off a GPU: the CPU path is unchanged (same tensor, same values)."""
    u = torch.rand(5, dtype=torch.float64, generator=gen(0))
    assert to_device(u, "cpu") is u
    assert to_device(u, torch.device("cpu")).equal(u)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("strategy", ["random", "confidence"])
def test_on_a_gpu_a_step_waits_for_the_device_once(strategy):
    """CUDA's own count (set_sync_debug_mode warns at each stream synchronisation): a recorded run of S steps
    waits about S times, its reads, not 3 S. The uniforms drawn on the CPU go to the GPU from page-locked
    memory (devices.to_device): a copy from pageable memory synchronises the stream first, two a step."""
    import warnings

    model = adaln_patterns_model().cuda()
    config = SamplerConfig(steps=16, temperature=0.8, strategy=strategy)
    with torch.no_grad():
        want = sample(model, config, generator=gen(4))  # also a warm-up: first CUDA calls set up their state
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                got = sample(model, config, generator=gen(4))
            finally:
                torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message)]
    assert len(syncs) <= config.steps + 4, len(syncs)
    assert (got.final == want.final).all()  # the copies change no draw
