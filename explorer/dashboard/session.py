"""One browser session: the checkpoint it has open, the device it samples on, and the sampler knobs.

The canvas helpers here turn a session's knobs into the sampler's inputs exactly as a run will see
them, so every tab draws and samples the same canvas.
"""
from __future__ import annotations

from ..data.tokenizer import MASK_GLYPH
from .runtime import checkpoints


def canvas_template(model, canvas) -> str | None:
    """The canvas as the sampler's template notation (█ per generated position), None if all blank.
    Handing the sampler this exact string makes its canvas identical to the one the views drew."""
    return model.tokenizer.decode(canvas.tokens) if canvas.fixed.any() else None


def run_template(model, canvas) -> str | None:
    """The template a run on `canvas` hands the sampler (an AR model's is its prompt: no trailing █)."""
    template = canvas_template(model, canvas)
    if model.config.kind == "ar":
        template = None if template is None else template.rstrip(MASK_GLYPH)
    return template


def sample_canvas(model, config, canvas, **kwargs):
    """One recorded run of the real sampler on `canvas` (sample_any: the AR baseline for causal models,
    whose template is its prompt)."""
    from ..sampling import sample_any

    return sample_any(model, config, length=canvas.length, template=run_template(model, canvas), **kwargs)


def expected_rows(model, config, canvas) -> int:
    """Heatmap rows a run will produce (start canvas + steps), so the axes are sized before it starts.
    Threshold decoding has no fixed count: a guess, and the view grows if it runs longer."""
    from ..sampling.sampler import plan_blocks
    from ..sampling.schedules import split_steps

    if model.config.kind == "ar":
        return canvas.n_generate + 1
    if config.threshold is not None:
        return min(canvas.n_generate, 32) + 1
    n_blocks = int(plan_blocks(canvas.fixed, config.block_length).max()) + 1
    return sum(split_steps(config.steps, n_blocks)) + 1


def start_canvas(model, template: str, length: int, seed: int):
    """The canvas a run starts from, exactly as the sampler will build it (so row 0 is drawn at once)."""
    from ..sampling import blank_canvas, parse_template

    context, tok = model.config.block_size, model.tokenizer
    if model.config.kind == "ar":
        import torch

        from ..sampling.ar import ar_canvas

        # the same seeded generator the sampler starts from, so its start token is the one drawn here
        return ar_canvas(model, length, template or None, torch.Generator().manual_seed(seed))
    if template:
        return parse_template(template, tok, length=length, context=context)
    return blank_canvas(length, model.config.mask_id, context)


def checkpoint_or_default(name: str | None, names: list[str], fallback: str | None = None) -> tuple[str | None, str]:
    """The checkpoint to open first and a notice ('' = none). A name that is not one of `names` (from
    a URL or a script: a path, a typo) is never opened: `fallback` (the server's choice) or the
    default is, with a notice saying why."""
    default = fallback if fallback in names else checkpoints.default_checkpoint(names)
    if not name or name in names:
        return name or default, ""
    instead = f"; showing {default} instead" if default else ""
    listed = ", ".join(names) or "none"
    return default, f"checkpoint {name!r} is not one of the checkpoints in checkpoints/ ({listed}){instead}"
