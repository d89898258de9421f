"""The process's model cache (checkpoints.load, kept in runtime/cache.py): sessions loading one checkpoint at once get one
model, shared by every session of the process."""
from __future__ import annotations

import threading

import torch

from explorer.dashboard.tabs.explore import open_session


def test_model_cache_is_one_per_process_and_thread_safe(checkpoints):
    from explorer.dashboard import checkpoints

    got, threads = [], [threading.Thread(target=lambda: got.append(checkpoints.load("tiny", torch.device("cpu"))))
                         for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 4 and all(m is got[0] for m in got)  # four sessions loading at once: one model
    s1 = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    s2 = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    s1.load(wait=True)
    s2.load(wait=True)
    assert s1.model is s2.model is got[0]
