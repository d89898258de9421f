"""Drawing proposals from logits: temperature, top-k then top-p, Gumbel-max in float64.

Every function works on any leading shape (..., V): (B, L, V) for the denoiser, (B, V) for AR.
`draw_rows` is `draw` for a batch whose rows each have their own generator and temperature: row i's
draws are exactly what `draw` makes for row i alone (same noise shapes, same order).
"""
from __future__ import annotations

import torch

NEG_INF = float("-inf")
TINY = torch.finfo(torch.float64).tiny  # the smallest uniform kept: log(0) would give an infinite draw


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


def raw_uniforms(shape, generator: torch.Generator) -> torch.Tensor:
    """float64 uniforms in [0, 1) from the CPU generator, so every device sees the same numbers for the
    same seed; unclamped (uniform_noise clamps; draw_rows clamps many rows' at once)."""
    return torch.rand(shape, generator=generator, dtype=torch.float64)


def uniform_noise(shape, generator: torch.Generator) -> torch.Tensor:
    """float64 uniforms in (0, 1) (log(0) would give an infinite draw, hence the clamp)."""
    return raw_uniforms(shape, generator).clamp_(min=TINY)


def gumbel_noise(shape, generator: torch.Generator, device) -> torch.Tensor:
    """Standard Gumbel noise in float64: uniforms drawn on the CPU generator, moved, then -log(-log u)
    on the device. The logs run where the logits are: on a GPU machine two CPU logs per step cost
    more than the model call (measured on an H200: 0.35 ms each, two thirds of a packed sweep's sampler
    time). float32 noise would squash the tail of the distribution and lower the effective temperature."""
    return gumbel(uniform_noise(shape, generator).to(device))


def gumbel(u: torch.Tensor) -> torch.Tensor:
    """-log(-log u), computed in place: u is overwritten (every caller passes uniforms of its own), and no
    temporaries are made."""
    return u.log_().neg_().log_().neg_()


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


def draw_rows(logits: torch.Tensor, rows: torch.Tensor, temperatures, generators,
              top_k: int = 0, top_p: float = 1.0, counts: list[int] | None = None) -> torch.Tensor:
    """One token per row of `logits` (M, V), where entry m belongs to batch row rows[m] (ascending,
    as nonzero() gives them). Row i uses temperatures[i] and generators[i], and gets exactly the
    tokens draw(logits[rows == i], temperatures[i], generators[i]) would give: its noise is drawn
    from its own generator with the shape a run of that row alone draws, then all rows go to the
    device at once (one copy, one argmax). A "row" may be a group of batch rows sharing a generator
    (merged.py: a merged run's rows), numbered in the order of its entries. counts: the entries of
    each row, when the caller knows them on the host (else they are read from `rows`)."""
    if counts is None:  # entries per row, unless the caller knows them (reading them waits for the device)
        counts = torch.bincount(rows.cpu(), minlength=len(generators)).tolist()
    hot = [i for i, (n, T) in enumerate(zip(counts, temperatures)) if n and T != 0]
    if not hot:
        return logits.argmax(dim=-1)  # (M,)
    temps = torch.tensor([float(T) for T in temperatures], dtype=torch.float64, device=logits.device)
    every = all(T != 0 for n, T in zip(counts, temperatures) if n)  # no temperature-0 entry: no selection
    sel = None if every else temps[rows] != 0  # (M,) entries of rows that sample
    entries, picked = (logits, rows) if every else (logits[sel], rows[sel])
    # elementwise division by the row's temperature: the same float64 result as draw()'s scalar one
    scaled = filter_logits(entries.double() / temps[picked, None], top_k, top_p)  # (M', V)
    # raw uniforms per row, as uniform_noise draws them, clamped once (elementwise: the same numbers)
    noise = torch.cat([raw_uniforms((counts[i], logits.shape[-1]), generators[i]) for i in hot]).clamp_(min=TINY)
    scaled += gumbel(noise.to(scaled.device))
    if every:
        return scaled.argmax(dim=-1)  # (M,)
    return logits.argmax(dim=-1).masked_scatter(sel, scaled.argmax(dim=-1))  # temperature-0 rows: argmax
