"""runtime/cache.py's ModelCache: one load per key however many sessions ask at once, and a newer save
of a checkpoint replaces the older one on that device (a model trained in the browser is re-saved)."""
from __future__ import annotations

import threading
import time

from explorer.dashboard.runtime.cache import ModelCache


def test_sessions_asking_at_once_share_one_load():
    cache, loads, got = ModelCache(), [], []

    def load():
        loads.append(1)
        time.sleep(0.2)  # the others ask while this one loads
        return object()

    threads = [threading.Thread(target=lambda: got.append(cache.get(("tiny", "cpu", 1), load))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(loads) == 1 and len(got) == 4 and all(m is got[0] for m in got)


def test_a_newer_save_replaces_the_older_on_its_device_only():
    cache = ModelCache()
    old_cpu, old_gpu = cache.get(("tiny", "cpu", 1), object), cache.get(("tiny", "cuda", 1), object)
    new_cpu = cache.get(("tiny", "cpu", 2), object)
    assert new_cpu is not old_cpu and cache.get(("tiny", "cpu", 2), object) is new_cpu
    assert cache.get(("tiny", "cuda", 1), object) is old_gpu  # another device's copy stays
    assert cache.get(("tiny", "cpu", 1), object) is not old_cpu  # the older save was dropped: loaded anew
