"""A scripted denoiser whose logits are known and change with the canvas, so that committed tokens can
lose the model's favour (token editing has something to edit) and entropies differ (the entropy bound
commits more or fewer positions): `ScriptedDenoiser`. Each row's logits are a pure function of that row's
canvas, so a row's run does not depend on the rows beside it (batched, merged and packed runs equal their
solo runs exactly)."""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from explorer.data.tokenizer import CharTokenizer

TOK = CharTokenizer("abcde")  # ids 0-4, [MASK] = 5


class ScriptedDenoiser(nn.Module):
    """model(x, t) -> (B, L, V) logits: a fixed table (N(0, 1) * a scale that differs by position: some
    positions confident, some not) plus N(0, 1) * `noise` seeded from the row's tokens (and `seed`), so
    what the model favours moves as the canvas fills; [MASK] at -inf. `calls` counts the model calls."""

    def __init__(self, block_size: int = 16, seed: int = 0, scale: float = 4.0, noise: float = 1.5):
        super().__init__()
        self.config = SimpleNamespace(kind="diffusion", mask_id=TOK.mask_id, vocab_size=TOK.vocab_size,
                                      block_size=block_size, time_conditioning="none")
        self.tokenizer, self.meta, self.seed = TOK, {}, seed
        g = torch.Generator().manual_seed(seed)
        V = TOK.vocab_size
        self.table = torch.randn(block_size, V, generator=g) * (scale * torch.rand(block_size, 1, generator=g))
        self.noise, self.calls = noise, 0

    def row_logits(self, row: torch.Tensor) -> torch.Tensor:
        """(L, V) the logits of one canvas row (L,): the same canvas always gives the same logits."""
        key = self.seed
        for token in row.tolist():
            key = (key * 31 + token + 1) % (2**61 - 1)
        g = torch.Generator().manual_seed(key)
        L, V = row.shape[0], self.config.vocab_size
        logits = self.table[:L] + torch.randn(L, V, generator=g) * self.noise  # (L, V)
        logits[:, self.config.mask_id] = float("-inf")
        return logits

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
        self.calls += 1
        return torch.stack([self.row_logits(row) for row in x])  # (B, L, V)
