"""Drawing proposals from logits: temperature, top-k then top-p, inverse-CDF in float64.

Every function works on any leading shape (..., V): (B, L, V) for the denoiser, (B, V) for AR.
A token is drawn with one float64 uniform per entry from the CPU generator (the same numbers on every
device for the same seed), mapped through the float64 cumulative distribution of softmax(logits / T)
after filtering. Gumbel-max, drawn this way, took V uniforms per entry: with a real model's vocabulary
(30k-126k tokens) those were made on the CPU, one thread, every step (a LLaDA-sized step at 256 masked
positions: 32M numbers, 0.2 s on one CPU core, several times the model's forward on a GPU).
`draw_rows` is `draw` for a batch whose rows each have their own generator and temperature: row i's
draws are exactly what `draw` makes for row i alone (same uniforms, same order).
"""
from __future__ import annotations

import torch

from ..devices import to_device

NEG_INF = float("-inf")
SEQUENTIAL_CUMSUM = {"cpu"}  # device types whose cumsum adds in order (inverse_cdf needs no guard there)


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
    same seed."""
    return torch.rand(shape, generator=generator, dtype=torch.float64)


def gumbel(u: torch.Tensor) -> torch.Tensor:
    """-log(-log u), computed in place: u is overwritten (every caller passes uniforms of its own, kept
    inside (0, 1)), and no temporaries are made. Dream's alg_temp ranks positions with it."""
    return u.log_().neg_().log_().neg_()


