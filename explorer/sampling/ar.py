"""The autoregressive baseline sampler: left to right, one token per model call, KV cache.

It uses the same proposal rule as the diffusion sampler (temperature and its annealing, top-k then
top-p, float64 inverse-CDF draws, [MASK] excluded) and returns the same Trajectory type (kind="ar", one
step per generated token, NFE = tokens generated), so the dashboard can show both side by side.
Knobs that only make sense for diffusion (steps, strategy, schedule, blocks, threshold, remask)
are ignored.

The causal model was never trained to predict position 0, so generation needs at least one given
token: the prompt, or when there is none a start token fixed at position 0 ("\\n" if the vocabulary
has it, which makes samples start at a line boundary; otherwise one drawn uniformly from the
generator). The start token counts as fixed, not generated. The canvas is the run's plan (plan.py:
plan_run gives a causal model its AR canvas), as for diffusion.

Why this is not step.py's step: an AR step is another process, not a diffusion step with other knobs.
It calls the model on the prefix only (with a KV cache), gets one distribution per row for the next
position, and always commits that one position: there is no canvas of masked positions to score,
rank, choose among or revise, and no model call to skip. What both share is the proposal rule
(proposals.draw / draw_rows: the same temperature, top-k / top-p and inverse-CDF draws, one uniform per
row from the row's generator) and the Trajectory they record.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..devices import model_device
from ..model import KVCache
from .config import SamplerConfig
from .plan import RunPlan, start_token
from .proposals import draw, draw_rows
from .recorder import Recorder
from .sampler import as_config, eval_mode, resolve_generators, resolve_plan
from .step import NAN, initial_state
from .trajectory import Trajectory


def _next_logits(model, x: torch.Tensor, pos: int, cache: KVCache | None) -> torch.Tensor:
    """(B, V) logits for position `pos` given x[:, :pos]."""
    if cache is None:  # the baseline without a cache: recompute the whole prefix every time
        return model(x[:, :pos])[:, -1]
    if cache.length == 0:  # first call: the whole prefix once
        return model(x[:, :pos], cache=cache)[:, -1]
    return model(x[:, pos - 1:pos], cache=cache)[:, -1]  # then one new token per call


def _temperature(config: SamplerConfig, i: int, n: int) -> float:
    if config.temperature_end is None or n < 2:
        return config.temperature
    return config.temperature + (config.temperature_end - config.temperature) * i / (n - 1)


def _ar_step(model, config, generator, st, pos: int, i: int, n: int, cache) -> tuple:
    """Generate position `pos` in every row; returns (scores, committed, t, temperature)."""
    mask_id = model.config.mask_id
    logits = _next_logits(model, st.x, pos, cache).float()  # (B, V)
    logits[:, mask_id] = float("-inf")
    temperature = _temperature(config, i, n)
    if isinstance(generator, list):  # one generator per row: each draws what its row alone draws
        rows = torch.arange(len(generator), device=logits.device)
        tok = draw_rows(logits, rows, [temperature] * len(generator), generator, config.top_k, config.top_p)
    else:
        tok = draw(logits, temperature, generator, config.top_k, config.top_p)  # (B,)
    conf = torch.softmax(logits, dim=-1).gather(-1, tok[:, None]).squeeze(-1)  # (B,)
    t = float((st.x == mask_id).float().mean())
    st.x = st.x.clone()  # keep earlier rows intact for whoever still holds them
    st.x[:, pos] = tok
    st.committed_at[:, pos] = i
    st.commit_conf[:, pos] = conf
    scores = torch.full(st.x.shape, NAN, device=st.x.device)  # (B, L): AR scores only the new position
    scores[:, pos] = conf
    committed = torch.zeros(st.x.shape, dtype=torch.bool, device=st.x.device)
    committed[:, pos] = True
    return scores, committed, t, temperature


def sample_ar(ar_model, config: SamplerConfig, *, batch_size: int | None = None, length: int | None = None,
              prompt: str | None = None, plan: RunPlan | None = None, generator=None, use_cache: bool = True,
              record: bool = True, on_step=None, should_stop=None) -> Trajectory:
    """Generate `batch_size` continuations from a causal model; see the module docstring.

    length: canvas length including the prompt (default: sampling.config.default_length). prompt: plain text,
    or a template whose gaps are all at the end. plan: a RunPlan of this model and config
    (plan.plan_run) instead of length / prompt. use_cache=False recomputes the whole prefix per
    token (the benchmark's baseline); greedy outputs are identical either way. generator, batch_size,
    on_step and should_stop work as in sample() (a list of generators: one per row, each row drawing
    what it would alone, its start token included).
    """
    config = as_config(config)
    batch_size, gen = resolve_generators(generator, batch_size, config.seed)
    if getattr(ar_model.config, "kind", None) != "ar":
        raise ValueError(f"sample_ar needs an autoregressive model (kind 'ar'), got kind "
                         f"{getattr(ar_model.config, 'kind', None)!r}; use sample() for diffusion models")
    per_row = isinstance(gen, list)
    plan = resolve_plan(ar_model, config, plan, length, prompt, named="prompt")  # its start token from the seed
    canvas = plan.canvas
    first = int(np.argmin(canvas.fixed))  # first position to generate
    n = canvas.length - first
    st = initial_state(canvas, batch_size, model_device(ar_model))
    if plan.start_token:  # each row's own start token, from its generator as a run without a plan draws it
        # (drawn only where the vocabulary lacks "\n"; the plan shows the one its config's seed draws)
        st.x[:, 0] = torch.tensor([start_token(ar_model, g) for g in (gen if per_row else [gen])],
                                  dtype=st.x.dtype).expand(batch_size)
    recorder = Recorder(st.x, record, on_step, should_stop)
    cache = KVCache() if use_cache else None
    with torch.no_grad(), eval_mode(ar_model):
        for i, pos in enumerate(range(first, canvas.length)):
            start = time.perf_counter()
            scores, committed, t, temp = _ar_step(ar_model, config, gen, st, pos, i, n, cache)
            recorder.add(i, st.x, st.x, scores, scores, committed, torch.zeros_like(committed), t=t,
                         temperature=temp, called=True, seconds=time.perf_counter() - start)
    return recorder.finish(
        final=st.x, committed_at=st.committed_at, commit_confidence=st.commit_conf, fixed=canvas.fixed,
        nfe=n, config=config, seed=config.seed if generator is None else -1, mask_id=ar_model.config.mask_id,
        kind="ar", tokenizer=getattr(ar_model, "tokenizer", None), blocks=plan.blocks.copy())


