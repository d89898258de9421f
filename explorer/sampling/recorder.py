"""Collects what each step produced and assembles the Trajectory; shared by both samplers.

With record=False and no on_step callback nothing is copied to the host per step except the
step's wall time, t, temperature and whether the model was called (a few floats). With record=True
alone the step's arrays stay where the run computes and reach the host in one copy at the end; an
on_step callback gets each step's arrays at once, all of them in one copy (to_host). `should_stop`
(a plain callable, checked after every step) cancels without building a StepRecord, so a sweep can
stop mid-call without the per-step host copies (and device syncs) that on_step costs.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from .config import SamplerConfig
from .trajectory import StepRecord, Trajectory


class SamplingCancelled(Exception):
    """Raised when `on_step` returns False or `should_stop()` is true; `.step` is the last step that ran."""

    def __init__(self, step: int, by: str = "the on_step callback"):
        self.step = step
        super().__init__(f"sampling cancelled by {by} after step {step}")


STEP_ARRAYS = ("tokens", "scores", "proposals", "confidence", "committed", "remasked", "edited")
ON_STEP_COPIES = 1  # copies to the host of a step handed to on_step (record=True alone copies at the end)


def _np(t: torch.Tensor) -> np.ndarray:
    # Always a copy: a CPU tensor's .numpy() shares memory, and the sampler updates some in place.
    return t.detach().to("cpu", copy=True).numpy()


def step_arrays(x, proposals, scores, confidence, committed, remasked, edited=None) -> dict:
    """A step's STEP_ARRAYS by name; edited None (token editing off): no position edited."""
    return dict(tokens=x, scores=scores, proposals=proposals, confidence=confidence, committed=committed,
                remasked=remasked, edited=torch.zeros_like(committed) if edited is None else edited)


