"""The resident walk (sampling/resident.py): a run planned on the host and stepped with no read of the
device gives the general walk's trajectory for every seed, and the generator ends where it ends there.
On the CPU the steps run eagerly; `replayable` runs them as a CUDA graph holds them (the model called at
every step, the temperature read from the table); on a GPU the graph itself is compared."""
from __future__ import annotations

import itertools

import pytest
import torch

from explorer.sampling import SamplerConfig, SamplingCancelled, resident, sample
from explorer.sampling.plan import plan_run
from tests.support.host_syncs import counting_syncs
from tests.support.models import adaln_patterns_model, assert_same_run, gen, make_model


@pytest.fixture(scope="module")
def model():
    return adaln_patterns_model()


def both(model, monkeypatch, config, replayable=False, **kwargs):
    """(the general walk's run, its generator's state, the resident walk's, its generator's state)."""
    out = []
    for wanted in ("off", "on"):
        monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", wanted)
        model.__dict__.pop("_resident_engines", None)
        if replayable:
            made = resident.engine_for
            monkeypatch.setattr(resident, "engine_for", lambda *a, **k: _replayable(made(*a, **k)))
        g = gen(config.seed)
        out += [sample(model, config, generator=g, **kwargs), g.get_state()]
        monkeypatch.undo() if replayable else None
    return out


def _replayable(engine):
    engine.replayable = True
    return engine


GRID = list(itertools.product(["confidence", "margin", "entropy", "random", "left_to_right"],
                              ["linear", "remaining", "cosine"], [0.0, 0.8]))


@pytest.mark.parametrize("strategy,schedule,temperature", GRID)
def test_the_resident_walk_is_the_general_walk(model, monkeypatch, strategy, schedule, temperature):
    """Every strategy and schedule, greedy and sampled, with blocks, top-k / top-p, annealing and more
    steps than positions (steps with nothing to commit): the same trajectory and generator state."""
    for steps, block_length, extra in ((16, 0, {}), (40, 0, {}), (9, 5, dict(top_k=4, top_p=0.9)),
                                       (12, 8, dict(temperature_end=0.3) if temperature else {})):
        config = SamplerConfig(strategy=strategy, schedule=schedule, temperature=temperature, steps=steps,
                               block_length=block_length, seed=5, **extra)
        general, g_state, fast, f_state = both(model, monkeypatch, config, on_step=lambda record: None)
        assert_same_run(fast, general)
        assert torch.equal(f_state, g_state)
        assert fast.nfe == general.nfe and fast.called_model.tolist() == general.called_model.tolist()


@pytest.mark.parametrize("record", [True, False])
def test_recorded_unrecorded_and_templates_as_the_general_walk(model, monkeypatch, record):
    tok = model.tokenizer
    template = tok.decode(tok.encode("ABC")) + "\u2588" * 8 + tok.decode(tok.encode("DE")) + "\u2588" * 6
    config = SamplerConfig(steps=10, temperature=1.0, strategy="margin", seed=2)
    general, _, fast, _ = both(model, monkeypatch, config, template=template, record=record)
    assert_same_run(fast, general)
    assert fast.texts()[0].startswith("ABC")


@pytest.mark.parametrize("strategy", ["confidence", "random"])
def test_the_graphs_ops_are_the_general_walk(model, monkeypatch, strategy):
    """What the CUDA graph holds (the model called at every step, even where the canvas did not change, and
    the temperature read from the step's table) gives the same run: an unchanged canvas gives the same
    logits, so the extra calls change nothing but the time."""
    config = SamplerConfig(steps=40, temperature=0.8, temperature_end=0.2, strategy=strategy, block_length=6,
                           top_p=0.95, seed=3)
    general, g_state, fast, f_state = both(model, monkeypatch, config, replayable=True,
                                           on_step=lambda record: None)
    assert_same_run(fast, general)
    assert torch.equal(f_state, g_state)


def test_a_step_reads_nothing_from_the_device(model, monkeypatch):
    """The steps themselves make no host read (the general walk makes one a step): on a GPU the host
    queues step after step; the rows reach the host behind them."""
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "on")
    model.__dict__.pop("_resident_engines", None)
    seen = []
    step, idle = resident.Engine.step, resident.Engine.idle

    def counted(run):
        def wrapper(self, *args):
            with counting_syncs() as counter:
                run(self, *args)
            seen.append(counter.total)
        return wrapper

    monkeypatch.setattr(resident.Engine, "step", counted(step))
    monkeypatch.setattr(resident.Engine, "idle", counted(idle))
    sample(model, SamplerConfig(steps=30, temperature=0.8, strategy="random", block_length=4), on_step=lambda r: None)
    assert len(seen) == 30 and sum(seen) == 0


