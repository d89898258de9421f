"""Tiny models for the tests, built in the test (never the network or ../shared): `make_model`, the tiny
text and patterns models, mock denoisers whose logits are known, a model that counts its calls, and
`assert_same_run`, the check that a batched or packed run is exactly its solo run."""
from __future__ import annotations

import dataclasses
import threading
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn

from explorer.data.corpus import TextCorpus
from explorer.data.patterns import pattern_tokenizer
from explorer.data.tokenizer import CharTokenizer
from explorer.model import ModelConfig, Transformer

TINY_TEXT = ("To be, or not to be, that is the question:\n"
             "Whether 'tis nobler in the mind to suffer\n"
             "The slings and arrows of outrageous fortune,\n"
             "Or to take arms against a sea of troubles\n") * 8


def make_model(vocab_size=12, mask_id=11, block_size=16, kind="diffusion", time_conditioning="none",
               n_layer=2, n_embd=32, n_head=4, seed=0) -> Transformer:
    """A randomly initialised Transformer (seeded), in eval mode."""
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=vocab_size, mask_id=mask_id, block_size=block_size, n_layer=n_layer,
                      n_head=n_head, n_embd=n_embd, kind=kind, time_conditioning=time_conditioning)
    return Transformer(cfg).eval()


def tiny_text_models():
    """(corpus, diffusion model, AR judge) over TINY_TEXT, untrained: a text sweep's inputs."""
    corpus = TextCorpus(TINY_TEXT, name="tiny")
    tok = corpus.tokenizer
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=24)
    model.tokenizer, model.meta = tok, {"corpus": {"name": "tiny", "kind": "text"}, "words": corpus.words}
    judge = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=24, kind="ar", seed=1)
    judge.tokenizer = tok
    return corpus, model, judge


def tiny_patterns_model(block_size=12):
    """A random diffusion model over the pattern alphabet (A..O), as the sweeps read it."""
    tok = pattern_tokenizer(15)
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=block_size)
    model.tokenizer, model.meta = tok, {"corpus": {"name": "patterns", "kind": "patterns"}, "words": []}
    return model


def adaln_patterns_model():
    """The shipped patterns model's shape (adaLN time conditioning, 24 positions), fewer layers, random
    weights; the adaLN layers start at zero, so they are perturbed for t to matter."""
    tok = pattern_tokenizer(15)
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=24, n_layer=2, n_embd=64,
                       n_head=4, time_conditioning="adaln")
    with torch.no_grad():
        for block in model.blocks:
            block.ada[1].weight.normal_(0, 0.2, generator=torch.Generator().manual_seed(1))
    model.tokenizer, model.meta = tok, {"corpus": {"name": "patterns", "kind": "patterns"}, "words": []}
    return model


class PeriodicDenoiser(torch.nn.Module):
    """Mock denoiser with known logits: always 90% on the symbol of 'ABCABC...' at each position, so
    every sample is a perfect period-3 pattern whatever the steps or strategy."""

    def __init__(self, block_size=12):
        super().__init__()
        tok = pattern_tokenizer(15)
        self.config = ModelConfig(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=block_size)
        self.tokenizer, self.meta = tok, {"corpus": {"name": "patterns", "kind": "patterns"}}
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, t=None):
        B, L = x.shape
        target = torch.arange(L) % 3  # (L,) A B C A B C ...
        probs = torch.full((B, L, self.config.vocab_size), 0.1 / (self.config.vocab_size - 2))
        probs[..., self.config.mask_id] = 1e-12
        probs[:, torch.arange(L), target] = 0.9
        return probs.log()  # (B, L, V)


class CountingModel(torch.nn.Module):
    """Wraps a model, counting calls and rows; sets `stop` on call number `trip_at`."""

    def __init__(self, inner, trip_at=None):
        super().__init__()
        self.inner, self.config, self.tokenizer, self.meta = inner, inner.config, inner.tokenizer, inner.meta
        self.calls, self.rows, self.trip_at, self.stop = 0, [], trip_at, threading.Event()

    def forward(self, x, t=None):
        self.calls += 1
        self.rows.append(x.shape[0])
        if self.calls == self.trip_at:
            self.stop.set()
        return self.inner(x, t)


# ----------------------------------------------------------------------------- mock denoisers

TOK = CharTokenizer("abcd")  # ids 0-3, [MASK] = 4
MASK = TOK.mask_id

# Six positions with known distributions over a, b, c, d (greedy proposal: the first, most likely).
#                 conf  margin  -entropy
PROBS = [[0.50, 0.50, 0.00, 0.00],  # 0  .50   .00    -.693
         [0.40, 0.20, 0.20, 0.20],  # 1  .40   .20    -1.332
         [0.90, 0.05, 0.05, 0.00],  # 2  .90   .85    -.394
         [0.65, 0.35, 0.00, 0.00],  # 3  .65   .30    -.647
         [0.70, 0.10, 0.10, 0.10],  # 4  .70   .60    -.940
         [0.35, 0.30, 0.25, 0.10]]  # 5  .35   .05    -1.306


def table_from_probs(probs, mask_logit=20.0) -> torch.Tensor:
    """(L, V) logits: log p for the characters and a huge [MASK] logit the sampler must ignore."""
    p = torch.tensor(probs, dtype=torch.float32)
    return torch.cat([p.log(), torch.full((p.shape[0], 1), mask_logit)], dim=1)


class MockDenoiser(nn.Module):
    """Returns the same known logits (L, V) for every canvas; records each call's t."""

    def __init__(self, table: torch.Tensor, time_conditioning="none", tokenizer=TOK):
        super().__init__()
        self.table = table
        self.config = SimpleNamespace(kind="diffusion", mask_id=MASK, vocab_size=table.shape[1],
                                      block_size=table.shape[0], time_conditioning=time_conditioning)
        self.tokenizer = tokenizer
        self.ts: list[torch.Tensor] = []

    def forward(self, x, t):
        self.ts.append(t.clone())
        return self.table[: x.shape[1]].expand(x.shape[0], -1, -1)


def random_mock(L=12, seed=0, **kw) -> MockDenoiser:
    """A MockDenoiser with seeded random logits over a..d at each of L positions."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(L, MASK, generator=g) * 2
    return MockDenoiser(torch.cat([logits, torch.full((L, 1), 20.0)], dim=1), **kw)


# ----------------------------------------------------------------------------- comparing runs

TIMINGS = {"step_seconds", "seconds"}


def gen(seed):
    """A CPU torch.Generator seeded with `seed`."""
    return torch.Generator().manual_seed(seed)


def assert_same_run(got, want):
    """Every field equal (NaN == NaN), timings aside."""
    for f in dataclasses.fields(want):
        if f.name in TIMINGS:
            continue
        a, b = getattr(got, f.name), getattr(want, f.name)
        if isinstance(b, np.ndarray):
            assert a is not None and a.shape == b.shape and np.array_equal(a, b, equal_nan=b.dtype.kind == "f"), f.name
        else:
            assert a == b, f.name
