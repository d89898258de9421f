"""`python run.py train`: train and save a checkpoint, with a tqdm bar; Ctrl-C (or `kill`) saves before exiting.

`torchrun --nproc-per-node N run.py train ...` trains data-parallel over N processes (explorer/distributed.py);
rank 0 shows the bar, validates and saves, and an interrupt saves there as it does in one process."""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import shlex
import signal
import sys
import threading
from dataclasses import fields

from . import CLIError, boolean, check_writable, float_in, int_in
from ..checkpoint import CheckpointError, checkpoints_dir
from ..data.corpus import CorpusError
from ..train import CHOICES, RANGES, RESUMED_FIELDS, TrainConfig, Trainer

from .. import distributed


def _flag_type(name: str):
    """The argparse type of TrainConfig field `name`: its RANGES bounds, so a value out of range is an
    error naming the flag before anything is loaded."""
    lo, hi, *brackets = RANGES[name]
    return float_in(lo, hi, *brackets) if brackets else int_in(lo, hi)


# What a flag's range does not say
FLAG_NOTES = {"max_minutes": "minutes of training in all: a resumed run counts the minutes it was trained before"}


def add_arguments(p: argparse.ArgumentParser):
    p.add_argument("--out", required=True, help="checkpoint name (saved in checkpoints/) or a .safetensors path")
    p.add_argument("--resume", default=None, help="checkpoint to continue training from")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file that --resume does not name (a checkpoint of another run)")
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            p.add_argument(flag, type=boolean, default=None, metavar="BOOL", help=f"default {f.default}")
        elif f.name in RANGES:
            lo, hi, *brackets = RANGES[f.name]
            span = f"{brackets[0][0]}{lo:g}, {hi:g}{brackets[0][1]}" if brackets else f"[{lo}, {hi}]"
            help = f"default {f.default}, in {span}" + (f"; {FLAG_NOTES[f.name]}" if f.name in FLAG_NOTES else "")
            p.add_argument(flag, type=_flag_type(f.name), default=None, help=help)
        else:
            p.add_argument(flag, default=None, choices=CHOICES.get(f.name), help=f"default {f.default}")


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a checkpoint name: the file checkpoints/NAME.safetensors
# fields a resumed run cannot change (RESUMED_FIELDS less the data file's path, which may move, and the
# initialisation, which only a new run reads): a flag setting one to another value is refused, not ignored
FIXED_ON_RESUME = tuple(k for k in RESUMED_FIELDS if k not in ("data", "init_from"))


def out_path(out: str):
    """Where --out saves: a bare name in checkpoints/, else the path as given, which must end in .safetensors
    (a typo must not name the training text or any other file); unwritable ones fail now, not at the first
    save after the run."""
    s = out.strip()
    as_path = "/" in s or s.endswith(".safetensors")
    if not (as_path or NAME.fullmatch(s)):  # a bare name: no dot first (hidden), no space, no newline
        raise CLIError(f"--out {out!r}: give a checkpoint name (letters, digits, _ . -) or a .safetensors path")
    path = check_writable(s if as_path else checkpoints_dir() / f"{s}.safetensors", "--out")
    if path.suffix != ".safetensors":
        raise CLIError(f"--out {path}: a checkpoint path ends in .safetensors")
    return path


def check_overwrite(path, resume: str | None, overwrite: bool) -> None:
    """Refuse to replace an existing --out file unless it is the run being resumed or --overwrite says so:
    a rerun of an old command, or a typo in --out, would otherwise train over a finished checkpoint (the
    first periodic save replaces it)."""
    if overwrite or not path.exists():
        return
    if resume:
        from ..checkpoint import resolve_checkpoint

        try:
            if resolve_checkpoint(resume).resolve() == path.resolve():
                return
        except (ValueError, OSError):  # a missing --resume is reported by the load, with its own words
            return
    name = path.stem if path.parent.resolve() == checkpoints_dir().resolve() else str(path)
    raise CLIError(f"--out {path} exists: --resume {name} continues that run, --overwrite replaces it, or give "
                   f"another --out")


def check_resumed_flags(overrides: dict, resumed: dict) -> None:
    """A resumed run keeps its network and data (Trainer._merge_resume): a flag asking for another value
    of one of them would be ignored, so it is refused, naming the run's value."""
    clash = [f"--{k.replace('_', '-')} {overrides[k]} (the run's is {resumed[k]})" for k in FIXED_ON_RESUME
             if k in overrides and k in resumed and overrides[k] != resumed[k]]
    if clash:
        raise CLIError("a resumed run keeps its architecture and corpus: " + ", ".join(clash)
                       + "; leave those flags out, or train a new --out")