def test_a_live_callback_sees_each_step_and_can_stop_the_run(model, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "on")
    seen = []
    traj = sample(model, SamplerConfig(steps=8, temperature=0.8), on_step=lambda r: seen.append(r.index))
    assert seen == list(range(8)) and traj.n_steps == 8
    with pytest.raises(SamplingCancelled) as stopped:
        sample(model, SamplerConfig(steps=8, temperature=0.8), on_step=lambda r: r.index < 3)
    assert stopped.value.step == 3
    # the engine is free again: the next run is whole
    assert sample(model, SamplerConfig(steps=8, temperature=0.8)).n_steps == 8


def test_engines_are_kept_per_run_shape(model, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "on")
    model.__dict__.pop("_resident_engines", None)
    for T in (0.5, 0.9, 1.3):  # a temperature is a table entry: one engine
        sample(model, SamplerConfig(steps=8, temperature=T))
    assert len(model._resident_engines) == 1
    for steps in range(1, 12):
        sample(model, SamplerConfig(steps=steps, temperature=0.5))
    assert len(model._resident_engines) == resident.MAX_ENGINES


@pytest.mark.parametrize("change", [
    dict(batch_size=2), dict(generator=[gen(0)]), dict(config=dict(threshold=0.9)), dict(config=dict(remask=0.2)),
    dict(config=dict(edit_threshold=0.5)), dict(config=dict(alg_temp=0.5)), dict(config=dict(factor=1.0)),
    dict(config=dict(entropy_bound=0.5)), dict(config=dict(temperature=0.8, temperature_end=0.0)),
])
def test_the_runs_it_does_not_take(model, monkeypatch, change):
    """Batches, per-row generators, adaptive step counts, revision, editing, Dream's alg_temp and a
    temperature annealed to 0 (a greedy step among sampled ones) take the general walk."""
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "on")
    config = SamplerConfig(steps=8, **change.get("config", {}))
    plan = plan_run(model, config, length=None)
    generator = change.get("generator", gen(0))
    assert resident.applies(model, SamplerConfig(steps=8), plan_run(model, SamplerConfig(steps=8)), 1, gen(0))
    assert not resident.applies(model, config, plan, change.get("batch_size", 1), generator)


def test_where_it_is_used(model, monkeypatch):
    plan = plan_run(model, SamplerConfig(steps=8))
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "auto")
    assert not resident.applies(model, SamplerConfig(steps=8), plan, 1, gen(0))  # a CPU model: the general walk
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "off")
    assert not resident.applies(model, SamplerConfig(steps=8), plan, 1, gen(0))
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "sometimes")
    with pytest.raises(ValueError, match="MDLM_EXPLORER_RESIDENT must be one of auto, on, off"):
        resident.mode()
    monkeypatch.setenv("MDLM_EXPLORER_RESIDENT", "on")
    big = make_model(vocab_size=resident.MAX_ENTRIES // 16 + 1, mask_id=0, block_size=16)
    assert not resident.applies(big, SamplerConfig(steps=8), plan_run(big, SamplerConfig(steps=8)), 1, gen(0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("strategy,temperature", [("random", 0.8), ("confidence", 0.8), ("margin", 0.0)])
def test_on_a_gpu_the_captured_step_is_the_general_walk(monkeypatch, strategy, temperature):
    """The step captured with the model's forward into one CUDA graph and replayed gives the general walk's
    run (whose forward replays from its own graph) bit for bit."""
    from explorer import graphs

    model = graphs.install(adaln_patterns_model().cuda())
    config = SamplerConfig(steps=20, temperature=temperature, strategy=strategy, top_p=0.95, seed=4)
    general, g_state, fast, f_state = both(model, monkeypatch, config, on_step=lambda record: None)
    assert_same_run(fast, general)
    assert torch.equal(f_state, g_state)
    assert [e.graph is not None for e in model._resident_engines.values()] == [True]
    again = sample(model, config)  # the engine's graph replayed for a second run
    assert again.texts() == general.texts()
