"""Forward masking q(x_t | x_0), the masked-LM losses (uniform and ELBO 1/t), NELBO evaluation; and the
uniform-state process beside it (forward_uniform, its continuous-time ELBO, its held-out figures).

Time t is the masking probability: t = 1 is all [MASK], t = 0 is clean text. In the uniform-state process
t is the probability that a position is redrawn uniformly from the vocabulary: t = 1 is uniform noise.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .devices import model_device

from .names import PROCESSES, WEIGHTINGS  # noqa: F401  (re-exported)


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


# ---------------------------------------------------------------------------------------------------------
# Uniform-state process. The character tokenizer's [MASK] is its last id (CharTokenizer), so the N real
# tokens are ids 0..mask_id-1: noise is drawn from them and the model's [MASK] logit is dropped.
# ---------------------------------------------------------------------------------------------------------

def forward_uniform(x0: torch.Tensor, t, n_tokens: int, fixed: torch.Tensor | None = None,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Redraw each non-fixed position, with probability t (per row), uniformly from ids 0..n_tokens-1.

    A redrawn token equals the original with probability 1/n_tokens, so a share t * (N-1)/N of the
    positions changes: q(x_t | x_0) = Cat((1-t) onehot(x_0) + t/N). No [MASK] is ever written.
    Returns x_t (B, L) and the redrawn positions (B, L) bool (a redrawn position may keep its token).
    """
    t = torch.as_tensor(t, dtype=torch.float32, device=x0.device).reshape(-1, 1)  # (B or 1, 1)
    u = torch.rand(x0.shape, generator=generator, device=x0.device)  # (B, L)
    noise = torch.randint(0, n_tokens, x0.shape, generator=generator, device=x0.device)  # (B, L)
    redrawn = u < t
    if fixed is not None:
        redrawn &= ~fixed.to(x0.device).bool()
    return torch.where(redrawn, noise, x0), redrawn


