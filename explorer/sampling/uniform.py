"""The uniform-state process: DiffusionGemma's sampler (an EB-sampler over random-token noise).

A uniform-state model denoises tokens redrawn uniformly from the vocabulary, never [MASK]. Its run, per
block of positions (blocks one after another, left to right):
  1. the block starts as uniformly random tokens;
  2. each step calls the model on the block (with a cache: after the prompt and the earlier blocks, which
     the model's encoder wrote once; without one: the whole canvas) and, where the model takes it, the
     previous step's tempered logits (self-conditioning);
  3. the logits are divided by the step's temperature, annealed linearly from `temperature` (t_max) at the
     first step towards `temperature_end` (t_min): T = t_min + (t_max - t_min) * (N - s) / N at step s of
     N = `steps` (DiffusionGemma's schedule: t_min itself is never reached), constant without an end;
  4. a token is drawn at every position of the block (the denoised canvas) and the draft is the argmax;
  5. acceptance, the entropy bound (EB-sampler, Ben-Hamu et al. 2025; `entropy_bound`): the positions
     with the lowest entropy are accepted while the sum of their entropies minus the largest of them is
     at most the bound; the masked process's entropy-bound commit rule (step.py, rule 11) adds the same
     sum in its strategy's order;
  6. re-noising: every position not accepted gets a fresh random token (accepted ones are not kept for
     good: each step accepts anew from the whole block);
  7. the block stops once it is stable and confident: its draft unchanged for `stable_steps` steps and
     the mean entropy of its tempered distributions below `stop_entropy` (None: all `steps` steps);
     its tokens then settle to the draft.
A finished row of a batch waits for the others (its canvas held); the next block starts when every row
is done. The placeholder of positions whose block has not started is the model's mask id (only shown,
never fed to a cached model). A cached model whose generation settings name end-of-sequence tokens ends a
row at the block that holds one (the tokens after it, and later blocks, its pad token), and generates no
further block once every row has ended (generate's _finalize_canvas).

Randomness, and how it reproduces transformers' DiffusionGemma `generate` token for token: generate draws
from torch's global generator, in this order: per block, torch.randint(0, V, (B, Lb)) for the start;
per step, torch.multinomial(softmax(logits / T, float32).view(-1, V), 1) for the denoised canvas (all rows,
finished ones too), then torch.randint(0, V, (B, Lb)) for the re-noising. This module makes the same
calls, with the same shapes, dtypes and order, on the run's CPU generator (explicit, seeded from the
config's seed), so a CPU run with seed s equals generate after torch.manual_seed(s). The temperature is
generate's own float32 arithmetic (an int32 step over N), the entropy torch.distributions.Categorical's,
the sort torch.sort's. On another device the draws are made there, as generate makes them, from a
generator of that device seeded with the run's seed (given a generator of its own, the run seeds it with a
number drawn from that one): copying a real model's (256, 262144) probabilities to the CPU at every step
would cost more than the step. So a seed gives one run per device type, not one run on every device.

Our own uniform-state models (a checkpoint whose metadata says process=uniform) have no cache and no
self-conditioning: the block is the whole canvas by default, the model sees the whole canvas with
t = the fraction of positions it sees as noise, and noise is drawn from the real tokens (the ids below
[MASK], which is never proposed). Their network leaves each position's own token out (the optimum of the
ELBO they train on), so what a step draws from is p(x0 | x_t), that output with the own token put back
(own_model_logits): a token accepted at one step is evidence for itself at the next, and the canvas clears.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..devices import model_device
from ..diffusion import uniform_posterior_logits
from .recorder import Recorder
from .step import NAN, ModelCall

DEFAULT_BOUND = 0.1  # entropy_bound when a uniform-state run is given none: DiffusionGemma's default


def model_process(model) -> str:
    """The forward process a model denoises: "uniform" or "masked" (its config's `process`, else its
    checkpoint metadata's, else masked: every checkpoint from before the metadata named one)."""
    process = getattr(model.config, "process", None) or (getattr(model, "meta", None) or {}).get("process")
    return process or "masked"


def entropy_bound(config) -> float:
    """The entropy bound a uniform-state run accepts by: the config's, else DEFAULT_BOUND."""
    return DEFAULT_BOUND if config.entropy_bound is None else config.entropy_bound


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """(..., ) entropy in nats of softmax(logits) (..., V): torch.distributions.Categorical's, as
    DiffusionGemma computes it (the same sums, so the same accepted set)."""
    return torch.distributions.Categorical(logits=logits, validate_args=False).entropy()


def entropy_bound_accept(entropy: torch.Tensor, bound: float) -> torch.Tensor:
    """(B, L) bool: the EB-sampler's accepted positions of each row. Sorted by entropy (ascending), a
    position is accepted when the entropies up to it sum to at most `bound` plus its own (the largest so
    far): sum_i h_i - max_i h_i <= bound. The first position always qualifies."""
    ordered, order = torch.sort(entropy, dim=-1, descending=False)  # (B, L) each
    keep = ordered.cumsum(dim=-1) - ordered <= bound  # (B, L) in sorted order
    return torch.scatter(torch.zeros_like(keep), dim=-1, index=order, src=keep)


def block_temperature(config, s: int, steps: int) -> torch.Tensor:
    """Step s's temperature (0-d float32): DiffusionGemma's LinearTemperatureScheduleLogitsProcessor at
    its cur_step = steps - s (it counts the steps left), in its own arithmetic."""
    t_max = float(config.temperature)
    t_min = t_max if config.temperature_end is None else float(config.temperature_end)
    left = torch.tensor(steps - s, dtype=torch.int32)
    return t_min + (t_max - t_min) * (left / steps)


@dataclass(eq=False)
class _Block:
    """One block's state across its steps (B rows, Lb positions)."""

    cur: torch.Tensor  # (B, Lb) the canvas the model sees next (DiffusionGemma's current canvas)
    draft: torch.Tensor  # (B, Lb) argmax of the last tempered logits
    done: torch.Tensor  # (B,) bool: stable and confident (held from then on)
    sc: torch.Tensor | None = None  # (B, Lb, V) last tempered logits (self-conditioning)
    history: torch.Tensor | None = None  # (stable_steps, B, Lb) earlier drafts, -1 before the first
    entropy: torch.Tensor | None = field(default=None, repr=False)  # (B, Lb) of the last step


class _Recorder(Recorder):
    """The sampler's Recorder plus what the uniform process adds: each step's settled positions, on
    the StepRecord handed to on_step and stacked into the Trajectory, and process="uniform"."""

    def __init__(self, x0, record, on_step, should_stop, clock):
        self.settled: list[np.ndarray] = []
        self._settled = None  # the step being added
        self._user_on_step = on_step
        self._start = None if on_step is None else x0.cpu().numpy().copy()  # (B, L) the first block's noise
        super().__init__(x0, record, None if on_step is None else self._on_step, should_stop, clock=clock)

    def _on_step(self, rec):
        rec.settled, rec.process = self._settled, "uniform"
        rec.start = self._start if rec.index == 0 else None
        return self._user_on_step(rec)

    def add(self, *args, settled: torch.Tensor, **kwargs) -> None:
        self._settled = settled.cpu().numpy() if self.record or self._user_on_step is not None else None
        if self.record:
            self.settled.append(self._settled)
        super().add(*args, **kwargs)

    def finish(self, **kwargs):
        traj = super().finish(**kwargs)
        B, L = traj.final.shape
        settled = (np.stack(self.settled) if self.settled else np.zeros((0, B, L), bool)) if self.record else None
        return replace(traj, process="uniform", settled=settled)


def check_uniform(model, config, generator) -> None:
    """What a uniform-state run refuses, before it starts."""
    if isinstance(generator, list):
        raise ValueError("a uniform-state run draws its noise for the whole batch from one generator (as "
                         "DiffusionGemma does); pass one torch.Generator, not one per row")
    if config.temperature == 0 and config.temperature_end not in (None, 0):
        raise ValueError("a uniform-state run anneals from temperature to temperature_end; temperature 0 "
                         "(greedy) takes no end")


def noise_ids(model) -> int:
    """How many ids noise is drawn from: a cached (DiffusionGemma-style) model's whole vocabulary, as
    generate draws; our own models', the real tokens (the ids below [MASK], the last id)."""
    cfg = model.config
    return cfg.vocab_size if getattr(cfg, "cached", False) else cfg.mask_id


def _randint(n: int, shape, generator: torch.Generator, device) -> torch.Tensor:
    return torch.randint(0, n, shape, generator=generator, device=device)  # (B, Lb)


def device_generator(generator: torch.Generator, seed: int, device) -> torch.Generator:
    """Where the draws are made (module docstring): the run's CPU generator on the CPU; elsewhere a generator
    of the model's device seeded with the run's seed (seed -1: a generator was given, the seed is drawn from it)."""
    device = torch.device(device)
    if device.type == "cpu":
        return generator
    if seed < 0:
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)


