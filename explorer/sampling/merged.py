"""Merged runs: sampler runs that differ only in steps, strategy, schedule, temperature and seed, stepped as one batch.

A sweep is many small runs (the step-count sweep of the "Sampling Strategies & Speed Tradeoffs" notebook:
18 cells of 30 rows, 1 to 32 steps). Packing (packing.py) shares their model calls, but each run still takes
its own sampler steps: on a GPU those small steps, not the model, were four fifths of a packed sweep
(benchmarks/bench_sampler.py on an H200). Here the runs become groups of rows of one batch, and one step
does the tensor work of every group at once. The step is step.py's, the same refresh / propose / choose /
commit a run alone takes (there a run's rows are one group; here each run is one): this module only
walks the groups together (one block, each group while s < its own steps), reads their statistics in
one wait for the device, and reports each run as it ends or is cancelled.

Each group gets exactly what sampler.sample_steps gives its run alone (a test holds every field of the
Trajectory to it, timings aside):
  - its random numbers come from its own generator, drawn in the same order and shapes as alone (the
    uniforms of the group's masked positions (one each), then a position-only strategy's (B, L) uniforms);
  - its model calls are its own: one ModelCall per group that needs logits (yielded together, so a
    driver serves them as it serves separate runs' calls: packing computes a one-canvas call as one
    row, exactly as call_model does alone), and the same NFE;
  - a group steps while s < its own step count, and its k comes from its own schedule.
Only what merges exactly is merged (merge_key()): one block, schedule decoding (no threshold, factor or
entropy bound), no token editing (its blocks end with post steps: each run its own count), no revision, guidance, alg_temp, annealing or EOS rules, one generator per run; top-k / top-p and the canvas
(length and template, or a plan's) shared. A run may record its steps and hand each to its on_step (a
dashboard's runs do): each group's rows of the step, as alone. sample_many merges such runs and packs the
rest.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..devices import model_device
from . import step
from .config import SamplerConfig
from .knobs import KNOBS
from .recorder import Recorder, SamplingCancelled, step_arrays, to_host
from .sampler import as_config, resolve_generators, resolve_plan

# What may differ between merged runs, and what must be off for a run to merge at all (the merged step
# does not implement it): each knob says which (sampling/knobs.py, Knob.merge)
VARYING = tuple(name for name, knob in KNOBS.items() if knob.merge == "vary")
MUST_BE_OFF = tuple(knob for knob in KNOBS.values() if knob.merge == "off")


def merge_key(run: dict):
    """What runs must share to be merged (hashable), or None if this run cannot be merged."""
    cfg = as_config(run["config"])
    if isinstance(run.get("generator"), (list, tuple)):
        return None
    if not all(knob.is_off(getattr(cfg, knob.name)) for knob in MUST_BE_OFF):
        return None
    shared = cfg.replace(**{k: getattr(SamplerConfig(), k) for k in VARYING}).to_dict()
    return (tuple(sorted(shared.items())), *_canvas_of(run))


def _canvas_of(run: dict) -> tuple:
    """What the run starts from: its plan's canvas, or the length and template it is built from."""
    plan = run.get("plan")
    return ("plan", plan.canvas_key) if plan is not None else (run.get("length"), run.get("template"))


@dataclass(eq=False)
class _Group(step.Group):
    """One run of the merge (the k-th): rows a:b of the batch (step.Group: its generator, knobs, steps)."""

    k: int = 0
    seed: int = 0
    should_stop: object = None
    record: bool = False
    on_step: object = None
    done: bool = False
    spent: float = 0.0  # the run's own seconds: its share of each step, and its model calls

    def start(self, x0: torch.Tensor) -> None:
        """The run's recorder, from its rows of the start canvas (as alone: sampler._sample_run)."""
        self.recorder = Recorder(x0[self.a:self.b], self.record, self.on_step, self.should_stop,
                                 clock=lambda: self.spent, wall_clock=False)


class _Waited:
    """How long a step waited for its model calls (the driver charges each group its own share)."""

    def __init__(self):
        self.seconds, self.paused = 0.0, 0.0

    def pause(self) -> None:
        self.paused = time.perf_counter()

    def resume(self, charged) -> None:
        self.seconds = time.perf_counter() - self.paused


