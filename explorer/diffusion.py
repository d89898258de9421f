"""Forward masking q(x_t | x_0), the masked-LM losses (uniform and ELBO 1/t), NELBO evaluation.

Time t is the masking probability: t = 1 is all [MASK], t = 0 is clean text.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .devices import model_device

from .names import WEIGHTINGS  # noqa: F401  (re-exported)


def forward_mask(x0: torch.Tensor, t: torch.Tensor, mask_id: int, fixed: torch.Tensor | None = None,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask each non-fixed position independently with probability t (per row).

    x0 (B, L) long; t (B,) or scalar; fixed (B, L) or (L,) bool positions never masked.
    Returns x_t (B, L) and the boolean mask of masked positions (B, L).
    """
    t = torch.as_tensor(t, dtype=torch.float32, device=x0.device).reshape(-1, 1)  # (B or 1, 1)
    u = torch.rand(x0.shape, generator=generator, device=x0.device)  # (B, L)
    masked = u < t
    if fixed is not None:
        masked &= ~fixed.to(x0.device).bool()
    return x0.masked_fill(masked, mask_id), masked


def sample_t(batch_size: int, eps: float = 1e-3, stratified: bool = True,
             generator: torch.Generator | None = None, device=None) -> torch.Tensor:
    """(B,) t ~ U(eps, 1). Stratified: one draw per 1/B-wide stratum, then shuffled (lower variance)."""
    u = torch.rand(batch_size, generator=generator)
    if stratified:
        u = (torch.arange(batch_size) + u) / batch_size
        u = u[torch.randperm(batch_size, generator=generator)]
    return (eps + (1 - eps) * u).to(device)


def masked_ce(logits: torch.Tensor, x0: torch.Tensor, masked: torch.Tensor, mask_id: int) -> torch.Tensor:
    """(B, L) cross-entropy of the true token at masked positions, 0 elsewhere; [MASK] logit excluded."""
    logits = logits.float()
    logits[..., mask_id] = float("-inf")  # [MASK] is never a prediction
    ce = torch.zeros(x0.shape, dtype=torch.float32, device=x0.device)
    if masked.any():
        ce[masked] = F.cross_entropy(logits[masked], x0[masked], reduction="none")  # (M,)
    return ce


def weighted_loss(ce: torch.Tensor, masked: torch.Tensor, t: torch.Tensor, weighting: str) -> torch.Tensor:
    """Reduce per-position CE (B, L) to a scalar.

    uniform: mean CE over masked tokens (the "Generation: Iterative Unmasking", "Training with the ELBO"
             and "The Forward Process" notebooks).
    elbo:    mean over rows of (1/t) * sum of masked CE / L: the per-token negative ELBO (the "Training
             with the ELBO" notebook and the guide "Let's Build a Diffusion LM").
    """
    if weighting == "uniform":
        return ce.sum() / masked.sum().clamp(min=1)
    if weighting == "elbo":
        L = ce.shape[1]
        return (ce.sum(dim=1) / (t.reshape(-1) * L)).mean()
    raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


def diffusion_loss(model, x0: torch.Tensor, mask_id: int, weighting: str = "elbo", eps: float = 1e-3,
                   stratified: bool = True, generator: torch.Generator | None = None):
    """One training loss on clean batch x0 (B, L): draw t, mask, predict, weight.

    Returns (loss, stats) where stats has the masked fraction and the uniform-weighted CE for logging.
    """
    t = sample_t(x0.shape[0], eps, stratified, generator, x0.device)  # (B,)
    xt, masked = forward_mask(x0, t, mask_id, generator=generator)
    ce = masked_ce(model(xt, t), x0, masked, mask_id)
    loss = weighted_loss(ce, masked, t, weighting)
    n = masked.sum().clamp(min=1)
    return loss, {"masked_fraction": masked.float().mean().item(), "masked_ce": (ce.sum() / n).item()}


def draw_noise(x0: torch.Tensor, mask_id: int, eps: float = 1e-3, stratified: bool = True,
               generator: torch.Generator | None = None):
    """t (B,), x_t (B, L) and the masked positions (B, L) of a training batch, drawn in the order
    diffusion_loss draws them, on the CPU (the generator's device): a process that trains only some
    rows (explorer/distributed.py) draws the whole batch's noise and so keeps the single process's stream."""
    t = sample_t(x0.shape[0], eps, stratified, generator)  # (B,)
    xt, masked = forward_mask(x0.cpu(), t, mask_id, generator=generator)  # (B, L), (B, L)
    return t, xt, masked


