"""`python run.py evaluate`: held-out NELBO, accuracy vs masking ratio, and sample quality vs real text.

    python run.py evaluate --checkpoint shakespeare [--data input.txt] [--n 16] [--steps 32]

The held-out split is rebuilt from the training text: --data FILE, else the file recorded in the
checkpoint, else (Tiny Shakespeare) the download cache. AR checkpoints get their held-out
cross-entropy and sample quality instead; uniform-state checkpoints (metadata process=uniform) their own
NELBO bound and denoising accuracy (every position is predicted: no position is marked as noise).
"""
from __future__ import annotations

import argparse
import sys

from . import CLIError, float_in, int_in
from .sweep import add_common_arguments, format_summary, load_models, load_reference


def add_arguments(p: argparse.ArgumentParser):
    add_common_arguments(p)
    p.set_defaults(n=16)
    p.add_argument("--steps", type=int_in(1), default=None,
                   help="sampler steps (default: the checkpoint's recommended, else the sampler's)")
    p.add_argument("--strategy", default=None, help="unmasking strategy (default: the checkpoint's recommended, else the sampler's)")
    p.add_argument("--temperature", type=float_in(), default=None,
                   help="sampling temperature (default: the checkpoint's recommended, else the sampler's)")
    p.add_argument("--val-sequences", type=int_in(0, 10**6), default=0,
                   help="cap on held-out sequences for NELBO and accuracy (default 0: all of them)")


def sampler_config(args, model):
    """The knobs given over the checkpoint's recommended ones (sampling.config.recommended)."""
    from ..sampling.config import config_for
    from .sample import check_read

    knobs = {k: getattr(args, k) for k in ("steps", "strategy", "temperature") if getattr(args, k) is not None}
    check_read(model, knobs)  # --steps on the AR baseline would be ignored
    try:
        return config_for(model, **knobs)
    except ValueError as e:
        raise CLIError(str(e)) from e


def print_likelihood(model, val) -> None:
    """NELBO (bits/char) for diffusion models, next-char cross-entropy for AR ones, beside the figure
    stored at training time (which used the full held-out split)."""
    from ..checkpoint import process_of
    from ..diffusion import ar_cross_entropy, nelbo, uniform_nelbo

    stored = (model.meta.get("metrics") or {})
    if model.config.kind == "ar":
        res, name, key = ar_cross_entropy(model, val), "cross-entropy", "val_ce_bits_per_char"
    elif process_of(model) == "uniform":
        res, name, key = uniform_nelbo(model, val), "NELBO (uniform-state process)", "nelbo_bits_per_char"
    else:
        res, name, key = nelbo(model, val), "NELBO", "nelbo_bits_per_char"
    line = f"held-out {name}: {res['bits_per_char']:.4f} bits/char ({res['nats_per_char']:.4f} nats/char) " \
           f"on {val.shape[0]} x {val.shape[1]} chars"
    if key in stored:
        line += f"; stored at training time: {stored[key]:.4f} bits/char"
    print(line)


def print_accuracy(model, val, seed: int) -> None:
    from ..checkpoint import process_of
    from ..metrics import ACCURACY_TS, accuracy_vs_t

    if process_of(model) == "uniform":
        from ..diffusion import uniform_accuracy

        print("\naccuracy of argmax predictions vs noise level t (share of tokens redrawn uniformly):")
        print("  t    all positions   positions the noise changed")
        for t in ACCURACY_TS:
            acc = uniform_accuracy(model, val, t, seed=seed)
            print(f"{t:4.1f}   {acc['all']:13.3f}   {acc['changed']:27.3f}")
        return

    table = accuracy_vs_t(model, val, ACCURACY_TS, seed=seed)
    print("\naccuracy of argmax predictions at masked positions vs masking ratio t:")
    print(table.to_string(index=False, formatters={"t": "{:.1f}".format, "accuracy": "{:.3f}".format,
                                                   "mean_confidence": "{:.3f}".format, "nll": "{:.3f}".format}))


def print_quality(model, judge, args, reference, config) -> None:
    from ..experiments import sample_kind, sweep

    try:
        _, summary = sweep(model, config, {"steps": [config.steps]}, args.n, args.seed, length=args.length,
                           judge=judge, batch_size=args.batch_size, reference=reference)
    except ValueError as e:
        raise CLIError(str(e)) from e
    from ..sampling.uniform import entropy_bound, model_process

    # the knobs the model's sampler reads: a uniform-state one accepts by the entropy bound, in no strategy's order
    uniform = model.config.kind == "diffusion" and model_process(model) == "uniform"
    order = f"entropy bound {entropy_bound(config):g}" if uniform else config.strategy
    what = "AR sampler" if model.config.kind == "ar" else (
        f"sampler: {config.steps} steps, {order}, temperature {config.temperature}")
    note = "; no gen-PPL: no AR judge" if judge is None and sample_kind(model) == "text" else ""
    print(f"\nsample quality ({args.n} samples; {what}) vs held-out text of the same length (mean ± sem{note}):")
    print(format_summary(summary, []))


def main(args) -> int:
    from ..experiments import canvas_length

    model, judge, _ = load_models(args)
    config = sampler_config(args, model)  # a bad knob is said now, not after the held-out figures
    try:
        length = canvas_length(model, args.length, None)
    except ValueError as e:
        raise CLIError(str(e)) from e
    corpus, reference = load_reference(model, args, length, required=True)
    val = corpus.val_tensor(model.config.block_size, args.val_sequences or None)
    meta = model.meta
    print(f"{model.path.name}: {model.config.kind}, {model.n_params / 1e6:.2f}M params, trained "
          f"{(meta.get('training_state') or {}).get('step', '?')} steps on {corpus.name}", file=sys.stderr)
    print_likelihood(model, val)
    if model.config.kind != "ar":
        print_accuracy(model, val, args.seed)
    print_quality(model, judge, args, reference, config)
    return 0