def walk(model, config, plan, batch_size: int, generator, recording: tuple, seed: int, clock):
    """The run of `plan` (sampler.sample_steps' generator: it yields ModelCalls and returns the
    Trajectory), checked before it starts. recording: (record, on_step, should_stop); clock: the run's
    sampler.RunClock."""
    check_uniform(model, config, generator)
    draws = device_generator(generator, seed, model_device(model))
    return _walk(model, config, plan, batch_size, draws, recording, seed, clock)


def _walk(model, config, plan, batch_size: int, generator, recording: tuple, seed: int, clock):
    device = model_device(model)
    cfg = model.config
    x = torch.as_tensor(plan.canvas.tokens, device=device).expand(batch_size, -1).clone()  # (B, L) shown
    settled_at = torch.full_like(x, -1)
    settle_conf = torch.full(x.shape, NAN, dtype=torch.float32, device=device)
    cached = bool(getattr(cfg, "cached", False))
    cache = model.new_cache() if cached else None
    if cached:
        start = int(plan.canvas.fixed.sum())  # the prompt: a cached model's canvas is a prefix (plan.py)
        prefix = x[:, :start] if start else torch.full((batch_size, 1), cfg.bos_id, device=device)
        cache.append(prefix)
    state = {"step": 0, "nfe": 0, "recorder": None}
    ended = torch.zeros(batch_size, dtype=torch.bool, device=device)  # rows past their end-of-sequence
    for b, steps in enumerate(plan.steps):
        idx = torch.as_tensor(np.flatnonzero(plan.blocks == b), device=device)  # the block's positions
        x[:, idx] = _randint(noise_ids(model), (batch_size, idx.numel()), generator, device)  # step 1
        if state["recorder"] is None:  # row 0: the canvas with the first block's noise
            state["recorder"] = _Recorder(x, *recording, clock=clock)
        yield from _run_block(model, config, x, idx, steps, generator, cache, clock, state,
                              settled_at, settle_conf)
        if cached and getattr(cfg, "eos_ids", ()):
            ended = _end_rows(cfg, x, idx, ended)
            if bool(ended.all()):  # generate stops: what is left is padding
                rest = torch.as_tensor(np.flatnonzero(plan.blocks > b), device=device)
                if cfg.pad_id is not None and rest.numel():
                    x[:, rest] = cfg.pad_id
                break
        if cached:
            cache.append(x[:, idx])  # the block's tokens: the next block's first call encodes them
    return state["recorder"].finish(
        final=x, committed_at=settled_at, commit_confidence=settle_conf, fixed=plan.canvas.fixed,
        nfe=state["nfe"], config=config, seed=seed, mask_id=cfg.mask_id, kind="diffusion",
        tokenizer=getattr(model, "tokenizer", None), blocks=plan.blocks.copy())