def to_host(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The tensors as numpy arrays of their own dtypes and shapes, in ONE copy to the host: on a GPU
    each copy waits for the device, and a recorded step's six or seven arrays were as many waits. Their
    bytes travel as one buffer (exact for every dtype); the arrays are disjoint views of it."""
    flat = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in tensors.values()]
    host = _np(torch.cat(flat)) if flat else np.zeros(0, dtype=np.uint8)
    out, at = {}, 0
    for (key, t), raw in zip(tensors.items(), flat):
        dtype = torch.empty(0, dtype=t.dtype).numpy().dtype
        out[key] = host[at:at + raw.numel()].view(dtype).reshape(tuple(t.shape))
        at += raw.numel()
    return out


class Recorder:
    def __init__(self, x0: torch.Tensor, record: bool, on_step: Callable | None,
                 should_stop: Callable[[], bool] | None = None, clock: Callable[[], float] = time.perf_counter,
                 *, wall_clock: bool = True, host_rows: bool = False):
        # clock: the run's own seconds (sampler.RunClock: a packed run is not charged its neighbours' work).
        # wall_clock: the clock runs between steps too, so the time should_stop() takes is taken off the
        # run's seconds (waited); a clock that only adds up its steps' time (a merged group's) never had it.
        # host_rows: every step comes with its arrays on the host (add's `host`), none kept on the device
        self.record, self.on_step, self.should_stop, self.clock = record, on_step, should_stop, clock
        self.wall_clock = wall_clock
        self.waited = 0.0  # seconds spent in should_stop(): not the run's work (_stop_asked)
        self.start = clock()
        self.seconds: list[float] = []
        self.t: list[float] = []
        self.temperatures: list[float] = []
        self.called: list[bool] = []
        self.per_row: dict[str, list[np.ndarray]] = {"row_t": [], "row_temperature": [], "row_active": [],
                                                        "row_called": []}
        # record=True: each step's arrays, kept where the run computes (copies made on the device, so
        # nothing waits) and brought to the host once, when the run ends; a run with on_step hands every
        # step to it as numpy arrays anyway, and keeps those
        self.rows: dict[str, list] = {k: [] for k in STEP_ARRAYS}
        self.on_device = record and on_step is None and not host_rows
        if record:
            self.rows["tokens"].append(x0.detach().clone() if self.on_device else _np(x0))

    def add(self, index: int, x, proposals, scores, confidence, committed, remasked, *,
            t: float, temperature: float, called: bool, seconds: float, per_row: dict | None = None,
            edited=None, host: dict | None = None) -> None:
        """Store one step; call on_step; raise SamplingCancelled if it returns False or should_stop().
        per_row: row_t, row_temperature, row_active, row_called (B,) arrays of a run with one generator per row.
        edited: the (B, L) positions token editing replaced, None where it is off (no copy: all False).
        host: the step's arrays (STEP_ARRAYS) already on the host, as to_host makes them (a merged walk copies
        the step of all its runs at once): used instead of copying the tensors given."""
        self.seconds.append(seconds)
        self.t.append(t)
        self.temperatures.append(temperature)
        self.called.append(called)
        for key, value in (per_row or {}).items():
            self.per_row[key].append(value)
        if self.should_stop is not None and self._stop_asked():  # before any copy: nothing is built
            raise SamplingCancelled(index, "should_stop")
        if not self.record and self.on_step is None:
            return
        if host is None:
            arrays = step_arrays(x, proposals, scores, confidence, committed, remasked, edited)
            if self.on_device:  # copied on the device (the sampler may update a canvas in place), nothing waits
                for key, value in arrays.items():
                    self.rows[key].append(value.detach().clone())
                return
            host = to_host(arrays)
        rec = StepRecord(index=index, **host, t=t, temperature=temperature, called_model=called, seconds=seconds,
                         **(per_row or {}))
        if self.record:
            for key in self.rows:
                self.rows[key].append(getattr(rec, key))
        if self.on_step is not None and self.on_step(rec) is False:
            raise SamplingCancelled(index)

    def _stop_asked(self) -> bool:
        """should_stop(), its time kept apart: a dashboard task's cancel check is also where it lends the
        device to other sessions' runs (runtime.tasks.Job.cancelled), and a sweep that waited there for a
        second was charged that second as its own. Its rows then claimed a fraction of their speed, and
        the rate the server measured from them made later sweeps' estimates too long to start by
        themselves."""
        began = time.perf_counter()
        try:
            return self.should_stop()
        finally:
            self.waited += time.perf_counter() - began

    def _seconds(self) -> float:
        """The run's own seconds: its clock since the start, less the cancel checks' waits (_stop_asked)."""
        return self.clock() - self.start - (self.waited if self.wall_clock else 0.0)

    def _stack(self, key: str, shape: tuple, dtype) -> np.ndarray | None:
        if not self.record:
            return None
        rows = self.rows[key]
        if isinstance(rows, np.ndarray):  # stacked already (_rows_to_host)
            return rows.astype(dtype, copy=False)
        return np.stack(rows).astype(dtype, copy=False) if rows else np.zeros((0, *shape), dtype=dtype)

    def _rows_to_host(self) -> None:
        """A record kept on the device: stacked there, then to the host in one copy (to_host)."""
        if self.on_device:
            kept = {key: torch.stack(rows) for key, rows in self.rows.items() if rows}
            self.rows.update(to_host(kept))
            self.on_device = False

    def finish(self, *, final, committed_at, commit_confidence, fixed, nfe: int, config: SamplerConfig,
               seed: int, mask_id: int, kind: str, tokenizer, blocks: np.ndarray | None) -> Trajectory:
        final = _np(final)
        BL = final.shape
        self._rows_to_host()
        row_arrays = {}
        if self.per_row["row_t"]:  # one generator per row: each row's own t, temperature, step count
            row_arrays = dict(row_t=np.stack(self.per_row["row_t"]).astype(np.float32),
                              row_temperatures=np.stack(self.per_row["row_temperature"]).astype(np.float32),
                              row_steps=np.stack(self.per_row["row_active"]).sum(axis=0).astype(np.int64),
                              row_called=np.stack(self.per_row["row_called"]))
        return Trajectory(
            tokens=self._stack("tokens", BL, np.int64), scores=self._stack("scores", BL, np.float32),
            proposals=self._stack("proposals", BL, np.int64),
            confidence=self._stack("confidence", BL, np.float32),
            committed=self._stack("committed", BL, bool), remasked=self._stack("remasked", BL, bool),
            edited=self._stack("edited", BL, bool),
            committed_at=_np(committed_at).astype(np.int64), commit_confidence=_np(commit_confidence),
            fixed=np.broadcast_to(fixed, BL).copy(), final=final.astype(np.int64), nfe=nfe,
            step_seconds=np.array(self.seconds, dtype=np.float64), seconds=self._seconds(),
            config=config, seed=seed, mask_id=mask_id, kind=kind, tokenizer=tokenizer, blocks=blocks,
            step_t=np.array(self.t, dtype=np.float32),
            temperatures=np.array(self.temperatures, dtype=np.float32),
            called_model=np.array(self.called, dtype=bool), **row_arrays)
