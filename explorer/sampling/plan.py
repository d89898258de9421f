"""The plan of one sampler run: what it starts from and how it will walk, known before it runs.

    from explorer.sampling import SamplerConfig, plan_run, sample
    plan = plan_run(model, SamplerConfig(steps=8, block_length=4), template="ROMEO:")
    plan.canvas.tokens, plan.blocks, plan.steps, plan.rows  # row 0, the blocks, steps per block, rows recorded
    traj = sample(model, plan.config, plan=plan)             # the run of exactly that plan

A RunPlan is the one place where a model, a config and a canvas (a length, a template or a chat prompt)
become what a run does: the starting canvas (tokens and which positions are given), the semi-AR blocks,
the steps of each block and the rows the run will record (the start canvas plus one per step). The
sampler builds its run from a plan (sample() makes one when given length / template), and the dashboard
draws row 0 and sizes its heatmap from the same plan before handing it to the sampler, so what the page
shows first is what the run starts from, never a re-derivation of it.

Rows are exact for schedule decoding (sum of the blocks' steps, + 1) and for the AR baseline (one step
per generated position). Threshold / factor decoding runs until every block is decoded: there the plan
holds a guess (`rows_exact` False) and `max_steps`, a bound it never passes (every step commits at
least one position and nothing is re-masked: SamplerConfig refuses remask with either; token editing adds
at most step.EDIT_POST_STEPS + 1 steps per block; under a schedule it ends a block filled before its last
step with post steps instead of its remaining steps, so there too `rows` is a guess).

For a causal (AR) model the canvas is the AR canvas: a prompt as a fixed prefix, or with no prompt a
start token at position 0 ("\\n" where the vocabulary has it, else one drawn from the config's seed:
`start_token` is then True, and a run draws its own from its generator, the same token for the same
seed).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .config import SamplerConfig, default_length
from .schedules import split_steps
from .step import EDIT_POST_STEPS
from .template import Canvas, as_chat, blank_canvas, parse_template
from .uniform import model_process

GUESSED_STEPS = 32  # threshold decoding's rows are unknown: the views start sized for this many steps


@dataclass(frozen=True, eq=False)
class RunPlan:
    """What one run starts from and how it walks (module docstring). Build it with plan_run."""

    kind: str  # "diffusion" or "ar" (the model's kind)
    config: SamplerConfig  # the knobs it was planned for (sample() refuses a plan of other knobs)
    canvas: Canvas  # the starting canvas: tokens (L,) with [MASK] where generated, fixed (L,)
    blocks: np.ndarray  # (L,) int64 block of each generated position, in order; -1 where fixed
    steps: tuple[int, ...] | None  # steps of each block; None under threshold / factor decoding
    rows: int  # rows the run records (start canvas + one per step): exact, or a guess (rows_exact)
    rows_exact: bool  # False for threshold / factor decoding: `rows` is then a guess
    max_steps: int  # steps it takes at most (= rows - 1 when exact)
    start_token: bool = False  # AR without a prompt: position 0 is a start token, not given text
    process: str = "masked"  # the model's forward process: "uniform" runs uniform.py's sampler

    @property
    def length(self) -> int:
        return self.canvas.length

    @property
    def n_generate(self) -> int:
        return self.canvas.n_generate

    @property
    def n_blocks(self) -> int:
        return int(self.blocks.max()) + 1

    @property
    def canvas_key(self) -> tuple:
        """Hashable and equal for equal starting canvases (runs that may share a batch)."""
        return (self.kind, self.canvas.tokens.tobytes(), self.canvas.fixed.tobytes())


def plan_blocks(fixed: np.ndarray, block_length: int) -> np.ndarray:
    """(L,) block index of every position to generate (runs of block_length, in order); -1 if fixed."""
    todo = np.flatnonzero(~fixed)
    blocks = np.full(fixed.shape, -1, dtype=np.int64)
    size = block_length if 0 < block_length < len(todo) else max(len(todo), 1)
    blocks[todo] = np.arange(len(todo)) // size
    return blocks


def make_canvas(model, length: int | None, template: str | None) -> Canvas:
    """The diffusion canvas from a template (needs the model's tokenizer) or a plain length."""
    cfg = model.config
    if template is not None:
        tok = getattr(model, "tokenizer", None)
        if tok is None:
            raise ValueError("a template needs the model's tokenizer: load the model with load_checkpoint, "
                             "or sample by length only")
        return parse_template(template, tok, length=length, context=cfg.block_size)
    return blank_canvas(default_length(model) if length is None else length, cfg.mask_id, cfg.block_size)


def start_token(model, generator: torch.Generator) -> int:
    """An AR run's start token without a prompt: "\\n" where the vocabulary has it (samples start at a
    line boundary), else one drawn uniformly from the generator ([MASK] excluded)."""
    tok = getattr(model, "tokenizer", None)
    if tok is not None and "\n" in getattr(tok, "stoi", {}):
        return tok.stoi["\n"]
    ids = [i for i in range(model.config.vocab_size) if i != model.config.mask_id]
    return ids[int(torch.randint(len(ids), (1,), generator=generator))]


def ar_canvas(model, length: int | None, prompt: str | None, generator: torch.Generator) -> Canvas:
    """The AR canvas: the prompt (fixed prefix) then masks; a start token when there is no prompt."""
    cfg = model.config
    if prompt is not None:
        canvas = make_canvas(model, length, prompt)
        if not canvas.is_prefix:
            raise ValueError("an autoregressive model can only continue a prompt: put every █ / [___] "
                             "after the given text, or use a diffusion model to fill gaps")
        return canvas
    canvas = blank_canvas(default_length(model) if length is None else length, cfg.mask_id, cfg.block_size)
    if canvas.length < 2:
        raise ValueError("length must be at least 2 for an autoregressive model without a prompt "
                         "(position 0 holds the start token)")
    tokens, fixed = canvas.tokens.copy(), canvas.fixed.copy()
    tokens[0], fixed[0] = start_token(model, generator), True
    return Canvas(tokens, fixed)


def _kind(model) -> str:
    kind = getattr(model.config, "kind", "diffusion")
    if kind not in ("diffusion", "ar"):
        raise ValueError(f"no sampler plan for a model of kind {kind!r}")
    return kind


def start_canvas(model, *, length: int | None = None, template: str | None = None, chat: str | None = None,
                 seed: int = 0) -> Canvas:
    """The canvas a run starts from, exactly as its sampler builds it (ValueError for a bad template).

    Args:
        model: a loaded model (`.config`: kind, mask_id, block_size; `.tokenizer` for a template).
        length: canvas length (default: config.default_length, the recommended length or the context; a template with gaps: as written).
        template: █ / [___] / plain prompt (parse_template); an AR model's must keep its gaps at the end.
        chat: the user's message instead of a template, put in the tokenizer's chat template (as_chat).
        seed: the seed an AR start token is drawn from (only where the vocabulary lacks "\\n").
    Returns:
        A Canvas (tokens, fixed, and the template it was parsed from).
    """
    if chat is not None:
        if template is not None:
            raise ValueError("give either a template or a chat prompt, not both")
        template = as_chat(chat, getattr(model, "tokenizer", None))
    if _kind(model) == "ar":
        return ar_canvas(model, length, template, torch.Generator().manual_seed(seed))
    return make_canvas(model, length, template)


def plan_run(model, config: SamplerConfig, *, length: int | None = None, template: str | None = None,
             chat: str | None = None, canvas: Canvas | None = None) -> RunPlan:
    """The plan of a run of `config` on `model` (module docstring); ValueError for a bad template.

    Args:
        model: the model the run samples (its kind decides the AR or the diffusion canvas).
        config: the sampler's knobs (a SamplerConfig; steps, block_length, threshold / factor and,
            for an AR start token, seed are what the plan reads).
        length, template, chat: the canvas, as start_canvas reads them; or
        canvas: a canvas start_canvas made for this model (the dashboard's, drawn before the run).
    Returns:
        A frozen RunPlan: canvas, blocks, steps per block, rows (exact or a guess), max_steps.
    """
    kind = _kind(model)
    if canvas is None:
        canvas = start_canvas(model, length=length, template=template, chat=chat, seed=config.seed)
    elif length is not None or template is not None or chat is not None:
        raise ValueError("give either a canvas or length / template / chat, not both")
    else:
        _check_canvas(model, canvas, kind)
    if kind == "ar":
        n = canvas.n_generate
        blocks = np.where(canvas.fixed, -1, 0).astype(np.int64)
        # a canvas parsed from a prompt keeps its template; the start-token canvas has none
        return RunPlan(kind, config, canvas, blocks, (n,), n + 1, True, n, start_token=canvas.template is None)
    if model_process(model) == "uniform":
        return _uniform_plan(model, config, canvas)
    _check_eos(model, config)
    _check_guidance(config, canvas)
    blocks = plan_blocks(canvas.fixed, config.block_length)
    if config.adaptive:
        n = canvas.n_generate
        # token editing adds a decoded block's post steps (step.EDIT_POST_STEPS + 1 at most)
        most = n + (int(blocks.max()) + 1) * (EDIT_POST_STEPS + 1) * (config.edit_threshold > 0)
        return RunPlan(kind, config, canvas, blocks, None, min(n, GUESSED_STEPS) + 1, False, most)
    steps = tuple(split_steps(config.steps, int(blocks.max()) + 1))
    if config.edit_threshold > 0:  # a block filled before its last step ends with post steps instead
        sizes = np.bincount(blocks[blocks >= 0], minlength=len(steps))
        most = sum(max(S, min(S - 1, int(n)) + EDIT_POST_STEPS + 1) for S, n in zip(steps, sizes))
        return RunPlan(kind, config, canvas, blocks, steps, sum(steps) + 1, False, most)
    return RunPlan(kind, config, canvas, blocks, steps, sum(steps) + 1, True, sum(steps))


def _uniform_plan(model, config: SamplerConfig, canvas: Canvas) -> RunPlan:
    """A uniform-state run (uniform.py): blocks of block_length, else a cached model's own block (its
    canvas length) or, without a cache, one block; each block takes up to `steps` steps (fewer once
    stable and confident: then `rows` is a guess)."""
    cached = bool(getattr(model.config, "cached", False))
    if cached and not canvas.is_prefix:
        raise ValueError("this model writes blocks after a cache of what precedes them: it can only continue "
                         "a prompt (put every █ / [___] after the given text)")
    size = config.block_length or (model.config.canvas_length if cached else 0)
    blocks = plan_blocks(canvas.fixed, size)
    n_blocks = int(blocks.max()) + 1
    most = config.steps * n_blocks
    exact = config.stop_entropy is None
    rows = most + 1 if exact else min(most, GUESSED_STEPS) + 1
    return RunPlan("diffusion", config, canvas, blocks, (config.steps,) * n_blocks, rows, exact, most,
                   process="uniform")


def _check_eos(model, config: SamplerConfig) -> None:
    """suppress_eos acts on the tokenizer's end-of-sequence tokens: a model without any (every character
    model) would run as if it were off, so it is refused, not ignored."""
    if config.suppress_eos != "off" and not getattr(getattr(model, "tokenizer", None), "eos_ids", None):
        raise ValueError(f"suppress_eos={config.suppress_eos} acts on end-of-sequence tokens, and this model's "
                         "tokenizer has none: leave it off")


def _check_guidance(config: SamplerConfig, canvas) -> None:
    """Classifier-free guidance pushes away from the prediction without the prompt: a canvas with no
    fixed text has none to remove, and would run as if it were off, so it is refused, not ignored."""
    if config.cfg_scale > 0 and not np.asarray(canvas.fixed).any():
        raise ValueError(f"cfg_scale={config.cfg_scale:g} guides by the prompt, and this canvas has no fixed "
                         "text: give a prompt or template, or leave it at 0")


def _check_canvas(model, canvas, kind: str) -> None:
    """A canvas handed in must be one this model's run could start from."""
    if not isinstance(canvas, Canvas):
        raise TypeError(f"canvas must be a Canvas (start_canvas makes one), got {type(canvas).__name__}")
    cfg = model.config
    if canvas.length > cfg.block_size:
        raise ValueError(f"the canvas is {canvas.length} positions but the model's context is {cfg.block_size}")
    if canvas.fixed.all() or not (canvas.tokens[~canvas.fixed] == cfg.mask_id).all():
        raise ValueError("the canvas was not made for this model: its positions to generate must hold "
                         "the model's [MASK] and at least one must be left")
    if kind == "ar" and (not canvas.is_prefix or not canvas.fixed.any()):
        raise ValueError("an autoregressive model continues a prefix: the canvas needs given text "
                         "(or a start token) before every position to generate")


def check_plan(model, config: SamplerConfig, plan) -> RunPlan:
    """`plan`, checked against the model and config a run was given (ValueError where they differ)."""
    if not isinstance(plan, RunPlan):
        raise TypeError(f"plan must be a RunPlan (plan_run makes one), got {type(plan).__name__}")
    if plan.config != config:
        raise ValueError("the plan was made for other sampler knobs: plan_run(model, config, ...) with the "
                         "config the run gets")
    if plan.kind != _kind(model):
        raise ValueError(f"the plan was made for a model of kind {plan.kind!r}; this one is of kind {_kind(model)!r}")
    if plan.process != model_process(model):
        raise ValueError(f"the plan was made for a {plan.process} diffusion model; this one denoises "
                         f"{model_process(model)} noise")
    _check_canvas(model, plan.canvas, plan.kind)
    return plan
