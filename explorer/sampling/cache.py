"""Block diffusion over a key/value cache: Fast-dLLM's approximate prefix and dual caches (the `cache` knob).

A semi-AR run (block_length > 0) without a cache calls the model on the whole canvas at every step. With
one, the first model call of each block is a full forward that also writes every layer's keys and values
(model.CanvasKV); each later call of the block runs the model on a window of the canvas only, attending to
the stored keys and values outside it:
  prefix  the window is the block and everything after it; the committed prefix is read from the cache;
  dual    the window is the block alone (its first to its last position); the prefix and what follows the
          block are both read from the cache.
The cache is approximate for a bidirectional model: what it holds was computed from the canvas at the
block's start (its tokens then and, under adaLN time conditioning, its t then), while the uncached run
recomputes everything from the canvas of each step. It is exact where nothing outside the window could
have changed what the model computes there (tests/unit/sampling/test_cache.py holds it to that).

Logits outside the window are those of the call that last covered them (the block's full forward): the
masked positions after the block still get a proposal from them, so a step draws the same random numbers,
in the same shapes, with or without a cache; only the current block's positions are ever committed.

Rows may be in different blocks (threshold, factor or entropy-bound decoding with one generator per row):
the rows are then grouped, one model call per group (those starting a block: a full forward; the others
by window), and each row's calls are those of its run alone.

Which models take it: those whose forward reads a CanvasKV (`canvas_kv`: this project's Transformer, and a
Hugging Face model whose remote code takes past_key_values, hf/model.py). LLaDA's and Dream's code as
Fast-dLLM runs it keeps each layer's keys and values in the output's past_key_values: the wrapper keeps them
at the block's full forward and passes those of the positions before a prefix window (the window's positions
continue from them); the dual cache also needs the forward's replace_position (Fast-dLLM's modified code: the
window's entries are written over the kept canvas), so a forward with past_key_values alone takes `prefix`
only (`cache_modes`). The same holds there: exact where nothing outside the window changed (a window over an
unchanged canvas gives the full forward's logits; one layer, a whole run), approximate otherwise. LLaDA's
released code names past_key_values but asserts it is None: a cached forward is tried at load, and such a
model, like one whose forward has no past_key_values (BERT-family), refuses a run with the cache on.
DiffusionGemma's uniform-state sampler runs over its own cache (uniform.py).
"""
from __future__ import annotations

import numpy as np
import torch

from ..model import CanvasKV
from .step import ModelCall


def takes_cache(model) -> bool:
    """Whether `model`'s forward takes a canvas cache (model.CanvasKV): model(x, t, cache=CanvasKV(...))."""
    return bool(getattr(model, "canvas_kv", False))


def cache_modes(model) -> tuple[str, ...]:
    """The cache modes `model` takes: prefix and dual for this project's own models, what a Hugging Face
    model's load found (hf/model.py: dual needs replace_position), none for a model without the cache."""
    if not takes_cache(model):
        return ()
    return tuple(getattr(model, "cache_modes", ("prefix", "dual")))


def check_cache(model, config) -> None:
    """Refuse a run whose cache the model cannot take (one line, naming the knob and the model)."""
    if config.cache == "none":
        return
    name = getattr(model.config, "family", None) or type(model).__name__
    if not takes_cache(model):
        raise ValueError(f"cache {config.cache!r} needs a model whose forward takes cached keys and values (this "
                         f"project's own checkpoints, or remote code that takes past_key_values, as Fast-dLLM's "
                         f"LLaDA and Dream do); this {name} model does not: set cache to none")
    if config.cache not in cache_modes(model):
        raise ValueError(f"cache {config.cache!r} needs a model whose forward also takes replace_position (Fast-dLLM's "
                         f"modified LLaDA and Dream code); this {name} model's takes past_key_values only: set cache "
                         f"to prefix or none")


def windows(blocks: np.ndarray, mode: str, shift: bool) -> list[tuple[int, int, int]]:
    """Each block's window as (first, end, dropped): the model runs on positions first .. end - 1 and the
    first `dropped` rows of its logits are not the block's. prefix: from the block's first position to the
    canvas' end; dual: to the block's last. With shift_logits (logits[i] read from position i - 1) the
    window starts one position earlier, so that the block's first position has its predecessor."""
    out = []
    for b in range(int(blocks.max()) + 1):
        where = np.flatnonzero(blocks == b)
        first, end = int(where[0]), (len(blocks) if mode == "prefix" else int(where[-1]) + 1)
        early = 1 if shift and first > 0 else 0
        out.append((first - early, end, early))
    return out


