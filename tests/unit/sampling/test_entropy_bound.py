"""The entropy-bound rule (entropy_bound, EB-sampler; step.choose): on a mock with known entropies it
commits the longest run, in the strategy's order, whose entropies sum to at most the bound plus their
largest; its runs are adaptive like threshold runs, and batched and packed runs equal their solo runs."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.sampling import SamplerConfig, plan_run, sample, sample_many
from explorer.sampling.merged import merge_key
from tests.support.models import PROBS, MockDenoiser, assert_same_run, gen, table_from_probs
from tests.support.scripted import ScriptedDenoiser

# PROBS's entropies (nats) by position: .693 1.332 .394 .647 .940 1.306. In confidence order (2, 4, 3, 0, 1, 5)
# the sum minus the max of the first n is 0, .394, 1.041, 1.734, 2.674, 3.980; in entropy order (2, 3, 0, 4, 5, 1)
# it is the same (over other positions).


@pytest.mark.parametrize("strategy, bound, first", [
    ("confidence", 0.3, [2]), ("confidence", 0.5, [2, 4]), ("confidence", 1.1, [2, 3, 4]),
    ("confidence", 1.8, [0, 2, 3, 4]), ("confidence", 5.0, [0, 1, 2, 3, 4, 5]),
    ("entropy", 1.1, [0, 2, 3]), ("entropy", 2.0, [0, 2, 3, 4]),
])
def test_the_first_step_commits_the_longest_run_within_the_bound(strategy, bound, first):
    model = MockDenoiser(table_from_probs(PROBS))
    tr = sample(model, SamplerConfig(temperature=0, strategy=strategy, entropy_bound=bound))
    assert sorted(np.flatnonzero(tr.committed_at[0] == 0).tolist()) == first
    assert (tr.final[0] < 4).all() and tr.nfe == tr.n_steps  # decoded to the end, a model call a step


def test_at_least_one_position_commits_however_small_the_bound():
    model = MockDenoiser(table_from_probs(PROBS))
    tr = sample(model, SamplerConfig(temperature=0, entropy_bound=1e-9))
    assert tr.n_steps == 6 and (tr.committed.sum(axis=(1, 2)) == 1).all()


def test_entropy_bound_runs_are_adaptive_and_exclusive():
    config = SamplerConfig(entropy_bound=0.5)
    assert config.adaptive
    plan = plan_run(ScriptedDenoiser(block_size=8), config)
    assert plan.steps is None and not plan.rows_exact and plan.max_steps == 8
    for other in (dict(threshold=0.5), dict(factor=1.0)):
        with pytest.raises(ValueError, match="choose one of threshold, factor and entropy_bound"):
            SamplerConfig(entropy_bound=0.5, **other)
    with pytest.raises(ValueError, match="remask must be 0 when entropy_bound is set"):
        SamplerConfig(entropy_bound=0.5, remask=0.2)
    with pytest.raises(ValueError, match="entropy_bound must be in"):
        SamplerConfig(entropy_bound=0.0)  # off is None (the sidebar's 0)
    assert merge_key(dict(config=config, batch_size=2, record=False)) is None  # the merged walk has no such rule


@pytest.mark.parametrize("config", [SamplerConfig(entropy_bound=1.0, temperature=0.8),
                                    SamplerConfig(entropy_bound=0.4, strategy="margin", block_length=5),
                                    SamplerConfig(entropy_bound=2.0, strategy="random", temperature=1.3)],
                         ids=["confidence", "margin, blocks", "random"])
def test_batched_and_packed_rows_equal_their_solo_runs(config):
    model, seeds = ScriptedDenoiser(block_size=12, seed=9), [2, 7, 2]
    batch = sample(model, config, generator=[gen(s) for s in seeds])
    alone = [sample(model, config, generator=gen(s)) for s in seeds]
    for i, solo in enumerate(alone):
        assert_same_run(batch.row(i), solo)
    packed = sample_many(model, [dict(config=config, batch_size=2, generator=gen(s), record=False) for s in seeds])
    for s, got in zip(seeds, packed):
        assert_same_run(got, sample(model, config, batch_size=2, generator=gen(s), record=False))
