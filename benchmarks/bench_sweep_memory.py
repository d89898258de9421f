"""Peak memory of a packed sweep on a model with a real dLLM's vocabulary, printed as a table.

    python benchmarks/bench_sweep_memory.py [--vocab 32000] [--length 32] [--samples 30] [--device auto] [--cap 12]

A packed sweep (sample_many: the grid of the step-count sweep of the "Sampling Strategies & Speed
Tradeoffs" notebook, steps 1,2,3,5,8,12,16,24,32 x confidence/random, --samples rows per cell) holds the
logits of every run under way, and a merged walk holds one (rows, L, V) buffer for all its runs: with a
16-symbol vocabulary that is nothing, with a 32,000-token one it is the whole sweep's logits at once. Each
variant runs in a fresh process (peak memory only grows), on an untrained model of the given vocabulary
(memory does not depend on the weights):
  - the batched sweep (one sample() per cell, in turn): its peak is one cell's, the floor;
  - the packed sweep within sample_many's default logits budget (LOGITS_IN_FLIGHT);
  - the packed sweep with no budget (how it ran before the budget: every run of the grid merged at once).
Peak memory is the process's peak resident set on the CPU (each child is capped at --cap GiB of address
space, so a variant that would take the machine's memory fails alone), torch.cuda.max_memory_allocated
on a GPU. Also each sweep's wall time.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer.devices import describe_device, resolve_device  # noqa: E402
from explorer.model import ModelConfig, Transformer  # noqa: E402
from explorer.sampling import SamplerConfig, sample, sample_many  # noqa: E402
from explorer.sampling.packing import LOGITS_IN_FLIGHT  # noqa: E402

STEPS = [1, 2, 3, 5, 8, 12, 16, 24, 32]
VARIANTS = {"batched sweep (one cell at a time)": "batched", "packed sweep, default budget": "budget",
            "packed sweep, no budget (before)": "unbounded"}


def build(vocab: int, length: int, device) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=vocab, mask_id=vocab - 1, block_size=length, n_layer=2, n_head=4, n_embd=64)
    return Transformer(cfg).to(device).eval()


def run_variant(variant: str, vocab: int, length: int, samples: int, device_name: str) -> dict:
    """One variant in this process: its wall time and this process's peak memory after it."""
    device = resolve_device(device_name)
    model = build(vocab, length, device)
    configs = [SamplerConfig(steps=s, strategy=st, schedule="remaining") for st in ("confidence", "random") for s in STEPS]
    start = time.perf_counter()
    with torch.no_grad():
        if variant == "batched":
            for config in configs:
                sample(model, config, batch_size=samples, record=False)
        else:
            budget = LOGITS_IN_FLIGHT if variant == "budget" else 1 << 62
            sample_many(model, [dict(config=c, batch_size=samples, record=False) for c in configs],
                        logits_in_flight=budget)
    seconds = time.perf_counter() - start
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes
    return {"seconds": seconds, "peak_bytes": peak}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--length", type=int, default=32)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--device", default="auto")
    p.add_argument("--cap", type=float, default=12.0, help="GiB of address space each child may take (CPU)")
    p.add_argument("--variant", choices=sorted(set(VARIANTS.values())), help=argparse.SUPPRESS)  # a child's
    args = p.parse_args(argv)
    if args.vocab < 2 or args.length < 1 or args.samples < 1:
        p.error("--vocab must be at least 2, --length and --samples at least 1")
    if args.variant:
        if resolve_device(args.device).type == "cpu":
            cap = int(args.cap * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        print(json.dumps(run_variant(args.variant, args.vocab, args.length, args.samples, args.device)))
        return 0
    print(f"device {describe_device(resolve_device(args.device))}; vocabulary {args.vocab}, length {args.length}, "
          f"{args.samples} rows per cell, {2 * len(STEPS)} cells; logits budget {LOGITS_IN_FLIGHT / 2**30:.2f} GiB")
    for label, variant in VARIANTS.items():
        cmd = [sys.executable, __file__, "--variant", variant, "--vocab", str(args.vocab), "--length",
               str(args.length), "--samples", str(args.samples), "--device", args.device, "--cap", str(args.cap)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            print(f"  {label:<36} failed ({args.cap:g} GiB cap): {last[:120]}")
            continue
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"  {label:<36} peak {figures['peak_bytes'] / 2**30:6.2f} GiB   {figures['seconds']:6.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