def _end_rows(cfg, x: torch.Tensor, idx: torch.Tensor, ended: torch.Tensor) -> torch.Tensor:
    """generate's _finalize_canvas on a settled block: a row that ended before gets pad there; a row whose
    block holds an end-of-sequence token ends, its tokens after the first one pad. Returns the rows
    ended (B,)."""
    eos = torch.tensor(cfg.eos_ids, device=x.device)
    block = x[:, idx]  # (B, Lb)
    now = torch.isin(block, eos).any(dim=1) | ended  # (B,)
    if cfg.pad_id is not None and bool(now.any()):
        block = torch.where(ended[:, None], cfg.pad_id, block)
        is_eos = torch.isin(block, eos)
        seen = is_eos.cumsum(dim=1)  # (B, Lb)
        block = block.masked_fill((seen > 0) & ~((seen == 1) & is_eos), cfg.pad_id)
        x[:, idx] = block
    return now


def _call(model, x: torch.Tensor, idx: torch.Tensor, blk: _Block, cache, n_noise: torch.Tensor) -> ModelCall:
    """The model call of one step: the block after the cache, or the whole canvas (own models)."""
    if cache is not None:
        sc = blk.sc if getattr(model.config, "self_conditioning", False) else None
        t = n_noise.float() / idx.numel()
        return ModelCall(blk.cur, t, kwargs={"cache": cache, "self_conditioning": sc})
    full = x.index_copy(1, idx, blk.cur)  # (B, L) the canvas with the block's current tokens
    t = n_noise.float() / idx.numel()  # (B,) the share of the block the model sees as noise
    return ModelCall(full, t)


