"""benchmarks/bench_cache.py times each cache mode after one untimed sample in every mode: a device's first
call at a shape pays for what it builds lazily (kernels picked, workspaces, the allocator's pool), and timed
that cost fell on whichever mode ran first (uncached), flattering or hiding the cache's speed-up."""
from __future__ import annotations

import importlib.util
import sys
from types import SimpleNamespace

from tests.support import ROOT

_spec = importlib.util.spec_from_file_location("bench_cache", ROOT / "benchmarks" / "bench_cache.py")
bench = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_every_mode_is_warmed_up_once_before_any_is_timed(monkeypatch):
    calls = []
    clock = iter(range(1, 1000))

    def timed(model, cfg, length):
        calls.append(cfg.cache)
        return float(next(clock)), [0] * length, ""

    monkeypatch.setattr(bench, "timed", timed)
    args = SimpleNamespace(samples=2, repeats=2, block_length=4, length=8)
    got = bench.measure(model=None, judge=None, steps=8, temperature=0.8, args=args)
    modes = list(bench.MODES)
    assert calls[:3] == modes  # the warm-up, one call per mode, first
    assert calls[3:] == modes * 4  # then 2 samples x 2 repeats, the modes back to back
    # the warm-up's times (1, 2, 3 on the fake clock) are in no mode's figures
    assert got["none"]["seconds"] == [4.0, 7.0, 10.0, 13.0]
    assert all(min(got[m]["seconds"]) > 3 for m in modes)
