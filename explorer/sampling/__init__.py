"""Sampling: the batched masked-diffusion sampler, the AR baseline, and their shared data types.

    from explorer.sampling import SamplerConfig, sample_any
    traj = sample_any(model, SamplerConfig(steps=32, strategy="margin"), batch_size=8, template="ROMEO:")
    traj.texts()

Files: config.py (knobs), template.py (█ / [___] notation), plan.py (a run's plan: canvas, blocks,
steps, rows, before it runs: plan_run), proposals.py (temperature, top-k/top-p, inverse-CDF draws),
strategies.py and schedules.py (registries), step.py (one diffusion step on a batch of rows with
per-row settings), sampler.py (a diffusion run), resident.py (a one-row run under a schedule, planned on
the host so its steps never wait for the device: a GPU's live run), merged.py and packing.py (many diffusion runs as one
batch, through shared model calls: sample_many), cache.py (block diffusion over a key/value cache), ar.py
(AR baseline), recorder.py + trajectory.py
(what a run returns).
"""
from __future__ import annotations

from .ar import sample_ar
from .config import SamplerConfig
from .merged import merge_key
from .packing import sample_many
from .plan import RunPlan, plan_run, start_canvas
from .recorder import SamplingCancelled
from .sampler import sample
from .schedules import SCHEDULES, get_schedule
from .strategies import STRATEGIES, get_strategy
from .template import BLANK, Canvas, blank_canvas, parse_template
from .trajectory import StepRecord, Trajectory


def sample_any(model, config: SamplerConfig, **kwargs) -> Trajectory:
    """sample() for diffusion models, sample_ar() for AR ones; `template` is taken as the AR prompt
    (a `plan` from plan_run goes to either as it is)."""
    if getattr(model.config, "kind", "diffusion") == "ar":
        if getattr(model.config, "family", None) == "causal":
            raise ValueError("a Hugging Face causal LM is a judge of text here (--judge), not a model to sample")
        if "template" in kwargs:
            if kwargs.get("prompt") is not None:
                raise ValueError("give either template or prompt, not both")
            kwargs["prompt"] = kwargs.pop("template")
        return sample_ar(model, config, **kwargs)
    if "prompt" in kwargs:
        kwargs["template"] = kwargs.pop("prompt")
    if "use_cache" in kwargs:
        kwargs.pop("use_cache")  # only meaningful for AR models; accepted so callers need not branch
    return sample(model, config, **kwargs)


__all__ = ["sample", "sample_ar", "sample_any", "sample_many", "SamplerConfig", "Trajectory", "StepRecord",
           "SamplingCancelled", "STRATEGIES", "SCHEDULES", "get_strategy", "get_schedule",
           "parse_template", "blank_canvas", "Canvas", "BLANK", "RunPlan", "plan_run", "start_canvas", "merge_key"]