def uniform_elbo_terms(logits: torch.Tensor, x0: torch.Tensor, xt: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """(B, L) per-position integrand of the continuous-time NELBO of the uniform-state process (nats).

    The loss of UDLM ("Simple Guidance Mechanisms for Discrete Diffusion Models", Schiff et al. 2024,
    its continuous-time NELBO), also the one Duo ("The Diffusion Duality", Sahoo et al. 2025) trains.
    It is chosen over a plain cross-entropy at every position because it is a bound on the negative
    log-likelihood, so its nats per char stand beside the masked model's NELBO on the same text; a
    cross-entropy would measure the denoiser, not the generative model.

    With alpha = 1 - t (the chance a token is kept), xbar = N alpha onehot(x0) + (1 - alpha) and
    xbar_theta = N alpha softmax(logits) + (1 - alpha), the true and the model's reverse rates out of
    z = x_t are proportional to xbar_y / xbar_z and xbar_theta_y / xbar_theta_z, and the integrand is

        (1 / (N alpha)) * sum_y s_y (u_y - 1 - log u_y),  s_y = xbar_y / xbar_z,  u_y = r_y / s_y,

    with r_y = xbar_theta_y / xbar_theta_z: UDLM's formula regrouped (the sum of r_y - s_y - s_y log(r_y / s_y)
    over y), each term >= 0 and 0 exactly when the model predicts x0 (u - 1 - log u is computed as
    expm1(d) - d, d = log u, which keeps a near-perfect prediction's tiny terms accurate).
    The prior term is 0 (q at t = 1 is uniform) and, as in nelbo, the reconstruction term below eps is left out.

    logits (B, L, V) with [MASK] the last id; x0, xt (B, L) ids < V - 1; t (B,).
    """
    n = logits.shape[-1] - 1  # N real tokens; the [MASK] logit is dropped
    logp = F.log_softmax(logits.float()[..., :n], dim=-1)  # (B, L, N)
    alpha = (1.0 - t.float()).reshape(-1, 1, 1)  # (B, 1, 1)
    log_keep, log_noise = torch.log(n * alpha), torch.log1p(-alpha)  # (B, 1, 1): 1 - alpha = t > 0
    log_xbar_theta = torch.logaddexp(log_keep + logp, log_noise)  # (B, L, N)
    hot = F.one_hot(x0, n).bool()  # (B, L, N)
    log_xbar = torch.where(hot, torch.logaddexp(log_keep, log_noise), log_noise)  # (B, L, N)
    z = xt.unsqueeze(-1)  # (B, L, 1)
    log_r = log_xbar_theta - log_xbar_theta.gather(-1, z)  # (B, L, N)
    log_s = log_xbar - log_xbar.gather(-1, z)  # (B, L, N)
    d = log_r - log_s
    terms = log_s.exp() * (torch.expm1(d) - d)  # (B, L, N), >= 0
    return terms.sum(-1) / (n * alpha.reshape(-1, 1))  # (B, L)


def uniform_posterior_logits(logits: torch.Tensor, xt: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """(B, L, N) log p(x0 | x_t) of a model trained on uniform_elbo_terms: what it predicts for the clean text.

    That loss reads the network's softmax x_theta only through xbar_theta's ratios, and the true ratios are
    xbar of p(x0_i | the other positions of x_t): its optimum is x_theta = p(x0_i | x_t without position i),
    a prediction that leaves position i's own token out (a model that copies its input scores worse).
    The own token is the strongest evidence there is (at t = 0.3, 70% of the positions hold their clean
    character), so it is put back by Bayes: p(x0 = x | x_t) ∝ x_theta(x) q(z | x), q(z | x) = (1 - t)[x = z]
    + t/N, i.e. log(1 + N (1 - t) / t) added to the logit of z = x_t and nothing elsewhere.
    Reading x_theta itself as the denoised text predicts the characters' frequencies from context alone
    (mostly spaces for Shakespeare) and forgets every token a sampler has accepted.

    logits (B, L, V) with [MASK] the last id (dropped); xt (B, L) ids < V - 1; t (B,) the noise level the
    model was told (clamped at 1e-6: t = 0 is the canvas itself).
    """
    n = logits.shape[-1] - 1
    logp = F.log_softmax(logits.float()[..., :n], dim=-1)  # (B, L, N) x_theta
    t = t.float().reshape(-1, 1, 1).clamp(min=1e-6)  # (B, 1, 1)
    own = torch.log1p(n * (1.0 - t) / t).expand(*xt.shape, 1)  # (B, L, 1) log q(z|z) - log q(z|x != z)
    return F.log_softmax(logp.scatter_add(-1, xt.unsqueeze(-1), own), dim=-1)  # (B, L, N)


def uniform_loss(model, x0: torch.Tensor, eps: float = 1e-3, stratified: bool = True,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """One training loss of the uniform-state process on clean batch x0 (B, L): the per-token NELBO."""
    t, xt, _ = draw_uniform_noise(x0, model.config.mask_id, eps, stratified, generator)
    x0, xt, t = x0.to(model_device(model)), xt.to(model_device(model)), t.to(model_device(model))
    return uniform_loss_share(model, x0, xt, t, x0.shape[0])


def draw_uniform_noise(x0: torch.Tensor, n_tokens: int, eps: float = 1e-3, stratified: bool = True,
                       generator: torch.Generator | None = None):
    """t (B,), x_t (B, L) and the redrawn positions (B, L) of a uniform-state training batch, on the CPU
    (the generator's device), drawn for the whole batch as draw_noise is."""
    t = sample_t(x0.shape[0], eps, stratified, generator)  # (B,)
    xt, redrawn = forward_uniform(x0.cpu(), t, n_tokens, generator=generator)  # (B, L), (B, L)
    return t, xt, redrawn


def uniform_loss_share(model, x0: torch.Tensor, xt: torch.Tensor, t: torch.Tensor, n_rows: int) -> torch.Tensor:
    """These rows' share of a batch's uniform-state loss (the mean over n_rows rows of the per-token NELBO):
    the shares of a batch's slices sum to the loss of the whole batch. x0, xt (b, L), t (b,)."""
    terms = uniform_elbo_terms(model(xt, t), x0, xt, t)  # (b, L)
    return terms.mean(dim=1).sum() / n_rows


@torch.no_grad()
def uniform_nelbo(model, tokens: torch.Tensor, n_t: int = 8, seed: int = 0, batch_size: int = 64,
                  eps: float = 1e-3) -> dict:
    """Deterministic negative-ELBO estimate of a uniform-state model on held-out tokens (N, L): nelbo's
    stratified times and fixed-seed noise, with uniform_elbo_terms in place of the masked CE."""
    device, n_tokens = model_device(model), model.config.mask_id
    g = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, tokens.shape[0], batch_size):
        x0 = tokens[start:start + batch_size]
        for k in range(n_t):
            t = eps + (1 - eps) * (k + torch.rand(x0.shape[0], generator=g)) / n_t  # (b,), stratum k
            xt, _ = forward_uniform(x0, t, n_tokens, generator=g)
            xd, xtd, td = x0.to(device), xt.to(device), t.to(device)
            total += uniform_elbo_terms(model(xtd, td), xd, xtd, td).mean(dim=1).sum().item()
            count += x0.shape[0]
    model.train(was_training)
    nats = total / count
    return {"nats_per_char": nats, "bits_per_char": nats / math.log(2)}


@torch.no_grad()
def uniform_accuracy(model, tokens: torch.Tensor, t: float, seed: int = 0, batch_size: int = 64) -> dict:
    """Denoising accuracy of a uniform-state model at noise level t on held-out tokens (N, L), fixed-seed noise.

    The prediction is the argmax of p(x0 | x_t) (uniform_posterior_logits), the network's output with the
    evidence of each position's own token put back. Returns {"all": argmax == x0 over every position,
    "changed": over the positions whose token the noise changed (the model is not told which: the uniform
    process's counterpart of masked_accuracy)}."""
    device, n_tokens = model_device(model), model.config.mask_id
    g = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    hits, changed_hits, changed = 0, 0, 0
    for start in range(0, tokens.shape[0], batch_size):
        x0 = tokens[start:start + batch_size]
        xt, _ = forward_uniform(x0, t, n_tokens, generator=g)
        x0, xt = x0.to(device), xt.to(device)
        tt = torch.full((x0.shape[0],), t, device=device)
        right = uniform_posterior_logits(model(xt, tt), xt, tt).argmax(-1) == x0  # (b, L)
        moved = xt != x0
        hits += right.sum().item()
        changed_hits += right[moved].sum().item()
        changed += moved.sum().item()
    model.train(was_training)
    return {"all": hits / tokens.numel(), "changed": changed_hits / max(changed, 1)}
