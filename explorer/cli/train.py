"""`python run.py train`: train and save a checkpoint, with a tqdm bar; Ctrl-C (or `kill`) saves before exiting.

`torchrun --nproc-per-node N run.py train ...` trains data-parallel over N processes (explorer/distributed.py);
rank 0 shows the bar, validates and saves, and an interrupt saves there as it does in one process."""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shlex
import signal
import sys
from dataclasses import fields

from . import CLIError
from ..checkpoint import CheckpointError, checkpoints_dir
from ..data.corpus import CorpusError
from ..train import TrainConfig, Trainer

from .. import distributed, names

CHOICES = {"kind": names.KINDS, "time_conditioning": names.TIME_CONDITIONING, "weighting": names.WEIGHTINGS,
           "lr_schedule": names.LR_SCHEDULES, "device": names.DEVICES, "precision": names.PRECISIONS}


def add_arguments(p: argparse.ArgumentParser):
    p.add_argument("--out", required=True, help="checkpoint name (saved in checkpoints/) or a .safetensors path")
    p.add_argument("--resume", default=None, help="checkpoint to continue training from")
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            p.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=None,
                           metavar="BOOL", help=f"default {f.default}")
            continue
        kind = {"int": int, "float": float}.get(str(f.type), str)
        p.add_argument(flag, type=kind, default=None, choices=CHOICES.get(f.name),
                       help=f"default {f.default}")


def out_path(out: str):
    if "/" in out or out.endswith(".safetensors"):
        return out
    return checkpoints_dir() / f"{out}.safetensors"


def resumed_config(resume: str | None) -> dict:
    """On --resume, flags not given keep the run's own values (lr, schedule, batch...), not the defaults."""
    if not resume:
        return {}
    from ..checkpoint import read_metadata, resolve_checkpoint

    return read_metadata(resolve_checkpoint(resume)).get("train_config", {})


_STOP = {"asked": False}  # a signal arrived (a rank's collective can then fail first: see main)


def _interrupt(signum, frame):
    _STOP["asked"] = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def save_on_signals():
    """SIGINT and SIGTERM both stop training with a save. Set explicitly because a shell starts a
    background job (`... &`) with SIGINT ignored, and `kill` sends SIGTERM. The previous handlers
    come back afterwards (main() also runs inside other programs, such as the tests)."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    _STOP["asked"] = False
    previous = [signal.signal(sig, _interrupt) for sig in sigs]
    try:
        yield
    finally:
        for sig, handler in zip(sigs, previous):
            signal.signal(sig, handler)


def _drive(trainer, bar) -> None:
    """Run the trainer to the end, showing loss, LR and the latest validation figure on the bar."""
    from tqdm import tqdm

    last_val = float("nan")
    for rec in trainer.run():
        if rec["type"] == "val":
            last_val = rec["nats_per_char"]
            tqdm.write(f"step {rec['step']}: val {last_val:.4f} nats/char ({rec['bits_per_char']:.4f} bits)")
            continue
        bar.update(1)
        bar.set_postfix(loss=f"{rec['loss']:.3f}", lr=f"{rec['lr']:.2e}", val=f"{last_val:.3f}",
                        tok_s=f"{rec['tokens_per_s']:.0f}")


def command_line(ranks: distributed.Ranks) -> str:
    """The command as the user typed it, for the checkpoint's record."""
    line = "run.py " + shlex.join(sys.argv[1:])
    if not ranks.active:
        return "python " + line
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", ranks.world_size))
    nodes = f" --nnodes {ranks.world_size // per_node}" if per_node != ranks.world_size else ""
    return f"torchrun{nodes} --nproc-per-node {per_node} " + line


def build_trainer(args) -> Trainer:
    try:
        ranks = distributed.from_env()
        overrides = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name) is not None}
        cfg = TrainConfig(**{**resumed_config(args.resume), **overrides})
        return Trainer(cfg, out_path(args.out), resume=args.resume, command=command_line(ranks), ranks=ranks)
    except (ValueError, CorpusError, CheckpointError) as e:
        raise CLIError(str(e)) from e


def main(args) -> int:
    try:
        return train(build_trainer(args))
    finally:
        # The trainer (its DDP wrapper holds the gloo group) is unreachable here; collect it now so
        # gloo's threads are joined while the interpreter is whole, not during its finalisation,
        # where a rank aborted ("terminate called without an active exception", ~1 run in 20-40).
        gc.collect()
        distributed.shutdown()


def train(trainer) -> int:
    """Drive the trainer with a bar (rank 0), then save; an interrupt saves what is there."""
    from tqdm import tqdm

    cfg, main_rank = trainer.cfg, trainer.ranks.is_main
    procs = f" x {trainer.ranks.world_size} processes" if trainer.ranks.active else ""
    if main_rank:
        print(f"training {cfg.kind} model: {trainer.model.n_params / 1e6:.2f}M params on {trainer.corpus.name}, "
              f"device {trainer.device}{procs}, {'bf16' if trainer.autocast else 'fp32'}", file=sys.stderr)
    # In a log file (not a terminal) refresh rarely so logs stay readable.
    bar = tqdm(total=cfg.max_steps, initial=trainer.state["step"], unit="step", dynamic_ncols=True,
               mininterval=0.5 if sys.stderr.isatty() else 30, disable=not main_rank)
    try:
        with save_on_signals():
            _drive(trainer, bar)
    except Exception:
        # torchrun passes Ctrl-C to every rank; a rank whose peer stopped first fails in its
        # all-reduce rather than in the signal handler, and rank 0 must still save.
        if not (_STOP["asked"] and trainer.ranks.active):
            raise
        return _interrupted(trainer, bar)
    except KeyboardInterrupt:
        return _interrupted(trainer, bar)
    bar.close()
    if main_rank:
        metrics = trainer.final_metrics()
        path = trainer.save(metrics)
        print(f"saved {path}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    # Every rank leaves together (rank 0 last saved): none tears its group down under a peer still at work.
    distributed.barrier(trainer.ranks)
    return 0


def _interrupted(trainer, bar) -> int:
    bar.close()
    if trainer.ranks.is_main:
        path = trainer.save()
        print(f"\ninterrupted at step {trainer.state['step']}: saved {path}", file=sys.stderr)
    return 130
