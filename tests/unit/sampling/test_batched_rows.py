"""One generator per row: row i of a batched run is exactly the run of row i alone (one
batched call serves many sessions, and each gets its solo result).

The tiny models here have no time conditioning: their per-row arithmetic does not depend on the batch
size. (A CPU matmul with few rows, such as an adaLN time embedding of shape (B, C), can round
differently for different B: then the sampler still draws exactly the same noise per row, but the
logits may differ in the last bit.)
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from explorer.data.tokenizer import CharTokenizer
from explorer.sampling import SamplerConfig, StepRecord, sample, sample_ar
from tests.support.models import assert_same_run, make_model

TOK = CharTokenizer("abcdefghij")  # ids 0-9, [MASK] = 10


def tiny(kind="diffusion"):
    model = make_model(vocab_size=TOK.vocab_size, mask_id=TOK.mask_id, block_size=16, kind=kind)
    model.tokenizer = TOK
    return model


def gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


CASES = {
    "confidence": SamplerConfig(steps=6),
    "random, hot": SamplerConfig(steps=5, strategy="random", temperature=1.5, top_k=6),
    "margin, top-p, annealed": SamplerConfig(steps=7, strategy="margin", top_p=0.8, temperature_end=0.2),
    "entropy, greedy, blocks": SamplerConfig(steps=8, strategy="entropy", temperature=0, block_length=5),
    "remask": SamplerConfig(steps=10, remask=0.3, remask_t_on=0.9, schedule="cosine"),
    "random + remask + blocks": SamplerConfig(steps=9, strategy="random", remask=0.5, block_length=6),
    "threshold": SamplerConfig(threshold=0.1, temperature=1.2),  # rows take 5, 4, 5, 4 steps
    "threshold, blocks, annealed": SamplerConfig(threshold=0.2, block_length=4, temperature=1.5,
                                                 temperature_end=0.3, strategy="random"),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("template", [None, "ab█c[___]█d██"])
def test_each_row_is_its_solo_run(name, template):
    model, config, seeds = tiny(), CASES[name], [3, 11, 3, 42]
    batch = sample(model, config, generator=gens(seeds), template=template)
    assert batch.batch_size == len(seeds)
    for i, seed in enumerate(seeds):
        solo = sample(model, config, generator=gens([seed])[0], template=template)
        assert_same_run(batch.row(i), solo)
    if config.threshold is not None and template is None:  # rows did take different step counts
        assert batch.n_steps == batch.row_steps.max() > batch.row_steps.min()


def test_live_records_give_each_row_its_solo_records():
    model, config = tiny(), SamplerConfig(threshold=0.25, strategy="random", block_length=6)
    live: list[StepRecord] = []
    sample(model, config, generator=gens([1, 2]), on_step=live.append)
    for i, seed in enumerate([1, 2]):
        solo: list[StepRecord] = []
        sample(model, config, generator=gens([seed])[0], on_step=solo.append)
        mine = [r.row(i) for r in live if r.row_active[i]]
        assert len(mine) == len(solo)
        for a, b in zip(mine, solo):
            for f in dataclasses.fields(b):
                if f.name != "seconds":
                    x, y = getattr(a, f.name), getattr(b, f.name)
                    assert (np.array_equal(x, y, equal_nan=x.dtype.kind == "f") if isinstance(y, np.ndarray)
                            else x == y), f.name


def test_single_generator_runs_record_no_per_row_facts():
    tr = sample(tiny(), SamplerConfig(steps=4), batch_size=2)
    assert tr.row_t is None and tr.row_steps is None
    assert np.array_equal(tr.row(1).final, tr.final[1:])


def test_generator_list_errors():
    model = tiny()
    with pytest.raises(ValueError, match="does not match"):
        sample(model, SamplerConfig(), generator=gens([1, 2]), batch_size=3)
    with pytest.raises(ValueError, match="non-empty list"):
        sample(model, SamplerConfig(), generator=[])
    with pytest.raises(ValueError, match="non-empty list"):
        sample(model, SamplerConfig(), generator=[torch.Generator(), None])


def test_ar_rows_draw_from_their_own_generators():
    """AR rows draw the same noise as alone. (Its one-token KV-cache steps are matmuls with only B
    rows, whose rounding may depend on B; the tokens of this tiny model match all the same.)"""
    model, config = tiny("ar"), SamplerConfig(temperature=1.3, top_p=0.9)
    batch = sample_ar(model, config, generator=gens([5, 6, 7]), prompt="abc")
    for i, seed in enumerate([5, 6, 7]):
        solo = sample_ar(model, config, generator=gens([seed])[0], prompt="abc")
        assert np.array_equal(batch.final[i], solo.final[0])
