"""Block diffusion over a key/value cache (sampling/cache.py, the `cache` knob): exact where the model cannot
see outside the block, window-sized calls after each block's first, the same run for the same seed, batched
and packed runs equal to solo ones, and one clear refusal where it cannot apply."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from explorer.model import ModelConfig, Transformer
from explorer.sampling import SamplerConfig, sample, sample_many
from explorer.sampling.merged import merge_key
from tests.support.models import MASK, TOK, assert_same_run, gen, make_model, random_mock

L, BLOCK = 16, 4


class BlockLocalDenoiser(torch.nn.Module):
    """A denoiser whose logits at a position depend on the tokens of its own block only (attention that
    cannot see outside the block), and which takes the canvas cache as the project's Transformer does: a
    write is a full forward, a window call sees positions start .. start + W - 1. Records each call's
    (kind, rows, width)."""

    canvas_kv = True

    def __init__(self, offset: int = 0, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn(L, MASK, generator=g) * 2  # (L, 4) over a..d
        self.offset = offset  # the prompt's length: blocks start after it
        self.config = SimpleNamespace(kind="diffusion", mask_id=MASK, vocab_size=MASK + 1, block_size=L,
                                      time_conditioning="none", shift_logits=False)
        self.tokenizer = TOK
        self.calls: list[tuple] = []

    def forward(self, x, t, cache=None):
        start = 0 if cache is None or cache.start is None else cache.start
        self.calls.append(("full" if cache is None else "write" if cache.start is None else "window", *x.shape))
        pos = torch.arange(start, start + x.shape[1])  # (W,)
        block = torch.where(pos < self.offset, -1, (pos - self.offset) // BLOCK)  # (W,)
        # each position's bump: the sum of its block's decoded tokens, so the logits follow the block's fill
        decoded = torch.where(x == MASK, 0, x + 1)  # (B, W)
        same = (block[:, None] == block[None, :]).long()  # (W, W)
        bump = (decoded @ same.T) % MASK  # (B, W)
        logits = self.table[pos].expand(x.shape[0], -1, -1) + 1.5 * torch.nn.functional.one_hot(bump, MASK)
        return torch.cat([logits, torch.full((*x.shape, 1), 20.0)], dim=-1)  # (B, W, V)


def same_tokens(a, b) -> None:
    """The same run, step for step: canvases, proposals, confidences, commits and model calls."""
    for name in ("tokens", "proposals", "confidence", "committed_at", "final"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert a.nfe == b.nfe


@pytest.mark.parametrize("mode", ["prefix", "dual"])
@pytest.mark.parametrize("knobs, rows, template", [
    ({"steps": 8}, 3, None),  # a schedule, one generator
    ({"threshold": 0.55}, 4, None),  # rows walk their own blocks (one generator per row)
    ({"steps": 6, "cfg_scale": 1.5, "temperature": 0.7}, 2, "ab" + "█" * (L - 2)),  # guidance: twice the rows
])
def test_cached_decoding_equals_uncached_where_attention_stays_in_the_block(mode, knobs, rows, template):
    offset = 2 if template else 0
    want_model, got_model = BlockLocalDenoiser(offset), BlockLocalDenoiser(offset)
    base = SamplerConfig(block_length=BLOCK, seed=5, **knobs)
    per_row = "threshold" in knobs
    args = {"generator": [gen(i) for i in range(rows)]} if per_row else {"batch_size": rows}
    want = sample(want_model, base, template=template, **args)
    args = {"generator": [gen(i) for i in range(rows)]} if per_row else {"batch_size": rows}
    got = sample(got_model, base.replace(cache=mode), template=template, **args)
    same_tokens(got, want)
    kinds = {c[0] for c in got_model.calls}
    assert kinds == {"write", "window"} and {c[0] for c in want_model.calls} == {"full"}
    if per_row:  # the rows did reach different blocks: some calls were for a part of them
        assert any(c[1] < rows for c in got_model.calls)


def test_dual_runs_the_model_on_the_block_alone_after_its_first_call():
    model = BlockLocalDenoiser()
    sample(model, SamplerConfig(steps=12, block_length=BLOCK, cache="dual", temperature=0), batch_size=2)
    assert model.calls == [("write", 2, L), ("window", 2, BLOCK), ("window", 2, BLOCK)] * (L // BLOCK)


def test_prefix_runs_the_model_on_the_block_and_what_follows():
    model = BlockLocalDenoiser()
    sample(model, SamplerConfig(steps=8, block_length=BLOCK, cache="prefix", temperature=0), batch_size=2)
    assert model.calls == [c for b in range(L // BLOCK) for c in (("write", 2, L), ("window", 2, L - b * BLOCK))]


@pytest.fixture(scope="module")
def adaln():
    """A random adaLN Transformer (cached keys were computed at another t: the approximation)."""
    torch.set_num_threads(1)
    return make_model(block_size=L, n_layer=2, time_conditioning="adaln", seed=3)


@pytest.mark.parametrize("mode", ["prefix", "dual"])
def test_same_seed_same_run_and_batched_rows_are_solo_runs(adaln, mode):
    cfg = SamplerConfig(steps=8, block_length=BLOCK, cache=mode, temperature=1.0, seed=2)
    first, again = sample(adaln, cfg, batch_size=2), sample(adaln, cfg, batch_size=2)
    assert_same_run(again, first)
    assert not (first.final == adaln.config.mask_id).any()
    batched = sample(adaln, cfg, generator=[gen(7), gen(8)])
    for i, seed in enumerate((7, 8)):
        solo = sample(adaln, cfg, generator=[gen(seed)])
        assert np.array_equal(batched.row(i).tokens, solo.row(0).tokens)
    runs = [{"config": cfg.replace(seed=s), "batch_size": 2, "record": False} for s in (0, 1)]
    assert merge_key(runs[0]) is None  # the merged step does not implement the cache
    for run, packed in zip(runs, sample_many(adaln, runs)):
        assert np.array_equal(packed.final, sample(adaln, **run).final)


@pytest.mark.parametrize("mode", ["prefix", "dual"])
def test_one_layer_with_shifted_logits_is_exact(mode):
    """One layer and no time conditioning: the keys and values outside the window depend only on the tokens
    there, which do not change during the block, so the cache is exact (up to rounding). With shift_logits
    (the shipped `shakespeare`, Dream) a position's logits come from the one before it: the window starts a
    position early, or the block's first position would read its own."""
    torch.manual_seed(0)
    one = Transformer(ModelConfig(vocab_size=12, mask_id=11, block_size=L, n_layer=1, n_head=4, n_embd=32,
                                  shift_logits=True)).eval()
    cfg = SamplerConfig(steps=8, block_length=BLOCK, temperature=1.0, seed=1)
    want, got = sample(one, cfg, batch_size=3), sample(one, cfg.replace(cache=mode), batch_size=3)
    assert np.array_equal(got.final, want.final)
    assert np.allclose(got.commit_confidence, want.commit_confidence, atol=1e-5)


def test_the_cache_is_approximate_for_a_bidirectional_model(adaln):
    """Same seed, greedy: the cached run's logits are not the uncached run's (stale keys and values), so the
    cache is really read, while every position is still decoded."""
    cfg = SamplerConfig(steps=8, block_length=BLOCK, temperature=0)
    want = sample(adaln, cfg, batch_size=1)
    got = sample(adaln, cfg.replace(cache="dual"), batch_size=1)
    assert not (got.final == adaln.config.mask_id).any()
    assert not np.allclose(got.confidence, want.confidence, equal_nan=True)


def test_refusals_are_one_line():
    with pytest.raises(ValueError, match=r"^cache 'prefix' needs block_length > 0 .*set block_length, or cache none$"):
        SamplerConfig(cache="prefix")
    with pytest.raises(ValueError) as e:  # a model whose forward takes no cache (LLaDA's, Dream's, a mock's)
        sample(random_mock(L), SamplerConfig(steps=4, block_length=BLOCK, cache="dual"))
    assert "\n" not in str(e.value) and str(e.value).startswith("cache 'dual' needs a model whose forward takes "
                                                               "cached keys and values")