def _run_block(model, config, x, idx, steps: int, generator, cache, clock, state, settled_at, settle_conf):
    """A block's steps (module docstring, 1-7) from the noise x holds there; writes its settled tokens
    into x."""
    B, Lb, device = x.shape[0], idx.numel(), x.device
    start = x[:, idx]  # (B, Lb)
    blk = _Block(cur=start, draft=start, done=torch.zeros(B, dtype=torch.bool, device=device))
    n_noise = torch.full((B,), Lb, device=device)
    bound = entropy_bound(config)
    for s in range(steps):
        began = clock()
        temperature = block_temperature(config, s, steps)
        call = _call(model, x, idx, blk, cache, n_noise)
        clock.pause()
        yield [call]
        clock.resume(call.seconds)
        state["nfe"] += 1
        logits = call.logits if cache is not None else call.logits[:, idx]  # (B, Lb, V)
        ev = _denoise(model, logits, blk, temperature, bound, generator, config, n_noise.float() / Lb)
        was_done = blk.done.clone()
        blk.done |= _stop(config, blk, ev)
        last = bool(blk.done.all()) or s == steps - 1
        settle = (blk.done & ~was_done) | (~was_done if last else torch.zeros_like(was_done))  # (B,)
        n_noise = (~ev["accepted"]).sum(dim=1)
        shown = torch.where(settle[:, None], blk.draft, torch.where(was_done[:, None], x[:, idx], blk.cur))
        x[:, idx] = shown
        settled_at[:, idx] = torch.where(settle[:, None], state["step"], settled_at[:, idx])
        settle_conf[:, idx] = torch.where(settle[:, None], ev["top"], settle_conf[:, idx])
        _record(state["recorder"], x, idx, ev, was_done, settle, state["step"], float(temperature), began, clock,
                n_noise.float().mean() / Lb)
        state["step"] += 1
        if last:
            return


