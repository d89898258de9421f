"""The cost of running a sweep on a Dask cluster instead of in-process, printed as a table.

    python benchmarks/bench_cluster.py [--workers 2] [--scheduler ADDRESS] [--threads 1] [--repeats 3]

The step-count sweep of the "Sampling Strategies & Speed Tradeoffs" notebook on `patterns` (steps
1,2,3,5,8,12,16,24,32 x confidence/random, `remaining` schedule, 30 samples per cell, seed 0: 18 sampler
calls of batch 30), timed in this process and on a cluster: a LocalCluster of --workers processes
started by the benchmark (its start-up, and the first sweep that makes each worker import torch and load
the checkpoint, are reported apart), or the scheduler at --scheduler. Each figure is the median of
--repeats sweeps, in-process and on the cluster taken turn about; the tables are checked to be identical
(timing columns apart). Ratios within one run are what count: the machine may be shared.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer import cluster  # noqa: E402
from explorer.checkpoint import load_checkpoint  # noqa: E402
from explorer.cluster import sweep  # noqa: E402
from explorer.sampling import SamplerConfig  # noqa: E402

VARY = {"steps": [1, 2, 3, 5, 8, 12, 16, 24, 32], "strategy": ["confidence", "random"]}
TIMING = ["seconds", "tokens_per_s", "ms_per_sample"]


def timed_sweep(model, client=None):
    t0 = time.perf_counter()
    table, _ = sweep(model, SamplerConfig(schedule="remaining"), VARY, n_samples=30, seed=0, client=client)
    return time.perf_counter() - t0, table


def interleaved(model, client, repeats: int):
    """Median wall time of in-process and cluster sweeps taken turn about, so that both see the same
    load from the machine's other jobs; the last table of each."""
    local, remote = [], []
    for _ in range(repeats):
        local.append(timed_sweep(model))
        remote.append(timed_sweep(model, client))
    return [(statistics.median(s for s, _ in runs), runs[-1][1]) for runs in (local, remote)]


def sampler_seconds(table) -> float:
    """Time inside the sampler calls (each batch's wall time, once): what contention slows, unlike dispatch."""
    batches = table[table["sampler"] == "diffusion"].drop_duplicates(["steps", "strategy", "seed"])
    return float(batches["seconds"].sum())


def row(what: str, seconds: float, note: str = "") -> None:
    print(f"  {what:<44} {seconds:7.3f} s  {note}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--scheduler", default=None, help="time this existing cluster instead of a local one")
    p.add_argument("--threads", type=int, default=1, help="torch threads, in this process and per local worker")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = load_checkpoint("patterns")
    timed_sweep(model)  # untimed: first-call costs of this process
    t0 = time.perf_counter()
    with cluster.open_client(args.scheduler, None if args.scheduler else args.workers, threads=args.threads) as c:
        started = time.perf_counter() - t0
        first, _ = timed_sweep(model, c)  # workers import torch and load the checkpoint
        (local, local_table), (remote, remote_table) = interleaved(model, c, args.repeats)
        n = len(c.nthreads())
    where = args.scheduler or f"LocalCluster of {n} processes"
    row(f"in-process sweep ({args.threads} torch thread)", local,
        f"last run: {sampler_seconds(local_table):.3f} s inside the sampler calls")
    row(f"cluster start ({where})", started)
    row("first sweep on the cluster", first, "workers import torch and load the checkpoint")
    row(f"sweep on the cluster ({n} workers)", remote, f"= {remote / local:.2f}x in-process; "
        f"last run: {sampler_seconds(remote_table):.3f} s inside the sampler calls, summed over workers")
    same = local_table.drop(columns=TIMING).equals(remote_table.drop(columns=TIMING))
    print(f"tables identical (timings apart): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