def loss_share(model, x0: torch.Tensor, xt: torch.Tensor, t: torch.Tensor, masked: torch.Tensor, mask_id: int,
               weighting: str, n_rows: int, n_masked: int) -> torch.Tensor:
    """These rows' share of a batch's weighted_loss: the batch had n_rows rows and n_masked masked
    positions, and the shares of its slices sum to the loss of the whole batch (and so do their gradients).

    x0, xt, masked (b, L) and t (b,) are the slice's rows."""
    logits = model(xt, t)  # (b, L, V)
    # Nothing masked in these rows: a zero that still reaches every weight (DDP waits for a gradient
    # from each). Taken before masked_ce, which writes -inf into fp32 logits in place.
    anchor = 0.0 * logits.float().sum() if not masked.any() else 0.0
    ce = masked_ce(logits, x0, masked, mask_id)  # (b, L)
    if weighting == "uniform":
        share = ce.sum() / max(n_masked, 1)
    elif weighting == "elbo":
        share = (ce.sum(dim=1) / (t.reshape(-1) * x0.shape[1])).sum() / n_rows
    else:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    return share + anchor


def ar_loss(model, x: torch.Tensor, mask_id: int) -> torch.Tensor:
    """Next-token cross-entropy (nats/char) for the causal baseline; [MASK] logit excluded."""
    logits = model(x[:, :-1]).float()  # (B, L-1, V)
    logits[..., mask_id] = float("-inf")
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))


@torch.no_grad()
def nelbo(model, tokens: torch.Tensor, mask_id: int | None = None, n_t: int = 8, seed: int = 0,
          batch_size: int = 64, eps: float = 1e-3) -> dict:
    """Deterministic, low-variance negative-ELBO estimate on held-out tokens (N, L).

    Each sequence is scored at n_t stratified times t_k in (eps, 1) with fixed-seed masks, so the
    same model and data always give the same number and two checkpoints see the same noise.
    """
    mask_id = model.config.mask_id if mask_id is None else mask_id
    device = model_device(model)
    g = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, tokens.shape[0], batch_size):
        x0 = tokens[start:start + batch_size]
        for k in range(n_t):
            # stratum k of [0, 1): every row gets a different offset inside it
            u = (k + torch.rand(x0.shape[0], generator=g)) / n_t
            t = eps + (1 - eps) * u  # (b,)
            mask_u = torch.rand(x0.shape, generator=g)
            masked = (mask_u < t[:, None]).to(device)
            xd, td = x0.to(device), t.to(device)
            ce = masked_ce(model(xd.masked_fill(masked, mask_id), td), xd, masked, mask_id)
            total += (ce.sum(dim=1) / (td * x0.shape[1])).sum().item()
            count += x0.shape[0]
    model.train(was_training)
    nats = total / count
    return {"nats_per_char": nats, "bits_per_char": nats / math.log(2)}


@torch.no_grad()
def masked_accuracy(model, tokens: torch.Tensor, t: float, seed: int = 0, batch_size: int = 64) -> float:
    """Argmax accuracy at the positions masked at ratio t in held-out tokens (N, L), fixed-seed masks."""
    mask_id = model.config.mask_id
    device = model_device(model)
    g = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    hits, count = 0, 0
    for start in range(0, tokens.shape[0], batch_size):
        x0 = tokens[start:start + batch_size].to(device)
        masked = (torch.rand(x0.shape, generator=g) < t).to(device)  # (b, L)
        logits = model(x0.masked_fill(masked, mask_id), torch.full((x0.shape[0],), t, device=device))
        logits = logits.float()
        logits[..., mask_id] = float("-inf")
        hits += (logits.argmax(-1) == x0)[masked].sum().item()
        count += masked.sum().item()
    model.train(was_training)
    return hits / max(count, 1)


@torch.no_grad()
def ar_cross_entropy(model, tokens: torch.Tensor, batch_size: int = 64) -> dict:
    """Held-out next-char cross-entropy of the causal baseline on (N, L) tokens."""
    device = model_device(model)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, tokens.shape[0], batch_size):
        x = tokens[start:start + batch_size].to(device)
        n = x.shape[0] * (x.shape[1] - 1)
        total += ar_loss(model, x, model.config.mask_id).item() * n
        count += n
    model.train(was_training)
    nats = total / count
    return {"nats_per_char": nats, "bits_per_char": nats / math.log(2)}
