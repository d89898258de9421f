"""Unmasking strategies: which masked positions deserve to be committed first (higher score first).

Every strategy has one signature:
    strategy(probs, proposals, generator) -> scores
    probs      (B, L, V) float32 softmax of the untempered, unfiltered logits, p([MASK]) = 0 (token
               editing: the tempered, filtered distribution its tokens are drawn from, diffusers'); None
               for the strategies marked `position_only` (they never read it, so the sampler skips it)
    proposals  (B, L)    long, the token drawn at each position this step
    generator  torch.Generator (CPU) for strategies that need randomness, or a list of them, one per
               row (then row i's noise is exactly what a run of row i alone with generators[i] draws)
    scores     (B, L)    float32; the sampler only looks at masked positions of the current block
"""
from __future__ import annotations

from typing import Callable

import torch

from .. import names
from ..devices import to_device

Strategy = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


def confidence(probs, proposals, generator):
    """p(x̂): LLaDA's low_confidence remasking; the confidence-based unmasking of the
    "Sampling Strategies & Speed Tradeoffs" notebook."""
    return probs.gather(-1, proposals.unsqueeze(-1)).squeeze(-1)  # (B, L)


def margin(probs, proposals, generator):
    """Top-1 minus top-2 probability: sure *and* unambiguous positions first."""
    top2 = probs.topk(2, dim=-1).values  # (B, L, 2)
    return top2[..., 0] - top2[..., 1]


def entropy(probs, proposals, generator):
    """Negative entropy: the most peaked distributions first (0 * log 0 counts as 0)."""
    return torch.special.xlogy(probs, probs).sum(dim=-1)  # (B, L), <= 0


def random(probs, proposals, generator):
    """Uniform noise (the random remasking of the "Sampling Strategies & Speed Tradeoffs" notebook); from the CPU
    generator so devices agree."""
    if isinstance(generator, (list, tuple)):  # one generator per row: each draws a row's (1, L)
        L = proposals.shape[1]
        return to_device(torch.cat([torch.rand((1, L), generator=g) for g in generator]), proposals.device)
    return to_device(torch.rand(proposals.shape, generator=generator), proposals.device)  # (B, L)


def left_to_right(probs, proposals, generator):
    """Earlier positions first (the forced left-to-right of the "Generation: Iterative Unmasking" notebook,
    §4.7): score = -position."""
    B, L = proposals.shape
    pos = torch.arange(L, device=proposals.device, dtype=torch.float32)  # (L,)
    return (-pos).expand(B, L)


# Scores that depend on where a position is, not on the model's distribution: the sampler calls them on
# the whole (B, L) canvas with probs=None; the others see only the positions that need a score.
random.position_only = True
left_to_right.position_only = True


STRATEGIES: dict[str, Strategy] = {
    "confidence": confidence,
    "margin": margin,
    "entropy": entropy,
    "random": random,
    "left_to_right": left_to_right,
}
assert tuple(STRATEGIES) == names.STRATEGIES, "explorer/names.py must list exactly the registry's strategies"


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; valid: {', '.join(STRATEGIES)}") from None
