"""Synthetic pattern corpus: sequences tiling a random short pattern (the pattern data of the "The Forward
Process" and "Sampling Strategies & Speed Tradeoffs" notebooks)."""
from __future__ import annotations

import torch

from .tokenizer import CharTokenizer

# 15 symbols + [MASK] = 16 ids, the vocabulary size of those notebooks' pattern data.
PATTERN_SYMBOLS = "ABCDEFGHIJKLMNO"


def pattern_tokenizer(n_symbols: int = len(PATTERN_SYMBOLS)) -> CharTokenizer:
    if not 1 <= n_symbols <= len(PATTERN_SYMBOLS):
        raise ValueError(f"n_symbols must be in 1..{len(PATTERN_SYMBOLS)}, got {n_symbols}")
    return CharTokenizer(PATTERN_SYMBOLS[:n_symbols])


def generate_patterns(n: int, seq_len: int = 24, *, n_symbols: int = 15, min_period: int = 2,
                      max_period: int = 6, generator: torch.Generator | None = None) -> torch.Tensor:
    """(n, seq_len) ids in [0, n_symbols): each row repeats a random pattern of length
    min_period..max_period (inclusive) drawn uniformly over the symbols."""
    if not 1 <= min_period <= max_period:
        raise ValueError(f"need 1 <= min_period <= max_period, got {min_period}..{max_period}")
    periods = torch.randint(min_period, max_period + 1, (n,), generator=generator)  # (n,)
    symbols = torch.randint(0, n_symbols, (n, max_period), generator=generator)  # (n, P)
    pos = torch.arange(seq_len)[None, :] % periods[:, None]  # (n, L) index into each pattern
    return symbols.gather(1, pos)  # (n, L)
