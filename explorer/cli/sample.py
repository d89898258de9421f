"""`python run.py sample`: generate text from a checkpoint (diffusion or AR) with any sampler knob.

Texts go to stdout (a `--- sample i ---` line between samples when -n > 1) and a one-line summary
to stderr; with --json, stdout is one JSON object: texts, tokens (final ids), nfe, config, seconds.
"""
from __future__ import annotations

import argparse
import json
import sys

from . import CLIError, float_in, int_in, is_out_of_memory
from .models import CHECKPOINT_HELP, add_model_arguments, check_overrides_apply, hf_options
from ..devices import DEVICE_CHOICES

DEFAULT_CHECKPOINT = "shakespeare"
MAX_SAMPLES = 1024  # one batch: more is a loop of runs, not one call


def _knob_type(knob):
    # Ranges are SamplerConfig's (its message names the knob); floats must be finite, normal numbers here
    return float_in() if knob.type is float else knob.type


def knob_help(knob) -> str:
    """A knob's flag help: the schema's text, what switches it off and its default."""
    names = f" (one of: {', '.join(knob.choices)})" if knob.choices else ""
    if knob.default is None:  # left out = None = off: the default says so, no separate note
        return f"{knob.help}{names} (default: the checkpoint's recommended value, else {knob.off_means})"
    off = knob.off_note(ui=False)
    return f"{knob.help}{names}{off} (default: the checkpoint's recommended value, else {knob.default})"


def add_arguments(p: argparse.ArgumentParser):
    from ..sampling import knobs

    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT, help=f"{CHECKPOINT_HELP} (default {DEFAULT_CHECKPOINT})")
    for knob in knobs.KNOBS.values():
        # no argparse `choices`: SamplerConfig names the valid values in a one-line error
        p.add_argument(knob.flag, type=_knob_type(knob), default=None, metavar=knob.name.upper(), help=knob_help(knob))
    p.add_argument("--length", type=int_in(1), default=None,
                   help="canvas length (default: the checkpoint's recommended length, else its context)")
    p.add_argument("--template", "--prompt", dest="template", default=None,
                   help="text to continue, or a template with █ / [___] marking positions to generate")
    p.add_argument("--chat", action="store_true",
                   help="send --prompt as the user's message in the model's chat template (instruct models); "
                        "the answer is generated after it, up to --length tokens in all")
    # --n as `sweep` spells it (a typed --n was refused as ambiguous: --num-samples or --no-cache)
    p.add_argument("-n", "--n", "--num-samples", dest="n", type=int_in(1, MAX_SAMPLES), default=1,
                   help=f"samples to generate, in one batch (at most {MAX_SAMPLES})")
    p.add_argument("--no-cache", action="store_true", help="AR models: recompute the prefix for every token")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of plain text")
    p.add_argument("--device", default="auto", choices=DEVICE_CHOICES, help="default auto")
    add_model_arguments(p)


def _config(args, model):
    """The knobs given on the command line over the checkpoint's recommended ones (config.recommended)."""
    from ..sampling import knobs as schema
    from ..sampling.config import config_for

    knobs = {name: getattr(args, name) for name in schema.KNOBS if getattr(args, name) is not None}
    check_read(model, knobs)
    return config_for(model, **knobs)


def check_read(model, knobs: dict) -> None:
    """Refuse a knob given on the command line that the model's sampler does not read (--strategy on the AR
    baseline, --stop-entropy on a masked model): the run would be the one without it, as if it made no
    difference."""
    from ..names import PROCESS_NAMES
    from ..sampling import knobs as schema
    from ..sampling.uniform import model_process

    kind = getattr(model.config, "kind", "diffusion")
    process = model_process(model)
    unread = schema.unread_by(kind, process, knobs)
    if unread:
        what = "an autoregressive" if kind == "ar" else f"a {PROCESS_NAMES[process]}"
        flags = ", ".join(f"{schema.KNOBS[n].flag} {knobs[n]}" for n in unread)
        raise CLIError(f"{flags}: {what} model's sampler does not read "
                       f"{'it' if len(unread) == 1 else 'them'}; leave {'it' if len(unread) == 1 else 'them'} out")


ANSWER_TOKENS = 128  # a subword model's answer after a plain prompt, by default (LLaDA's gen_length)


def _length(args, model) -> int | None:
    """--length, else the checkpoint's recommended length; a template alone sets its own length. A
    Hugging Face model's context can be 4k-131k tokens: there a plain prompt gets ANSWER_TOKENS more
    and no template the model's default length (hf/model.py's DEFAULT_LENGTH), never the whole context."""
    from ..data.tokenizer import is_subword
    from ..sampling.config import default_length, recommended
    from ..sampling.template import BLANK, MASK_GLYPH

    if args.length is not None:
        return args.length
    if is_subword(model.tokenizer):
        context = model.config.block_size
        if not args.template:
            return default_length(model)
        if MASK_GLYPH not in args.template and BLANK not in args.template:
            return min(len(model.tokenizer.encode(args.template)) + ANSWER_TOKENS, context)
        return None
    if args.template:
        return None
    return recommended(model).get("length")


def _run(args):
    """Load, sample; every user mistake becomes a CLIError (one line, exit 2)."""
    from ..checkpoint import CheckpointError, load_checkpoint
    from ..devices import resolve_device
    from ..sampling import sample_any

    try:
        model = load_checkpoint(args.checkpoint, resolve_device(args.device), hf=hf_options(args))
        check_overrides_apply(args, model)
        if args.no_cache and model.config.kind != "ar":  # the diffusion sampler's cache is the `cache` knob
            raise CLIError("--no-cache: an AR model's KV cache; a diffusion model has none unless --cache asks "
                           "for one, so leave it out")
        config = _config(args, model)
        if args.chat:
            from ..sampling.template import as_chat

            args.template = as_chat(args.template or "", model.tokenizer)
        kwargs = {"use_cache": not args.no_cache} if model.config.kind == "ar" else {}
        traj = sample_any(model, config, batch_size=args.n, length=_length(args, model), template=args.template,
                          record=False, **kwargs)
    except (ValueError, CheckpointError) as e:  # CheckpointError is a ValueError; listed for clarity
        raise CLIError(str(e)) from e
    except RuntimeError as e:
        if not is_out_of_memory(e):
            raise
        raise CLIError(f"out of memory for {args.n} samples of this length: lower -n or --length") from e
    return model, config, traj


def main(args) -> int:
    model, config, traj = _run(args)
    texts = traj.texts()
    if args.json:
        print(json.dumps({"checkpoint": str(args.checkpoint), "kind": traj.kind, "texts": texts,
                          "tokens": traj.final.tolist(), "token_strings": traj.token_strings(),
                          "nfe": traj.nfe, "tokens_per_forward": round(traj.tokens_per_forward, 3), "steps": traj.n_steps,
                          "config": config.to_dict(), "seconds": round(traj.seconds, 4)}))
        return 0
    for i, text in enumerate(texts):
        if len(texts) > 1:
            print(f"--- sample {i + 1} ---")
        print(text)
    from ..data.tokenizer import is_subword

    unit = "tokens" if is_subword(model.tokenizer) else "chars"
    print(f"[{args.checkpoint}: {traj.kind}, {traj.batch_size} x {traj.length} {unit}, "
          f"{traj.n_steps} steps, NFE {traj.nfe} ({traj.tokens_per_forward:.2f} {unit} per forward), "
          f"{traj.seconds:.2f} s on {model.device}]", file=sys.stderr)
    return 0
