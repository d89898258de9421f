"""Counting, on the CPU, the reads that make the host wait for the device on a GPU.

torch.cuda.set_sync_debug_mode exists only for CUDA. On the CPU the same reads still happen, they just
cost nothing: a TorchDispatchMode sees .item() / bool() / float() (aten._local_scalar_dense), nonzero
without a size, bool-mask indexing and copies to the host; .tolist() and .cpu() of a CPU tensor
dispatch no op, so they are counted by wrapping them (off the CPU each is a copy to the host).
`per_step_syncs` attributes the count to the sampler's steps: a step ends when its run's recorder
stores it (Recorder.add), and Recorder.finish (the run's final copies, once per run) is left out.
"""
from __future__ import annotations

import contextlib
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from explorer.sampling import recorder as recorder_module

# aten ops whose result size or value the host must know: on a GPU each waits for the device
SYNC_OPS = {"_local_scalar_dense", "nonzero", "is_nonzero", "masked_select", "_unique2", "unique_dim",
            "unique_consecutive", "repeat_interleave"}
HOST_READS = ("tolist", "cpu")  # (.numpy() reads a CPU tensor only: the copy before it is the sync)


def _bool_index(args) -> bool:
    """An index list holding a bool mask: x[mask] or x[mask] = v (a nonzero on the device)."""
    indices = args[1] if len(args) > 1 else None
    return isinstance(indices, (list, tuple)) and any(
        isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)


class SyncCounter(TorchDispatchMode):
    """Counts host syncs (`total`) and names them (`names`, op name -> count) while active."""

    def __init__(self):
        super().__init__()
        self.total, self.names, self.paused = 0, defaultdict(int), False

    def hit(self, name: str) -> None:
        if not self.paused:
            self.total += 1
            self.names[name] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in SYNC_OPS:
            self.hit(name)
        elif name in ("index", "index_put", "index_put_") and _bool_index(args):
            self.hit(f"{name}[bool]")
        elif name == "_to_copy" and kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "cpu":
            self.hit("copy to host")
        return func(*args, **kwargs)


@contextlib.contextmanager
def counting_syncs():
    """A SyncCounter over the block, with the host reads of Tensor (tolist, cpu) counted too."""
    counter = SyncCounter()
    saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counted(name, read):
        def wrapper(self, *a, **k):
            counter.hit(name)
            return read(self, *a, **k)
        return wrapper

    for name, read in saved.items():
        setattr(torch.Tensor, name, counted(name, read))
    try:
        with counter:
            yield counter
    finally:
        for name, read in saved.items():
            setattr(torch.Tensor, name, read)


@contextlib.contextmanager
def per_step_syncs(monkeypatch):
    """Yields a list that fills with each step's host syncs (a dict op name -> count per step, every run's
    steps: from one add() of its recorder to the next, so a step holds the copies of the previous step's
    record and the run's first step, which holds its setup, is left out), counted while the block runs."""
    steps: list[dict] = []
    marks: dict[int, dict] = {}
    add, finish = recorder_module.Recorder.add, recorder_module.Recorder.finish
    with counting_syncs() as counter:
        def counted_add(self, *a, **k):
            now = dict(counter.names)  # a step ends as its record is stored: what add() copies is the next's
            if id(self) in marks:
                steps.append({n: c - marks[id(self)].get(n, 0) for n, c in now.items()
                              if c - marks[id(self)].get(n, 0)})
            marks[id(self)] = now
            return add(self, *a, **k)

        def paused_finish(self, *a, **k):
            counter.paused = True
            try:
                return finish(self, *a, **k)
            finally:
                counter.paused = False

        monkeypatch.setattr(recorder_module.Recorder, "add", counted_add)
        monkeypatch.setattr(recorder_module.Recorder, "finish", paused_finish)
        yield steps