def inverse_cdf(scaled: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """A token per entry of `scaled` (..., V), float64 log-weights (-inf: never drawn), from its uniform
    u (...,) in [0, 1): the first token whose cumulative weight exceeds u x the total. The weights are
    left unnormalised (the total scales u instead: one pass fewer). A token of weight 0 adds exactly 0
    to the CPU's sequential cumulative sum, so its interval is empty; and u x total, rounded, stays
    under the total for every u < 1, so a weight-0 token after the last positive one ([MASK]) is never
    reached either."""
    cdf = (scaled - scaled.amax(dim=-1, keepdim=True)).exp_().cumsum_(dim=-1)  # (..., V)
    target = to_device(u, cdf.device).unsqueeze(-1) * cdf[..., -1:]  # (..., 1)
    drawn = torch.searchsorted(cdf, target, right=True).squeeze(-1)  # (...,)
    return drawn if cdf.device.type in SEQUENTIAL_CUMSUM else never_weight_zero(scaled, drawn)


def never_weight_zero(scaled: torch.Tensor, drawn: torch.Tensor) -> torch.Tensor:
    """drawn (...,) with any token of weight 0 (or past the end) replaced by the most likely one. Off the
    CPU a cumulative sum is a parallel scan: a prefix may be summed in another order than its
    neighbour's, so a weight-0 token can get an interval a rounding step wide (about 1e-16 of the mass)."""
    drawn = drawn.clamp(max=scaled.shape[-1] - 1)
    zero = scaled.gather(-1, drawn.unsqueeze(-1)).squeeze(-1) == NEG_INF  # (...,)
    return torch.where(zero, scaled.argmax(dim=-1), drawn)


def draw(logits: torch.Tensor, temperature: float, generator: torch.Generator,
         top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """One token per row of `logits` (..., V) from softmax(logits / T) after filtering.

    Temperature 0 is argmax (no uniforms drawn). Logits must already exclude [MASK] (-inf there).
    """
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = filter_logits(logits.double() / temperature, top_k, top_p)  # (..., V) float64
    return inverse_cdf(scaled, raw_uniforms(scaled.shape[:-1], generator))  # (...,) one uniform per entry


def draw_rows(logits: torch.Tensor, rows: torch.Tensor, temperatures, generators,
              top_k: int = 0, top_p: float = 1.0, counts: list[int] | None = None) -> torch.Tensor:
    """One token per row of `logits` (M, V), where entry m belongs to batch row rows[m] (ascending,
    as nonzero() gives them). Row i uses temperatures[i] and generators[i], and gets exactly the
    tokens draw(logits[rows == i], temperatures[i], generators[i]) would give: its uniforms are drawn
    from its own generator with the shape a run of that row alone draws, then all rows go to the
    device at once (one copy, one inverse-CDF). A "row" may be a group of batch rows sharing a generator
    (merged.py: a merged run's rows), numbered in the order of its entries. counts: the entries of
    each row, when the caller knows them on the host (else they are read from `rows`)."""
    if counts is None:  # entries per row, unless the caller knows them (reading them waits for the device)
        counts = torch.bincount(rows.cpu(), minlength=len(generators)).tolist()
    hot = [i for i, (n, T) in enumerate(zip(counts, temperatures)) if n and T != 0]
    if not hot:
        return logits.argmax(dim=-1)  # (M,)
    temps = to_device(torch.tensor([float(T) for T in temperatures], dtype=torch.float64), logits.device)
    every = all(T != 0 for n, T in zip(counts, temperatures) if n)  # no temperature-0 entry: no selection
    sel = None if every else temps[rows] != 0  # (M,) entries of rows that sample
    if every:
        entries, picked = logits, rows
    else:  # found without a wait for the device: how many entries sample is known here
        at = torch.nonzero_static(sel, size=sum(counts[i] for i in hot)).squeeze(1)  # (M',) in order, as sel
        entries, picked = logits.index_select(0, at), rows.index_select(0, at)
    # elementwise division by the row's temperature: the same float64 result as draw()'s scalar one
    scaled = filter_logits(entries.double() / temps[picked, None], top_k, top_p)  # (M', V)
    # each row's uniforms, as draw() draws them for that row alone: one per entry
    drawn = inverse_cdf(scaled, torch.cat([raw_uniforms((counts[i],), generators[i]) for i in hot]))  # (M',)
    if every:
        return drawn  # (M,)
    return logits.argmax(dim=-1).masked_scatter(sel, drawn)  # temperature-0 rows: argmax


def draw_block(logits: torch.Tensor, temperature: float, generator: torch.Generator, top_k: int = 0,
               top_p: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token editing's draw: one token per entry of `logits` (M, V), the positions of a block in row-major
    order, exactly as diffusers' BlockRefinementScheduler._sample_from_logits draws them (its reference):
    temperature 0 is the argmax of softmax(logits); otherwise logits / T, its top-k then top-p filtering
    (filtered logits at the dtype's lowest value, a token dropped once the mass before it exceeds p), softmax
    in float32 and one torch.multinomial call for all M entries from `generator`. Multinomial reads V random
    numbers per entry, so the M entries must be drawn in one call, in diffusers' order, to get its tokens.
    The generator is a CPU one (the same numbers on every device): off the CPU the probabilities are copied
    there for the draw (one (M, V) copy a step).

    Returns (tokens (M,) long, their probabilities (M,) float32, the distribution (M, V) float32)."""
    if temperature == 0:
        probs = torch.softmax(logits.float(), dim=-1)  # (M, V)
        token = logits.argmax(dim=-1, keepdim=True)  # (M, 1)
        return token.squeeze(-1), probs.gather(-1, token).squeeze(-1), probs
    scaled = logits if temperature == 1.0 else logits / temperature  # (M, V)
    probs = torch.softmax(_top_p_as_diffusers(_top_k_as_diffusers(scaled, top_k), top_p).float(), dim=-1)
    if len(probs) == 0:
        return torch.zeros(0, dtype=torch.long, device=logits.device), probs[:, 0], probs
    token = to_device(torch.multinomial(probs.cpu(), num_samples=1, generator=generator), probs.device)  # (M, 1)
    return token.squeeze(-1), probs.gather(-1, token).squeeze(-1), probs


def _top_k_as_diffusers(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """BlockRefinementScheduler._top_k_filtering: below the k-th logit, the dtype's lowest value."""
    if top_k is None or top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k=top_k, dim=-1).values[..., -1, None]  # (M, 1)
    return logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)


def _top_p_as_diffusers(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """BlockRefinementScheduler._top_p_filtering: drop a token once the mass of the tokens before it (in
    descending order) exceeds p; the most likely one always stays."""
    if top_p is None or top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)  # (M, V)
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)  # (M, V)
    drop = cumulative > float(top_p)
    drop[..., 1:] = drop[..., :-1].clone()
    drop[..., 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, torch.finfo(sorted_logits.dtype).min)
    return logits.scatter(-1, order, sorted_logits)
