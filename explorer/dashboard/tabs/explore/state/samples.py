"""Explore's several samples in one view (the 5- and 8-sample showcases and the prompting exercise of
"Generation: Iterative Unmasking", the guide's prompt completions): `samples` runs at the session's
knobs, one per seed (seed, seed + 1, ...), for the sidebar's template or for each of several `prompts`,
as the result of a runtime Task. Each row is the real sampler's run of its seed alone (one CPU generator
per row: sampling.sample_many / sample_any), so row (template, seed) is the text the run above shows at
that seed.

A link carries them as `samples=5` and `prompts=ROMEO:|To be,|First C`; both are capped (MAX_SAMPLES,
MAX_PROMPTS) so a link cannot ask for unbounded work, and the server's limits count the whole set.
"""
from __future__ import annotations

import param
import torch

from .....sampling import sample_any, sample_many
from .....sampling.template import as_chat
from ....runtime.limits import run_calls, table_bytes
from ....runtime.tasks import Task
from ....session import run_plan, start_canvas
from ...base import TabState

MAX_SAMPLES = 8
MAX_PROMPTS = 5
PROMPT_SEP = "|"  # between prompts: survives a link's encoding (%7C) and is no character of the shipped models


def parse_prompts(text: str) -> tuple[str, ...]:
    """'ROMEO: | To be,' -> the prompts between '|', their outer spaces and newlines dropped (as the
    sidebar's template is), empty ones left out, at most MAX_PROMPTS (ValueError otherwise)."""
    out = tuple(s.strip() for s in str(text).split(PROMPT_SEP) if s.strip())
    if len(out) > MAX_PROMPTS:
        raise ValueError(f"{len(out)} prompts; at most {MAX_PROMPTS} (separated by {PROMPT_SEP!r})")
    return out


class SamplesState(TabState):
    """How many seeds and which prompts, and `samples_task`: the Task whose result is their rows."""

    samples = param.Integer(1, bounds=(1, MAX_SAMPLES), label="Samples (seeds)",
                            doc="Runs shown at once at the sidebar's knobs, one per seed: seed, seed + 1, …; "
                                "each is the text that seed gives alone (1: the run above only)")
    prompts = param.String("", label=f"Prompts (separated by {PROMPT_SEP})",
                           doc=f"Several templates at once, e.g. ROMEO: {PROMPT_SEP} To be, {PROMPT_SEP} First C: "
                               f"each sampled at the sidebar's knobs and length, for each seed; empty: the "
                               f"sidebar's template; at most {MAX_PROMPTS}")
    samples_notice = param.String("", doc="Why the several samples are not shown ('' = nothing wrong)")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        self.samples_task = Task("several samples", session.device, session.dispatch, session.share)

    def several_on(self) -> bool:
        """More than the one run was asked for (else nothing is computed or shown)."""
        return self.samples > 1 or bool(self.prompts.strip())

    def check_link_value(self, name: str, value) -> None:
        if name == "prompts":
            parse_prompts(value)

    def several_rows(self) -> list[tuple[str, int]]:
        """(template, seed) of every row, prompt by prompt, seed by seed (ValueError: a bad prompt list)."""
        s = self.session
        templates = parse_prompts(self.prompts) or (s.template.strip(),)
        return [(template, s.seed + j) for template in templates for j in range(self.samples)]

    @param.depends("samples", "prompts", watch=True)
    def _several_asked(self) -> None:
        # held (a link to another tab) or a run under way: the run's end starts them (ExploreState)
        if self.session.model is not None and not getattr(self, "held", False) and not getattr(self, "running", False):
            self.sample_several()

    def sample_several(self, *, wait: bool = False) -> bool:
        """The rows at the session's knobs in the background; their texts become `samples_task.result`.
        False, with `samples_notice` set, when there is no model, a prompt does not fit it or the set
        is over the server's limits; False and nothing shown when only the one run is asked for."""
        s, task = self.session, self.samples_task
        if not self.several_on():
            task.clear()
            self.samples_notice = ""
            return False
        try:
            if s.model is None:
                raise ValueError("no model is loaded yet")
            model, config, rows = s.model, s.sampler_config(), self.several_rows()
            canvases = {t: start_canvas(model, self._chat(model, t), s.length, s.seed) for t, _ in rows}
            steps = max(run_plan(model, config, c).max_steps for c in canvases.values())
            s.share.limits.check_calls(f"{len(rows)} samples", run_calls(max(steps, 1), config.cfg_scale > 0) * len(rows))
            s.share.reserve("explore.samples", table_bytes(len(rows), s.length), f"{len(rows)} samples")
        except ValueError as e:  # LimitExceeded too
            self.samples_notice = f"several samples: {e}"
            task.clear()
            return False
        self.samples_notice = ""
        seeds = sorted({seed for _, seed in rows})
        work = lambda job, report: _sample_rows(model, config, canvases, seeds, job)  # noqa: E731
        return task.start(work, status=f"sampling {len(rows)} …", wait=wait) is not None

    def _chat(self, model, template: str) -> str:
        """A prompt as the sampler gets it (Session.prompt_template: in the chat template when chat is on)."""
        return as_chat(template, model.tokenizer) if self.session.chat and template else template

    def close(self) -> None:
        self.samples_task.close()
        self.session.share.release("explore.samples")
        super().close()


def _sample_rows(model, config, canvases: dict, seeds: list[int], job) -> dict:
    """Every (template, seed) row, one CPU generator per row seeded as its solo run is: a diffusion model's
    prompts as one sample_many (shared model calls), an AR model's one after another."""
    def gens():
        return [torch.Generator().manual_seed(seed) for seed in seeds]

    stop = lambda: job.cancelled  # noqa: E731  (also lends the device to waiting runs)
    plans = {t: run_plan(model, config, c) for t, c in canvases.items()}
    if getattr(model.config, "kind", "diffusion") == "diffusion":
        runs = [{"config": config, "plan": plan, "generator": gens(), "record": False, "should_stop": stop}
                for plan in plans.values()]
        trajs = sample_many(model, runs)
    else:
        trajs = [sample_any(model, config, plan=plan, generator=gens(), record=False, should_stop=stop)
                 for plan in plans.values()]
    rows = [{"template": t, "seed": seed, "text": text}
            for t, traj in zip(plans, trajs) if traj is not None for seed, text in zip(seeds, traj.texts())]
    return {"rows": rows, "seeds": seeds, "templates": list(plans)}