def _denoise(model, logits, blk: _Block, temperature: torch.Tensor, bound: float, generator, config,
             t: torch.Tensor) -> dict:
    """Steps 3-6 on the block: draw, accept, re-noise (DiffusionGemma's _denoising_step, its ops in order).
    t (B,): the noise level the model was told."""
    B, Lb, V = logits.shape
    if not getattr(model.config, "cached", False):
        logits = own_model_logits(logits, blk.cur, t)
    greedy = float(temperature) == 0
    processed = logits if greedy else logits / temperature  # (B, Lb, V)
    probs = torch.softmax(processed, dim=-1, dtype=torch.float32)  # (B, Lb, V)
    if greedy:
        drawn = processed.argmax(dim=-1)
        entropy = torch.zeros((B, Lb), device=logits.device)
    else:
        drawn = torch.multinomial(probs.view(-1, V), num_samples=1, generator=generator).view(B, Lb)
        entropy = token_entropy(processed)  # (B, Lb)
    draft = processed.argmax(dim=-1)  # (B, Lb)
    accepted = entropy_bound_accept(entropy, bound)  # (B, Lb)
    kept = torch.where(accepted, drawn, blk.cur)
    noise = _randint(noise_ids(model), (B, Lb), generator, logits.device)
    renoised = torch.where(~accepted, noise, kept)  # (B, Lb)
    done = blk.done[:, None]
    # a finished row is held as it was (generate's torch.where on its finished rows)
    blk.draft = torch.where(done, blk.draft, draft)
    blk.cur = torch.where(done, blk.cur, renoised)
    held = processed if blk.sc is None else torch.where(done[..., None], blk.sc, processed)
    blk.sc, blk.entropy = held, entropy
    conf = probs.gather(-1, drawn[..., None])[..., 0]  # (B, Lb) p(drawn) under the tempered distribution
    top = probs.gather(-1, draft[..., None])[..., 0]  # (B, Lb) p(draft)
    return {"drawn": drawn, "accepted": accepted & ~done, "renoised": ~accepted & ~done, "entropy": entropy,
            "conf": conf, "top": top}


def own_model_logits(logits: torch.Tensor, cur: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """(B, Lb, V) what our own uniform-state model predicts for the clean block: p(x0 | x_t), its network's
    output with each position's own token put back (diffusion.uniform_posterior_logits: the ELBO it was
    trained on leaves that token out), and [MASK], never a token of the text, at -inf.
    logits (B, Lb, V); cur (B, Lb) the block the model saw; t (B,) the noise level it was told."""
    post = uniform_posterior_logits(logits, cur, t)  # (B, Lb, V - 1)
    return torch.cat([post, post.new_full((*post.shape[:-1], 1), float("-inf"))], dim=-1)  # (B, Lb, V)


def _stop(config, blk: _Block, ev: dict) -> torch.Tensor:
    """(B,) StableAndConfidentStoppingCriteria: the draft equals each of the last `stable_steps` drafts
    and the mean entropy of the tempered distributions is below stop_entropy."""
    B = blk.draft.shape[0]
    if config.stop_entropy is None:
        return torch.zeros(B, dtype=torch.bool, device=blk.draft.device)
    k = config.stable_steps
    if k == 0:
        stable = torch.ones(B, dtype=torch.bool, device=blk.draft.device)
    else:
        if blk.history is None:
            blk.history = torch.full((k, *blk.draft.shape), -1, dtype=blk.draft.dtype, device=blk.draft.device)
        stable = (blk.history == blk.draft[None]).all(dim=-1).all(dim=0)  # (B,)
        blk.history = torch.roll(blk.history, shifts=-1, dims=0)
        blk.history[-1] = blk.draft
    # the entropy of the held logits: a finished row's no longer matters (it stays finished)
    return stable & (ev["entropy"].mean(dim=-1) < config.stop_entropy)


def _record(recorder, x, idx, ev, was_done, settle, step: int, temperature: float, began: float, clock,
            t) -> None:
    """The step's events on the whole canvas: accepted (committed), re-noised (remasked), settled."""
    def spread(values, fill, dtype=None):  # (B, Lb) -> (B, L), `fill` outside the block
        out = torch.full(x.shape, fill, dtype=dtype or values.dtype, device=x.device)
        out[:, idx] = values
        return out

    settled = spread(settle[:, None].expand(-1, idx.numel()), False)
    live = ~was_done[:, None]  # (B, 1) rows still stepping
    proposals = x.index_copy(1, idx, torch.where(live, ev["drawn"], x[:, idx]))
    scores = spread(torch.where(live, -ev["entropy"].float(), NAN), NAN, torch.float32)
    conf = spread(torch.where(live, ev["conf"].float(), NAN), NAN, torch.float32)
    accepted = spread(ev["accepted"], False)
    renoised = spread(ev["renoised"], False) & ~settled  # a settling position keeps its draft
    recorder.add(step, x, proposals, scores, conf, accepted, renoised, t=float(t), temperature=temperature,
                 called=True, seconds=clock() - began, settled=settled)