class BlockCache:
    """One run's cache: the stored keys and values of its rows, each row's current block and the block its
    stored entries were written at, and the logits of every position (the window's fresh, the rest from the
    block's full forward). step.refresh asks it for the calls of a step (`calls`) and the logits they give
    (`logits`); the sampler tells it each row's block before each step (`at`)."""

    def __init__(self, mode: str, blocks: np.ndarray, rows: int, shift: bool = False):
        self.windows = windows(blocks, mode, shift)
        self.block = [0] * rows  # each row's current block
        self.written: list[int | None] = [None] * rows  # the block each row's stored entries are from
        self.kv: CanvasKV | None = None  # per layer (B', nh, L, hs); B' = 2B with guidance
        self.full: torch.Tensor | None = None  # (B', L, V) each position's latest logits
        self._sent: list[tuple] = []

    def at(self, blocks: list[int]) -> None:
        """Each row's current block (a finished row, at or past the last block, keeps its own)."""
        n = len(self.windows)
        self.block = [b if b < n else (w if w is not None else n - 1) for b, w in zip(blocks, self.written)]

    def calls(self, call: ModelCall) -> list[ModelCall]:
        """The model calls that give `call`'s logits (x (B', L): the run's rows, twice under guidance):
        a full forward writing the cache for the rows starting a block, a window forward for each group of
        the other rows that share a window."""
        B = len(self.block)
        groups: dict[tuple, list[int]] = {}
        for r in range(call.x.shape[0]):
            b = self.block[r % B]
            groups.setdefault(("write",) if self.written[r % B] != b else ("window", b), []).append(r)
        self._sent, out = [], []
        for key, rows in groups.items():
            every = len(rows) == call.x.shape[0]
            idx = None if every else torch.tensor(rows, device=call.x.device)
            x, t = (call.x, call.t) if every else (call.x[idx], call.t[idx])
            if key[0] == "write":
                kv, span = CanvasKV(), None
            else:
                first, end, drop = span = self.windows[key[1]]
                kv = self._reader(first, idx)
                x = x[:, first:end]  # (R, W)
            self._sent.append((rows, idx, span, kv))
            out.append(ModelCall(x, t, kwargs={"cache": kv}))
        return out

    def _reader(self, first: int, idx: torch.Tensor | None) -> CanvasKV:
        """A window's cache: the stored one (every row; its window entries are overwritten in place), or a
        copy of some rows' entries."""
        if idx is None:
            return CanvasKV(first, self.kv.k, self.kv.v)
        return CanvasKV(first, [k.index_select(0, idx) for k in self.kv.k], [v.index_select(0, idx) for v in self.kv.v])

    def logits(self, sent: list[ModelCall]) -> torch.Tensor:
        """(B', L, V) the logits of every position after the calls `sent` (calls() made them, their
        logits filled): stores what the full forwards wrote, and which block their rows are at."""
        B = len(self.block)
        for call, (rows, idx, span, kv) in zip(sent, self._sent):
            if span is None:
                self._store(call.logits, kv, idx, len(rows))
                for r in rows:
                    self.written[r % B] = self.block[r % B]
            else:
                first, end, drop = span
                part = call.logits[:, drop:]  # (R, W - drop, V) the window's own rows
                if idx is None:
                    self.full[:, first + drop:end] = part
                else:
                    self.full[idx, first + drop:end] = part
        return self.full

    def _store(self, logits: torch.Tensor, kv: CanvasKV, idx: torch.Tensor | None, n: int) -> None:
        """A full forward's logits and keys / values into the run's (every row, or rows idx)."""
        if idx is None:
            self.kv, self.full = kv, logits.clone()  # (B', L, V) its own: windows write into it
            return
        self.full.index_copy_(0, idx, logits)
        for store, new in ((self.kv.k, kv.k), (self.kv.v, kv.v)):
            for layer, tensor in enumerate(new):
                store[layer].index_copy_(0, idx, tensor)
