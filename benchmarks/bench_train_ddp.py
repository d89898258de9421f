"""Data-parallel training speed: one process vs `torchrun --nproc-per-node N`, same global batch.

    python benchmarks/bench_train_ddp.py --data FILE [--procs 2] [--steps 20] [--chars 50000]
                                         [--precision auto|fp32|bf16] [--model "--n-layer 6 ..."]

Trains the same model, seed and global batch three ways, each `python run.py train` as users run it:
  1. one process, 1 torch thread;
  2. one process, N torch threads (the same cores as N processes);
  3. torchrun, N processes x 1 thread (gloo on CPU; NCCL and one GPU each with --device cuda).
Speed is training tokens / training seconds from each checkpoint's training_state (start-up,
validation and the final held-out figures are not in it), and the speed-ups are ratios of runs made
one after the other in this command. It also checks that the N-process run's loss curve is the
one-process run's (the runs are the same training, only split). Only the first --chars characters
of --data are used (90% train, 10% held out), so the final held-out figures stay quick.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAKESPEARE = "--n-layer 6 --n-embd 256 --n-head 4 --block-size 256 --batch-size 32"  # the shipped model's shape


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="a UTF-8 text file (e.g. Tiny Shakespeare)")
    p.add_argument("--procs", type=int, default=2, help="N: processes of the torchrun run, threads of run 2")
    p.add_argument("--steps", type=int, default=20, help="optimizer steps of each run")
    p.add_argument("--chars", type=int, default=50_000, help="characters of --data to use")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--model", default=SHAKESPEARE, help="model and batch flags of `run.py train`")
    args = p.parse_args(argv)
    if args.procs < 2 or args.steps < 1 or args.chars < 1000:
        p.error("--procs must be >= 2, --steps >= 1 and --chars >= 1000")
    if not args.data.is_file():
        p.error(f"no file {args.data}")
    return args


def train(opts, workdir: Path, name: str, procs: int, threads: int) -> dict:
    """One training run; its checkpoint's metadata, plus the command's wall time."""
    from explorer.checkpoint import read_metadata

    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}"] \
        if procs > 1 else [sys.executable]
    cmd = [*launch, str(ROOT / "run.py"), "train", "--out", str(workdir / f"{name}.safetensors"),
           "--data", str(workdir / "data.txt"), *shlex.split(opts.model), "--max-steps", str(opts.steps),
           "--eval-every", str(10 * opts.steps), "--save-every", str(10 * opts.steps), "--seed", "0",
           "--precision", opts.precision, "--device", opts.device, "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    meta = read_metadata(workdir / f"{name}.safetensors")
    return {**meta, "wall_s": time.perf_counter() - t0}


def main(argv=None) -> int:
    opts = parse_args(argv)
    n = opts.procs
    runs = [("1 process, 1 thread", 1, 1), (f"1 process, {n} threads", 1, n), (f"{n} processes x 1 thread", n, 1)]
    print(f"# {opts.model}; {opts.steps} steps; first {opts.chars} chars of {opts.data}; {opts.precision}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as tmp:
        workdir = Path(tmp)
        (workdir / "data.txt").write_text(opts.data.read_text(encoding="utf-8")[:opts.chars], encoding="utf-8")
        for i, (label, procs, threads) in enumerate(runs):
            meta = train(opts, workdir, f"run{i}", procs, threads)
            state = meta["training_state"]
            tok_s = state["tokens"] / state["seconds"]
            results.append((label, tok_s, meta))
            print(f"  {label:<26} {tok_s:>10,.0f} tokens/s  ({state['seconds']:.1f} s training, "
                  f"{meta['wall_s']:.1f} s with start-up and held-out figures)", flush=True)
    base, same_cores, ddp = (r[1] for r in results)
    print(f"speed-up of {n} processes: {ddp / base:.2f}x vs 1 process on 1 thread, "
          f"{ddp / same_cores:.2f}x vs 1 process on {n} threads (the same cores); "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    one, split = (results[0][2]["curves"]["train"], results[2][2]["curves"]["train"])
    worst = max(abs(a[1] - b[1]) for a, b in zip(one, split))
    print(f"loss curves of 1 and {n} processes ({opts.precision}): {len(one)} steps, largest difference "
          f"{worst:.2e} nats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