def merged_steps(model, runs: list[dict], on_group_done):
    """The merged runs as one step generator: yields a list of ModelCalls (one per group needing logits)
    and reads their logits; on_group_done(k, Trajectory or None) as group k ends (None: cancelled)."""
    device, mask_id = model_device(model), model.config.mask_id
    groups, start, plan = [], 0, None
    for run in runs:
        cfg = as_config(run["config"])
        plan = resolve_plan(model, cfg, run.get("plan"), run.get("length"), run.get("template")) if plan is None else plan
        n, gen = resolve_generators(run.get("generator"), run.get("batch_size"), cfg.seed)
        groups.append(_Group(start, start + n, generator=gen, config=cfg, steps=max(cfg.steps, 1), k=len(groups),
                             seed=cfg.seed if run.get("generator") is None else -1,
                             should_stop=run.get("should_stop"), record=run.get("record", True),
                             on_step=run.get("on_step")))
        start += n
    # the runs share every knob but the VARYING ones (merge_key), so the first run's are the batch's
    batch = step.Batch(groups, groups[0].config, mask_id, device)
    st = step.initial_state(plan.canvas, start, device)
    for g in groups:
        g.start(st.x)
    walk = _Walk(model, batch, st, plan, on_group_done)
    yield from walk.run()


class _Walk:
    """The merged runs' shared state (one canvas of all their rows) and the step they take together."""

    def __init__(self, model, batch: step.Batch, st: step.State, plan, on_group_done):
        self.model, self.batch, self.groups, self.st, self.plan = model, batch, batch.groups, st, plan
        self.device, self.mask_id, self.on_group_done = batch.device, batch.mask_id, on_group_done
        self.block = torch.as_tensor(~plan.canvas.fixed, device=self.device)  # (L,) the one block: all positions to fill
        self.N = ((st.x == self.mask_id) & self.block).sum(dim=1)  # (B,) masked at the block's start
        self.temperatures = [g.config.temperature for g in self.groups]  # merged runs never anneal
        self.unchanged = torch.zeros(st.x.shape[0], dtype=torch.bool, device=self.device)
        self.changed = self.unchanged  # (B,) rows the last step changed
        self.busy = None  # (B,) rows with positions to fill at this step's start (_statistics)
        self.waited = _Waited()
        self.checking = 0.0  # this step's seconds in the runs' should_stop (_not_stopped): not theirs

    def run(self):
        for s in range(max(g.steps for g in self.groups)):
            if all(g.done for g in self.groups):  # every run cancelled
                break
            yield from self._step(s)
            for g in self.groups:
                if not g.done and s == g.steps - 1:
                    self._finish(g)
        return None

    def _step(self, s: int):
        st, start, self.waited.seconds, self.checking = self.st, time.perf_counter(), 0.0, 0.0
        masked = st.x == self.mask_id  # (B, L)
        todo = masked & self.block
        stepping = self._not_stopped([g for g in self.groups if not g.done and s < g.steps])
        if not stepping:
            return
        t, has_todo, n_masked = self._statistics(masked, todo)  # the step's one wait for the device
        active = [g for g in stepping if has_todo[g.k]]  # alone, the others skip the step
        called = yield from step.refresh(self.batch, st, masked, active, self.waited)
        active = self._not_stopped(active)  # a cancel during the model calls ends a run before its step's work
        self.changed = self.unchanged  # (B,) read with the next step's statistics (it marks a group stale)
        arrays = None  # what a recorded step keeps: alone, a step with nothing to commit keeps the canvas
        if active:
            on = {g.k for g in active}
            counts = [n_masked[g.k] if g.k in on else 0 for g in self.groups]  # entries of each group
            proposals, scores, conf = step.propose(self.batch, st, masked, active, self.temperatures, counts)
            if len(active) < len(self.groups):  # cancelled runs' rows commit nothing
                todo = todo & self.batch.rows_of(active)[:, None]
            chosen = step.choose(self.batch, todo, scores, active, s, None, self.N)
            step.commit(st, chosen, proposals, conf, s)
            self.changed = chosen.any(dim=1)
            arrays = (proposals, scores, conf, chosen)
        host = self._streamed_step(stepping, arrays)
        # the model calls are charged by the driver; the cancel checks are no run's work (Recorder._stop_asked)
        seconds = time.perf_counter() - start - self.waited.seconds - self.checking
        rows = sum(g.rows for g in stepping)
        for g in stepping:
            self._record(g, s, t[g.k], g in called, seconds * g.rows / rows, arrays if g in active else None,
                         None if host is None or g.on_step is None else {k: v[g.a:g.b] for k, v in host.items()})

    def _streamed_step(self, stepping: list, arrays) -> dict | None:
        """The step of every run, copied to the host at once when several runs stream their steps (a class's
        runs in the dashboard's queue): one copy, one wait for the device, instead of one per run. A row of a
        run with nothing to commit holds what that run alone records: its canvas, NaN scores, no commit (the
        step's tensors hold exactly that in its rows)."""
        if sum(g.on_step is not None for g in stepping) < 2:
            return None
        x = self.st.x
        proposals, scores, conf, chosen = step.undecided(x) if arrays is None else arrays  # (None: no run had any)
        return to_host(step_arrays(x, proposals, scores, conf, chosen, remasked=torch.zeros_like(chosen)))

    def _statistics(self, masked: torch.Tensor, todo: torch.Tensor):
        """Per group, read from the device at once: its t (masked[g.a:g.b].float().mean(), as alone),
        whether it has positions to fill, how many positions are masked; and each group whose canvas
        the last step changed is marked stale (it asks a model call). On a GPU each read waits for the
        device: reading these one by one was three waits a step."""
        G = len(self.groups)
        self.busy = todo.any(dim=1)  # (B,)
        flags = torch.stack([self.busy, self.changed]).float()  # (2, B)
        hits = torch.zeros((2, G), device=self.device).index_add_(1, self.batch.group_of_row, flags)  # (2, G)
        host = torch.cat([hits.flatten(), step.group_means(masked, self.groups)]).tolist()
        has_todo, changed, t = [h > 0 for h in host[:G]], [h > 0 for h in host[G:2 * G]], host[2 * G:]
        for g in self.groups:
            g.stale = g.stale or changed[g.k]
        # masked count = t x positions, exactly: t is a count of at most 2^24 over its positions, rounded
        # once to float32, so t x positions is within far less than 0.5 of it (one reduction fewer a step)
        L = masked.shape[1]
        return t, has_todo, [round(t[g.k] * g.rows * L) for g in self.groups]

    def _not_stopped(self, groups: list) -> list:
        """The groups whose should_stop() is not true; the others end now, cancelled (alone, a run is
        cancelled after the step in which should_stop turns true: here the merged step's work for all
        runs is not made to wait, which kept a dashboard's next run waiting about one step)."""
        began = time.perf_counter()
        for g in groups:
            if g.should_stop is not None and g.should_stop():
                g.done = True
                self.on_group_done(g.k, None)
        self.checking += time.perf_counter() - began
        return [g for g in groups if not g.done]

    def _record(self, g: _Group, s: int, t: float, called: bool, seconds: float, arrays, host=None) -> None:
        """Group g's step s, as its run alone records it; arrays: the step's (proposals, scores, confidence,
        chosen) of every row, or None where g had nothing to commit (its canvas, NaN scores, no commit);
        host: g's rows of the step already on the host (_streamed_step)."""
        seconds += (g.seconds or 0.0) if called else 0.0
        g.seconds, g.spent = None, g.spent + seconds
        if host is not None or not (g.record or g.on_step is not None):  # nothing to copy from the device
            x, rows = None, (None,) * 4
        else:
            x = self.st.x[g.a:g.b]  # (rows, L)
            rows = step.undecided(x) if arrays is None else tuple(a[g.a:g.b] for a in arrays)
        remask = None if x is None else torch.zeros_like(rows[3])
        try:
            g.recorder.add(s, x, *rows, remask, t=t, temperature=g.config.temperature, called=called,
                           seconds=seconds, host=host)
        except SamplingCancelled:
            g.done = True
            self.on_group_done(g.k, None)

    def _finish(self, g: _Group) -> None:
        g.done = True
        st = self.st
        traj = g.recorder.finish(
            final=st.x[g.a:g.b], committed_at=st.committed_at[g.a:g.b], commit_confidence=st.commit_conf[g.a:g.b],
            fixed=self.plan.canvas.fixed, nfe=g.nfe, config=g.config, seed=g.seed, mask_id=self.mask_id,
            kind="diffusion", tokenizer=getattr(self.model, "tokenizer", None), blocks=self.plan.blocks.copy())
        self.on_group_done(g.k, traj)