def resumed_config(resume: str | None) -> dict:
    """On --resume, flags not given keep the run's own values (lr, schedule, batch...), not the defaults."""
    if not resume:
        return {}
    from ..checkpoint import read_metadata, resolve_checkpoint

    return read_metadata(resolve_checkpoint(resume)).get("train_config") or {}


# asked: a signal arrived (a rank's collective can then fail first: see train). saving: the run is being
# saved and ends next, so a signal changes nothing (a second Ctrl-C must not cut the save short).
_STOP = {"asked": False, "saving": False}


def _interrupt(signum, frame):
    if _STOP["asked"] or _STOP["saving"]:
        print("\nsaving first; a moment", file=sys.stderr)
        _STOP["asked"] = True
        return
    _STOP["asked"] = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def save_on_signals():
    """SIGINT and SIGTERM both stop training with a save; only the first one interrupts, later ones
    wait for that save. Set explicitly because a shell starts a background job (`... &`) with SIGINT
    ignored, and `kill` sends SIGTERM. The previous handlers come back afterwards (main() also runs
    inside other programs, such as the tests)."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    _STOP.update(asked=False, saving=False)
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
        resumed = resumed_config(args.resume)
        check_resumed_flags(overrides, resumed)
        cfg = TrainConfig(**{**resumed, **overrides})
        trainer = Trainer(cfg, out_path(args.out), resume=args.resume, command=command_line(ranks), ranks=ranks)
    except (ValueError, CorpusError, CheckpointError) as e:
        raise CLIError(str(e)) from e
    if args.resume and trainer.state["step"] >= trainer.cfg.max_steps:  # it would only save the same weights
        raise CLIError(f"--max-steps {trainer.cfg.max_steps}: the resumed run has trained {trainer.state['step']} "
                       f"steps already; ask for more")
    return trainer


@contextlib.contextmanager
def interrupt_while_loading():
    """Ctrl-C raises KeyboardInterrupt while the corpus and the model load, whatever handler the process
    had: main() also runs inside other programs (a served dashboard's process, the tests), and a server
    started on the main thread leaves a SIGINT handler that only stops its own loop, so the load would
    go on and train after a Ctrl-C. Off the main thread no handler can be set, and the process's stays."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(args) -> int:
    try:
        # before the corpus and the model: a run must not end unable to save, nor replace another's file
        check_overwrite(out_path(args.out), args.resume, args.overwrite)
        with interrupt_while_loading():
            trainer = build_trainer(args)
        return train(trainer)
    except KeyboardInterrupt:  # while loading or building: no training step to save yet
        print("\ninterrupted before training started: nothing saved", file=sys.stderr)
        return 130
    except FloatingPointError as e:  # the loss diverged (the last periodic save, if any, is kept)
        raise CLIError(str(e)) from e
    finally:
        # The trainer (its DDP wrapper holds the gloo group) is unreachable here; collect it now so
        # gloo's threads are joined while the interpreter is whole, not during its finalisation,
        # where a rank aborted ("terminate called without an active exception", ~1 run in 20-40).
        # Only then: a full collection costs 0.2-0.4 s in a process holding the dashboard's libraries.
        if distributed.initialized():
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
    with save_on_signals():
        try:
            _drive(trainer, bar)
            # inside: a Ctrl-C during the held-out metrics (minutes on a large split) still saves
            metrics = trainer.final_metrics() if main_rank else None
        except Exception:
            # torchrun passes Ctrl-C to every rank; a rank whose peer stopped first fails in its
            # all-reduce rather than in the signal handler, and rank 0 must still save.
            if not (_STOP["asked"] and trainer.ranks.active):
                bar.close()  # now, or its last redraw would overwrite the error line printed next
                raise
            return _interrupted(trainer, bar)
        except KeyboardInterrupt:
            return _interrupted(trainer, bar)
        _STOP["saving"] = True
        bar.close()
        if main_rank:
            path = trainer.save(metrics)
            print(f"saved {path}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
        # Every rank leaves together (rank 0 last saved): none tears its group down under a peer still at work.
        distributed.barrier(trainer.ranks)
    return 0


def _interrupted(trainer, bar) -> int:
    _STOP["saving"] = True
    bar.close()
    if trainer.ranks.is_main:
        path = trainer.save()
        print(f"\ninterrupted at step {trainer.state['step']}: saved {path}", file=sys.stderr)
    return 130
