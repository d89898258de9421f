"""Unmasking schedules: how many masked positions of the current block to commit at each step.

Every schedule has one signature:
    schedule(n, N, s, S) -> k
    n  (B,) long  masked positions of the block now (re-masked ones included)
    N  (B,) long  masked positions of the block when it started
    s  int        0-based step within the block;  S  int  steps the block has
    k  (B,) long  positions to commit at this step, 0 <= k <= n

`linear` and `cosine` are plans for the block's N positions, expressed as how many may still be
masked after step s; committing n - target (not the planned count) is what lets revision
(re-masking) be absorbed: re-masked positions raise n, so later steps commit them again, and the
last step's target is 0, so the block always ends fully decoded.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from .. import names

Schedule = Callable[[torch.Tensor, torch.Tensor, int, int], torch.Tensor]


def remaining(n, N, s, S):
    """Spread what is still masked over the steps remaining: k = max(1, floor(n / r)) with r the
    steps left in the block (the teaching notebooks' rule; formerly named `seed`)."""
    r = S - s
    return torch.clamp(n // r, min=1).minimum(n)


def linear(n, N, s, S):
    """LLaDA's get_num_transfer_tokens: floor(N/S) per step, the first N mod S steps one more."""
    done = (s + 1) * (N // S) + torch.clamp(N % S, max=s + 1)  # (B,) planned commits through step s
    return (n - (N - done)).clamp(min=0)


def cosine(n, N, s, S):
    """MaskGIT: the masked fraction after step s+1 of S follows cos(pi/2 * (s+1)/S); the last
    step commits everything left."""
    if s >= S - 1:
        return n
    target = torch.floor(N.double() * math.cos(math.pi / 2 * (s + 1) / S)).long()  # (B,)
    return (n - target).clamp(min=0)


SCHEDULES: dict[str, Schedule] = {"remaining": remaining, "linear": linear, "cosine": cosine}
assert tuple(SCHEDULES) == names.SCHEDULES, "explorer/names.py must list exactly the registry's schedules"


def get_schedule(name: str) -> Schedule:
    """The schedule registered as `name` (or an older alias of it, names.SCHEDULE_ALIASES)."""
    try:
        return SCHEDULES[names.SCHEDULE_ALIASES.get(name, name)]
    except KeyError:
        raise ValueError(f"unknown schedule {name!r}; valid: {', '.join(SCHEDULES)}") from None


def split_steps(steps: int, n_blocks: int) -> list[int]:
    """Steps per block, as even as possible, the first blocks taking the remainder; every block
    gets at least one step (so there are max(steps, n_blocks) in all)."""
    steps = max(steps, n_blocks)
    base, extra = divmod(steps, n_blocks)
    return [base + (b < extra) for b in range(n_blocks)]
