"""Drawing proposals from logits: temperature, top-k then top-p, Gumbel-max in float64.

Every function works on any leading shape (..., V): (B, L, V) for the denoiser, (B, V) for AR.
"""
from __future__ import annotations

import torch

NEG_INF = float("-inf")


def filter_logits(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Set filtered-out logits to -inf: top-k first, then top-p on what top-k kept.

    Top-p keeps the smallest set of most likely tokens whose mass reaches p, and always the most
    likely one. Tokens tied with the k-th logit are all kept (ties are measure-zero for trained models).
    """
    V = logits.shape[-1]
    if 0 < top_k < V:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, NEG_INF)
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., V)
        probs = torch.softmax(sorted_logits, dim=-1)  # (..., V)
        mass_before = probs.cumsum(dim=-1) - probs  # (..., V) mass of strictly more likely tokens
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False  # at least one token survives
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocab order
        logits = logits.masked_fill(drop, NEG_INF)
    return logits


def gumbel_noise(shape, generator: torch.Generator, device) -> torch.Tensor:
    """Standard Gumbel noise in float64, drawn on the CPU generator then moved, so every device
    sees the same numbers for the same seed. float32 noise would squash the tail of the
    distribution and lower the effective temperature."""
    u = torch.rand(shape, generator=generator, dtype=torch.float64)
    u.clamp_(min=torch.finfo(torch.float64).tiny)  # log(0) would give an infinite draw
    return (-torch.log(-torch.log(u))).to(device)


def draw(logits: torch.Tensor, temperature: float, generator: torch.Generator,
         top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """One token per row of `logits` (..., V) from softmax(logits / T) after filtering.

    Temperature 0 is argmax (no noise drawn). Logits must already exclude [MASK] (-inf there).
    """
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = filter_logits(logits.double() / temperature, top_k, top_p)  # (..., V) float64
    scaled += gumbel_noise(scaled.shape, generator, scaled.device)
    return scaled.argmax(dim=-1)  # (...,)
