"""What opening a session costs the server in checkpoint reads, before any model call.

    python benchmarks/bench_checkpoint_reads.py [--sessions 30] [--checkpoints patterns shakespeare]

Each session reads the checkpoint it opens (checkpoints.peek: the knobs are fitted before the model loads),
and its load looks for the AR judge (checkpoints.find_judge: Explore's quality curve and the Sweep tab)
through the metadata of the served checkpoints, some of it half a megabyte of training curves. The server
keeps what it read per version of each file (checkpoints.card). Prints, per checkpoint, the CPU time of
one session's reads with that cache emptied first (a server's first session; every session before the
cache existed) and with it full (each later session), medians over --sessions sessions, and their ratio.
Needs the shipped checkpoints/ (the model weights are loaded once, outside the timing).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.checkpoint import load_checkpoint  # noqa: E402
from explorer.dashboard import checkpoints  # noqa: E402
from explorer.dashboard.runtime import cache  # noqa: E402


def session_reads(name: str, model, names: list[str]) -> float:
    """CPU seconds of one session's checkpoint reads: peek, then find_judge for Explore and for Sweep."""
    start = time.process_time()
    checkpoints.peek(name)
    checkpoints.find_judge(model, names)
    checkpoints.find_judge(model, names)
    return time.process_time() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=30)
    p.add_argument("--checkpoints", nargs="+", default=["patterns", "shakespeare"])
    args = p.parse_args()
    names = checkpoints.available(owner=None)
    print(f"served checkpoints: {', '.join(names)}")
    print(f"{'checkpoint':<14}{'first session (ms)':>20}{'later session (ms)':>20}{'ratio':>9}")
    for name in args.checkpoints:
        model = load_checkpoint(name)
        session_reads(name, model, names)  # the files in the OS's page cache, as on a running server
        cold, warm = [], []
        for _ in range(args.sessions):
            cache.CARDS.clear()  # what a server's first session reads
            cold.append(session_reads(name, model, names))
            warm.append(session_reads(name, model, names))
        c, w = statistics.median(cold) * 1000, statistics.median(warm) * 1000
        print(f"{name:<14}{c:>20.1f}{w:>20.2f}{c / max(w, 1e-6):>8.0f}x")


if __name__ == "__main__":
    main()
