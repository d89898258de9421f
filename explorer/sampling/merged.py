"""Merged runs: sampler runs that differ only in steps, strategy, schedule, temperature and seed, stepped as one batch.

A sweep is many small runs (the step-count sweep of the "Sampling Strategies & Speed Tradeoffs" notebook:
18 cells of 30 rows, 1 to 32 steps). Packing (packing.py) shares their model calls, but each run still takes
its own sampler steps: on a GPU those small steps, not the model, were four fifths of a packed sweep
(benchmarks/bench_sampler.py on an H200). Here the runs become groups of rows of one batch, and one step
does the tensor work of every group at once.

Each group gets exactly what sampler.sample_steps gives its run alone (a test holds every field of the
Trajectory to it, timings aside):
  - its random numbers come from its own generator, drawn in the same order and shapes as alone (the
    uniforms of the group's masked positions (one each), then a position-only strategy's (B, L) uniforms);
  - its model calls are its own: one ModelCall per group that needs logits (yielded together, so a
    driver serves them as it serves separate runs' calls: packing computes a one-canvas call as one
    row, exactly as call_model does alone), and the same NFE;
  - a group steps while s < its own step count, and its k comes from its own schedule.
Only what merges exactly is merged (merge_key()): one block, schedule decoding (no threshold or factor), no
revision, guidance, alg_temp, annealing or EOS rules, one generator per run, record=False and no
on_step; top-k / top-p, length and template shared. sample_many merges such runs and packs the rest.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..devices import model_device
from .config import SamplerConfig
from .knobs import KNOBS
from .proposals import draw_rows
from .recorder import Recorder, SamplingCancelled
from .sampler import NAN, ModelCall, as_config, initial_state, make_canvas, plan_blocks, rank_in_row, resolve_generators
from .schedules import get_schedule
from .strategies import get_strategy

# What may differ between merged runs, and what must be off for a run to merge at all (the merged step
# does not implement it): each knob says which (sampling/knobs.py, Knob.merge)
VARYING = tuple(name for name, knob in KNOBS.items() if knob.merge == "vary")
MUST_BE_OFF = tuple(knob for knob in KNOBS.values() if knob.merge == "off")


def merge_key(run: dict):
    """What runs must share to be merged (hashable), or None if this run cannot be merged."""
    cfg = as_config(run["config"])
    if run.get("record", True) or run.get("on_step") is not None or isinstance(run.get("generator"), (list, tuple)):
        return None
    if not all(knob.is_off(getattr(cfg, knob.name)) for knob in MUST_BE_OFF):
        return None
    shared = cfg.replace(**{k: getattr(SamplerConfig(), k) for k in VARYING}).to_dict()
    return (tuple(sorted(shared.items())), run.get("length"), run.get("template"))


@dataclass(eq=False)
class _Group:
    """One run of the merge (the k-th): rows a:b of the batch."""

    k: int
    a: int
    b: int
    config: SamplerConfig
    generator: torch.Generator
    seed: int
    steps: int
    should_stop: object = None
    nfe: int = 0
    stale: bool = True
    done: bool = False
    spent: float = 0.0  # the run's own seconds: its share of each step, and its model calls
    charged: float | None = None

    def __post_init__(self):
        self.strategy = get_strategy(self.config.strategy)
        self.schedule = get_schedule(self.config.schedule)
        self.recorder = Recorder(torch.empty(0), False, None, self.should_stop, clock=lambda: self.spent)


def merged_steps(model, runs: list[dict], on_group_done):
    """The merged runs as one step generator: yields a list of ModelCalls (one per group needing logits)
    and reads their logits; on_group_done(k, Trajectory or None) as group k ends (None: cancelled)."""
    device, mask_id = model_device(model), model.config.mask_id
    first = runs[0]
    canvas = make_canvas(model, first.get("length"), first.get("template"))
    blocks = plan_blocks(canvas.fixed, 0)
    groups, start = [], 0
    for run in runs:
        cfg = as_config(run["config"])
        n, gen = resolve_generators(run.get("generator"), run.get("batch_size"), cfg.seed)
        groups.append(_Group(len(groups), start, start + n, cfg, gen, cfg.seed if run.get("generator") is None
                             else -1, max(cfg.steps, 1), run.get("should_stop")))
        start += n
    st = initial_state(canvas, start, device)
    walk = _Walk(model, groups, st, canvas, blocks, device, mask_id, on_group_done)
    yield from walk.run()


class _Walk:
    """The merged runs' shared state (one canvas of all their rows) and the step they take together."""

    def __init__(self, model, groups, st, canvas, blocks, device, mask_id, on_group_done):
        self.model, self.groups, self.st, self.canvas, self.blocks = model, groups, st, canvas, blocks
        self.device, self.mask_id, self.on_group_done = device, mask_id, on_group_done
        self.cfg = groups[0].config  # top_k, top_p: shared
        self.mask_index = torch.tensor([mask_id], device=device)
        self.block = torch.as_tensor(~canvas.fixed, device=device)  # (L,) the one block: all positions to fill
        self.N = ((st.x == mask_id) & self.block).sum(dim=1)  # (B,) masked at the block's start
        self.logits = None  # (B, L, V) each group's latest logits, [MASK] at -inf
        self.sizes = {g.b - g.a for g in groups}
        sizes = torch.tensor([g.b - g.a for g in groups], device=device)
        self.group_of_row = torch.repeat_interleave(torch.arange(len(groups), device=device), sizes)  # (B,)
        per_row = lambda values, dtype: torch.tensor(values, dtype=dtype, device=device)[self.group_of_row]
        self.steps = per_row([g.steps for g in groups], torch.long)  # (B,)
        self.strategies = sorted({g.config.strategy for g in groups})
        self.strategy_of_row = per_row([self.strategies.index(g.config.strategy) for g in groups], torch.long)
        self.schedules = sorted({g.config.schedule for g in groups})
        schedule_of_row = per_row([self.schedules.index(g.config.schedule) for g in groups], torch.long)
        self.rows_of_schedule = {name: schedule_of_row == i for i, name in enumerate(self.schedules)}  # (B,) each
        self.unchanged = torch.zeros(st.x.shape[0], dtype=torch.bool, device=device)
        self.changed = self.unchanged  # (B,) rows the last step changed
        self.busy = None  # (B,) rows with positions to fill at this step's start (_statistics)
        self._rows: dict[tuple, torch.Tensor] = {}  # _rows_of's masks, per tuple of group numbers
        # a position-only strategy reads only its proposals' shape: one stand-in per group size, never written
        self._shapes = {n: torch.empty((n, st.x.shape[1]), dtype=torch.long) for n in self.sizes}

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
        st, start, self.waited = self.st, time.perf_counter(), 0.0
        masked = st.x == self.mask_id  # (B, L)
        todo = masked & self.block
        stepping = self._not_stopped([g for g in self.groups if not g.done and s < g.steps])
        if not stepping:
            return
        t, has_todo, n_masked = self._statistics(masked, todo)  # the step's one wait for the device
        active = [g for g in stepping if has_todo[g.k]]  # alone, the others skip the step
        called = yield from self._refresh(active, masked)
        active = self._not_stopped(active)  # a cancel during the model calls ends a run before its step's work
        self.changed = self.unchanged  # (B,) read with the next step's statistics (it marks a group stale)
        if active:
            proposals, scores, conf = self._propose(active, masked, n_masked)
            commit = self._choose(active, todo, scores, s)
            st.x = torch.where(commit, proposals, st.x)
            st.committed_at.masked_fill_(commit, s)
            st.commit_conf = torch.where(commit, conf, st.commit_conf)
            self.changed = commit.any(dim=1)
        seconds = time.perf_counter() - start - self.waited  # the model calls are charged by the driver
        rows = sum(g.b - g.a for g in stepping)
        for g in stepping:
            self._record(g, s, t[g.k], g in called, seconds * (g.b - g.a) / rows)

    def _statistics(self, masked: torch.Tensor, todo: torch.Tensor):
        """Per group, read from the device at once: its t (masked[g.a:g.b].float().mean(), as alone),
        whether it has positions to fill, how many positions are masked; and each group whose canvas
        the last step changed is marked stale (it asks a model call). On a GPU each read waits for the
        device: reading these one by one was three waits a step."""
        G = len(self.groups)
        self.busy = todo.any(dim=1)  # (B,) also _choose's
        flags = torch.stack([self.busy, self.changed]).float()  # (2, B)
        hits = torch.zeros((2, G), device=self.device).index_add_(1, self.group_of_row, flags)  # (2, G)
        host = torch.cat([hits.flatten(), self._group_means(masked)]).tolist()
        has_todo, changed, t = [h > 0 for h in host[:G]], [h > 0 for h in host[G:2 * G]], host[2 * G:]
        for g in self.groups:
            g.stale = g.stale or changed[g.k]
        # masked count = t x positions, exactly: t is a count of at most 2^24 over its positions, rounded
        # once to float32, so t x positions is within far less than 0.5 of it (one reduction fewer a step)
        L = masked.shape[1]
        return t, has_todo, [round(t[g.k] * (g.b - g.a) * L) for g in self.groups]

    def _group_means(self, masked: torch.Tensor) -> torch.Tensor:
        """(G,) masked[g.a:g.b].float().mean() of each group, bit for bit: groups of one size are one
        (G, rows x L) reduction (the same exact sum of 0/1 values times the same 1/N); groups of
        different sizes, one reduction each."""
        if len(self.sizes) == 1:
            return masked.float().view(len(self.groups), -1).mean(dim=1)
        return torch.stack([masked[g.a:g.b].float().mean() for g in self.groups])

    def _not_stopped(self, groups: list) -> list:
        """The groups whose should_stop() is not true; the others end now, cancelled (alone, a run is
        cancelled after the step in which should_stop turns true: here the merged step's work for all
        runs is not made to wait, which kept a dashboard's next run waiting about one step)."""
        for g in groups:
            if g.should_stop is not None and g.should_stop():
                g.done = True
                self.on_group_done(g.k, None)
        return [g for g in groups if not g.done]

    def _refresh(self, active, masked):
        """Each active group whose canvas changed since its last call asks its own model call (rule 9)."""
        stale = [g for g in active if g.stale]
        if not stale:
            return set()
        t = masked.float().mean(dim=1)  # (B,) each row's t: row-wise, so a group's slice is its run's t
        calls = [ModelCall(self.st.x[g.a:g.b], t[g.a:g.b]) for g in stale]
        paused = time.perf_counter()
        yield calls
        self.waited = time.perf_counter() - paused
        if self.logits is None:
            self.logits = torch.empty((self.st.x.shape[0], *calls[0].logits.shape[1:]), device=self.device)
        self._store(stale, [call.logits for call in calls])
        for g, call in zip(stale, calls):
            g.nfe, g.stale = g.nfe + 1, False
            g.charged = call.seconds
        return set(stale)

    def _store(self, groups: list, logits: list) -> None:
        """Each group's new logits (B_g, L, V) into its rows of self.logits, cast to float as .float()
        would, [MASK] at -inf; in a few tensor ops whatever the number of groups (on a GPU each op is a
        kernel launch, and one copy per group was a tenth of a merged sweep's launches)."""
        if len(groups) == len(self.groups) and all(part.dtype == self.logits.dtype for part in logits):
            torch.cat(logits, out=self.logits)  # every group: all the rows, in order
        else:
            # the rows' indices built on the host (one tensor op per group before, a fifth of a step's ops)
            rows = torch.from_numpy(np.concatenate([np.arange(g.a, g.b) for g in groups])).to(self.device)
            self.logits.index_copy_(0, rows, torch.cat(logits).to(self.logits.dtype))
        self.logits.index_fill_(-1, self.mask_index, float("-inf"))  # every row: idempotent on the others

    def _propose(self, active, masked, n_masked: list[int]):
        """Proposals, strategy scores and confidence (B, L), as each group's _propose alone gives them.
        n_masked: each group's masked positions, known on the host: the entries are found and drawn
        without waiting for the device."""
        st, rows = self.st, self._rows_of(active)
        on = {g.k for g in active}
        counts = [n_masked[g.k] if g.k in on else 0 for g in self.groups]  # entries of each group
        where = torch.nonzero_static(masked & rows[:, None], size=sum(counts)).unbind(1)  # row-major, as nonzero
        logits = self.logits[where]  # (M, V)
        drawn = self._draw(logits, where[0], counts)
        proposals = st.x.index_put(where, drawn)  # (B, L)
        probs = torch.softmax(logits, dim=-1)  # (M, V) untempered, as _scored
        conf = torch.full(st.x.shape, NAN, device=self.device)
        conf[where] = probs.gather(-1, drawn.unsqueeze(-1)).squeeze(-1)  # drawn is proposals[where]
        scores = torch.full(st.x.shape, NAN, device=self.device)
        entry_strategy, values = self.strategy_of_row[where[0]], None  # (M,)
        for i, name in enumerate(self.strategies):  # distribution scores: row-wise, so computed for every
            strategy = get_strategy(name)            # entry and kept where the entry's group uses them
            if not getattr(strategy, "position_only", False):
                value = strategy(probs[None], drawn[None], None)[0].float()  # (M,)
                values = torch.where(entry_strategy == i, value, NAN if values is None else values)
        if values is not None:
            scores[where] = values
        positional = [g for g in active if getattr(g.strategy, "position_only", False)]
        if positional:
            scores = self._position_scores(positional, masked, scores)
        return proposals, scores, conf

    def _rows_of(self, groups: list) -> torch.Tensor:
        """(B,) bool: the rows of `groups` (one copy to the device, one gather), kept per set of groups:
        the active set changes only as runs end, and this was asked twice a step."""
        key = tuple(g.k for g in groups)
        if key not in self._rows:
            chosen = torch.zeros(len(self.groups), dtype=torch.bool)
            chosen[list(key)] = True
            self._rows[key] = chosen.to(self.device)[self.group_of_row]
        return self._rows[key]

    def _position_scores(self, groups: list, masked: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Position-only strategies' scores of `groups` written into `scores` (NaN where not masked), each
        group's (B_g, L) drawn as alone from its own generator: on the CPU (a position-only strategy
        needs only the canvas's shape; random draws there in any case), then moved in one copy."""
        B, L = masked.shape
        drawn = torch.zeros((B, L))
        for g in groups:
            drawn[g.a:g.b] = g.strategy(None, self._shapes[g.b - g.a], g.generator).float()
        drawn = drawn.to(self.device).masked_fill(~masked, NAN)
        return torch.where(self._rows_of(groups)[:, None], drawn, scores)

    def _draw(self, logits, row_of, counts: list[int]):
        """draw() of each group (proposals.draw_rows with a group per "row": the group's temperature, and
        uniforms from its generator shaped (its masked positions,), as its run alone draws)."""
        return draw_rows(logits, self.group_of_row[row_of], [g.config.temperature for g in self.groups],
                         [g.generator for g in self.groups], self.cfg.top_k, self.cfg.top_p, counts=counts)

    def _choose(self, active, todo, scores, s: int):
        """The k best-scored masked positions of each active group (k from its own schedule)."""
        key = torch.where(todo, scores.clamp(min=torch.finfo(scores.dtype).min), float("-inf"))
        rank = rank_in_row(key, descending=True)  # (B, L)
        n = todo.sum(dim=1)  # (B,)
        k = None  # (B,) filled per schedule; rows no schedule sets keep 0
        # remaining and linear are integer arithmetic, elementwise in S: one call for all their rows, with each
        # row's own step count (rows already past theirs have nothing to do; S = s + 1 keeps them finite)
        S = self.steps.clamp(min=s + 1)
        for name in sorted({g.config.schedule for g in active}):
            mine = [g for g in active if g.config.schedule == name]
            if name in ("remaining", "linear"):
                rows = self.rows_of_schedule[name] & self.busy
                k = torch.where(rows, mine[0].schedule(n, self.N, s, S), 0 if k is None else k)
            else:
                k = torch.zeros_like(n) if k is None else k
                for g in mine:
                    k[g.a:g.b] = g.schedule(n[g.a:g.b], self.N[g.a:g.b], s, g.steps)
        return todo & (rank < k.clamp(min=0).minimum(n)[:, None])

    def _record(self, g: _Group, s: int, t: float, called: bool, seconds: float) -> None:
        seconds += (g.charged or 0.0) if called else 0.0
        g.charged, g.spent = None, g.spent + seconds
        try:
            g.recorder.add(s, None, None, None, None, None, None, t=t, temperature=g.config.temperature,
                           called=called, seconds=seconds)
        except SamplingCancelled:
            g.done = True
            self.on_group_done(g.k, None)

    def _finish(self, g: _Group) -> None:
        g.done = True
        st = self.st
        traj = g.recorder.finish(
            final=st.x[g.a:g.b], committed_at=st.committed_at[g.a:g.b], commit_confidence=st.commit_conf[g.a:g.b],
            fixed=self.canvas.fixed, nfe=g.nfe, config=g.config, seed=g.seed, mask_id=self.mask_id,
            kind="diffusion", tokenizer=getattr(self.model, "tokenizer", None), blocks=np.asarray(self.blocks))
        self.on_group_done(g.k, traj)
