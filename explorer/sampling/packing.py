"""Packed model calls: many sampler runs advanced together, their pending model calls served by shared ones.

    trajs = sample_many(model, [{"config": SamplerConfig(steps=s), "batch_size": 30, "record": False}
                                for s in (1, 8, 32)])

Each run is sampler.sample_steps, the same code sample() drives, keeping its own generator(s),
schedule, strategy and step count. In every round each unfinished run is advanced to its next model
call; the calls of the round are then served together, and each run gets back exactly the logits a
call of its own would have given, so every run returns what sample() returns for it (timings aside):
  - a call whose rows are all one canvas (every run's first step: all [MASK], or one template) is
    computed as one row, as call_model does, and runs asking for the same canvas share that one row;
  - identical calls of different runs (same canvas rows, same t) are computed once: runs whose knobs
    lead to the same commits, with the same random numbers, ask the same calls until they diverge;
  - calls of at least MIN_PACK_ROWS rows and one canvas length are concatenated into calls of about
    `tokens_per_call` tokens (never splitting a call) and the logits split back; equal rows in such a
    call are computed once, and on the CPU its distinct rows go through the model in near-equal calls
    of about CPU_CALL_TOKENS (the forward's sweet spot there; each of at least MIN_PACK_ROWS rows);
  - calls of fewer rows go through the model alone, as they would in their own run.
Why the threshold: a row's logits must not depend on which rows share its call. On the CPU (fp32) they
do not, except where a matmul has few rows: the CPU's sgemm computes those with another kernel that
rounds differently (measured on a 2-core CPU: fewer than 2 to 15 rows, the more the wider the layer, 32 to
512; an adaLN time embedding is such a (B, C) matmul). From 16 rows on, every row came out the same whatever
shared its call. Other devices' kernels are not checked: there a packed row may differ in the last bit.

Runs that differ only in steps, strategy, schedule, temperature and seed are first merged into one
batch stepped together (merged.py: the same results, one set of tensor ops per step for all of them);
`merge=False` keeps every run apart.

Timing: a run's seconds are its own steps' wall time plus, for each shared model call, the call's wall
time times its share of the call's rows (sampler.RunClock). So the runs of one sample_many add up to
its wall time; a run's seconds are its cost inside the pack, not the time it would take alone.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from .merged import merge_key, merged_steps
from .recorder import SamplingCancelled
from .sampler import ModelCall, eval_mode, sample, sample_steps
from .trajectory import Trajectory
from .uniform import model_process

MIN_PACK_ROWS = 16  # calls with fewer rows are computed alone (module docstring)
# rows x length per shared call: measured best on a 2-core CPU (patterns, 1 thread); larger calls fall out of L2
TOKENS_PER_CALL = 4096
CPU_CALL_TOKENS = 2400  # on the CPU a shared call's distinct rows go through the model in calls of about this
TOKENS_IN_FLIGHT = 1 << 18  # rows x length of the runs under way (their logits stay in memory)
# bytes of float32 logits (rows x length x vocabulary x 4) the runs under way may hold, merged walks included:
# what bounds a sweep on a real dLLM's vocabulary (32,000 tokens: 2,048 tokens under way; 16 or 66 symbols:
# never reached). A step's copies (float64 draws, probabilities, the calls' outputs) take about six times the
# logits (benchmarks/bench_sweep_memory.py), and one run is always let through: at a large vocabulary a
# sweep then holds about what its largest cell alone does.
LOGITS_IN_FLIGHT = 1 << 28


@dataclass
class _Unit:
    """One model call; it serves groups of identical runs' calls, computing each group's first once."""

    groups: list[list[ModelCall]] = field(default_factory=list)
    one_row: bool = False  # the group's rows are all one canvas: computed as one row (call_model)
    alone: bool = False  # an extended call (a cache holds its rows' context): made as it is, shared with none

    @property
    def tokens(self) -> int:
        return sum(g[0].x.numel() for g in self.groups)


def _bytes(t: torch.Tensor) -> bytes:
    return t.numpy().tobytes()


def _on_host(calls: list[ModelCall]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each call's (x, t) on the CPU, for the grouping keys: off the CPU, one copy of each per canvas
    length for the whole round (a copy to the host waits for the device: three per call were most of
    a GPU sweep's host syncs)."""
    if all(c.x.device.type == "cpu" for c in calls):
        return [(c.x, c.t) for c in calls]
    return host_copies(calls)


def host_copies(calls: list[ModelCall]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """_on_host's copies: the calls of each canvas length concatenated, copied once, split back."""
    out: list = [None] * len(calls)
    by_length: dict[int, list[int]] = {}
    for i, call in enumerate(calls):
        by_length.setdefault(call.x.shape[1], []).append(i)
    for idx in by_length.values():
        rows = [calls[i].x.shape[0] for i in idx]
        xs = torch.cat([calls[i].x for i in idx]).cpu().split(rows)
        ts = torch.cat([calls[i].t for i in idx]).cpu().split(rows)
        for i, x, t in zip(idx, xs, ts):
            out[i] = (x, t)
    return out


def _groups(calls: list[ModelCall]) -> list[tuple[bool, list[ModelCall]]]:
    """Identical calls grouped, in first-seen order, with whether the group is one canvas. A one-canvas
    call is keyed by that canvas whatever its row count; runs that share knobs up to a point (with
    the `remaining` schedule, 24 and 32 steps on a 24-long canvas commit one position a step) ask the same."""
    groups: dict[tuple, tuple[bool, list[ModelCall]]] = {}
    for call, (x, t) in zip(calls, _on_host(calls)):
        xb, n = _bytes(x), x.shape[0]
        row = len(xb) // max(n, 1)
        one = xb == xb[:row] * n  # every row the first, compared as bytes: three tensor ops a call before
        key = (one, x.shape[1], xb[:row] if one else xb, _bytes(t[:1] if one else t))
        groups.setdefault(key, (one, []))[1].append(call)
    return list(groups.values())


def _units(calls: list[ModelCall], tokens_per_call: int) -> list[_Unit]:
    """The model calls that serve `calls`: identical ones computed once, wide ones packed by length."""
    wide: dict[int, list[list[ModelCall]]] = {}
    units = [_Unit([[c]], alone=True) for c in calls if c.kwargs]
    for one, group in _groups([c for c in calls if not c.kwargs]):
        if one or group[0].x.shape[0] < MIN_PACK_ROWS:
            units.append(_Unit([group], one_row=one))
        else:
            wide.setdefault(group[0].x.shape[1], []).append(group)
    for groups in wide.values():
        unit = _Unit()
        for group in groups:
            if unit.groups and unit.tokens + group[0].x.numel() > tokens_per_call:
                units.append(unit)
                unit = _Unit()
            unit.groups.append(group)
        units.append(unit)
    return units


def _distinct_rows(model, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """model(x, t) (N, L, V), computing each distinct row once: rows of different runs often hold the same
    canvas (confidence order commits the same position in every row of a cell, and the 15 symbols
    repeat), 16% of the step-count sweep of the "Sampling Strategies & Speed Tradeoffs" notebook. On the
    CPU only, and only where at least MIN_PACK_ROWS distinct rows remain (a row's logits must not depend
    on what shares its call) and t agrees within each set of equal rows."""
    if x.device.type != "cpu":  # a GPU computes the rows in parallel: the sort behind unique costs more
        return model(x, t)  # (measured on an H200: 0.56 ms a call, a third of the forward it would save)
    uniq, inverse = torch.unique(x, dim=0, return_inverse=True)  # (U, L), (N,)
    if uniq.shape[0] == x.shape[0] or uniq.shape[0] < MIN_PACK_ROWS:
        return _in_cpu_calls(model, x, t)
    t_u = torch.empty(uniq.shape[0], dtype=t.dtype, device=t.device).scatter_(0, inverse, t)  # (U,)
    if not torch.equal(t_u[inverse], t):
        return _in_cpu_calls(model, x, t)
    return _in_cpu_calls(model, uniq, t_u)[inverse]  # (N, L, V)


def _in_cpu_calls(model, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """model(x, t) (N, L, V) in near-equal calls of about CPU_CALL_TOKENS rows x length, each of at least
    MIN_PACK_ROWS rows (so every row's logits are what any call of it gives). Why: a shared call is
    planned at tokens_per_call to find equal rows across many runs, but on the CPU a forward's
    activations fall out of L2 beyond about 2,000 tokens (patterns, 2 threads: 88 us a row at 90 rows,
    102-113 at 150)."""
    k = min(-(-x.numel() // CPU_CALL_TOKENS), x.shape[0] // MIN_PACK_ROWS)
    if k <= 1:
        return model(x, t)
    return torch.cat([model(xs, ts) for xs, ts in zip(x.tensor_split(k), t.tensor_split(k))])


def _serve(model, unit: _Unit) -> None:
    """Fill every call of the unit with its logits, and charge it the unit's time by its share of rows."""
    start = time.perf_counter()
    firsts = [g[0] for g in unit.groups]
    if unit.alone:
        parts = [model(firsts[0].x, firsts[0].t, **firsts[0].kwargs)]
    elif unit.one_row:
        out = model(firsts[0].x[:1], firsts[0].t[:1])  # (1, L, V)
        parts = [out]
    else:
        out = _distinct_rows(model, torch.cat([c.x for c in firsts]), torch.cat([c.t for c in firsts]))
        parts = out.split([c.x.shape[0] for c in firsts])  # (B, L, V) each
    calls = [c for g in unit.groups for c in g]
    for group, part in zip(unit.groups, parts):
        for call in group:
            call.logits = part.expand(call.x.shape[0], -1, -1)  # (B, L, V); a view, never written to
    seconds = time.perf_counter() - start
    rows = sum(c.x.shape[0] for c in calls)
    for call in calls:
        call.seconds = seconds * call.x.shape[0] / rows


class _Pack:
    """The walks under way (a run, or runs merged into one batch: merged.py), each one's step generator
    and its pending model call(s)."""

    def __init__(self, model, runs: Sequence[dict], on_finish, tokens_in_flight: int, merge: bool):
        # every run is checked before any runs: a bad one fails the whole pack up front
        singles = [sample_steps(model, **run) for run in runs]
        sizes = [_run_tokens(model, run) for run in runs]
        self.members = _walks(runs, merge, sizes, tokens_in_flight)  # run indices of each walk, in order
        self.steps = [singles[m[0]] if len(m) == 1 else
                      merged_steps(model, [runs[i] for i in m], self._group_done(w)) for w, m in enumerate(self.members)]
        self.tokens = [sum(sizes[i] for i in m) for m in self.members]
        self.results: list[Trajectory | None] = [None] * len(runs)
        self.pending: dict[int, ModelCall | list[ModelCall]] = {}
        self.on_finish, self.limit, self.next, self.busy = on_finish, tokens_in_flight, 0, 0

    def _group_done(self, w: int):
        def done(k: int, result) -> None:
            self._finished(self.members[w][k], result)
        return done

    def _finished(self, i: int, result) -> None:
        self.results[i] = result
        if self.on_finish is not None:
            self.on_finish(i, result)

    def admit(self) -> None:
        """Start runs in order while the tokens under way stay within the limit (at least one runs)."""
        while self.next < len(self.steps) and (not self.pending or self.busy + self.tokens[self.next] <= self.limit):
            i, self.next = self.next, self.next + 1
            self.busy += self.tokens[i]
            self.advance(i)

    def advance(self, w: int) -> None:
        """Walk w up to its next model call(s), or to its end (then on_finish(i, Trajectory or None) for
        its run; a merged walk reports each of its runs as it ends)."""
        single = len(self.members[w]) == 1  # (a merged walk reported each run as it ended)
        try:
            self.pending[w] = next(self.steps[w])
            return
        except StopIteration as done:
            result = done.value
        except SamplingCancelled:
            result = None
        self.pending.pop(w, None)
        self.busy -= self.tokens[w]
        if single:
            self._finished(self.members[w][0], result)


def _walks(runs: Sequence[dict], merge: bool, tokens: Sequence[int] | None = None,
           limit: int | None = None) -> list[list[int]]:
    """Which runs step together: those merge_key() pairs (two or more) as one merged walk, in the order
    of their first run; every other run alone. A merged walk holds the logits of all its rows at once,
    so runs of one key are cut into walks of at most `limit` tokens (tokens[i]: run i's; a run larger
    than the limit walks alone)."""
    if not merge:
        return [[i] for i in range(len(runs))]
    by_key: dict = {}
    for i, run in enumerate(runs):
        key = merge_key(run)
        by_key.setdefault(("alone", i) if key is None else key, []).append(i)
    if limit is None:
        return list(by_key.values())
    walks = []
    for members in by_key.values():
        walk, held = [], 0
        for i in members:
            if walk and held + tokens[i] > limit:
                walks.append(walk)
                walk, held = [], 0
            walk.append(i)
            held += tokens[i]
        walks.append(walk)
    return walks


def _flat(pending) -> list[ModelCall]:
    return [c for p in pending for c in (p if isinstance(p, list) else [p])]


def _run_tokens(model, run: dict) -> int:
    """Rows x length of a run, for the in-flight limit (an estimate is enough: the model's context)."""
    gen = run.get("generator")
    rows = len(gen) if isinstance(gen, (list, tuple)) else run.get("batch_size") or 1
    plan = run.get("plan")
    return rows * (plan.length if plan is not None else run.get("length") or model.config.block_size)


def _one_by_one(model, runs: Sequence[dict], on_finish) -> list[Trajectory | None]:
    """Each run as sample() runs it (None where it was cancelled), on_finish after each."""
    results = []
    for i, run in enumerate(runs):
        try:
            results.append(sample(model, **run))
        except SamplingCancelled:
            results.append(None)
        if on_finish is not None:
            on_finish(i, results[-1])
    return results


def sample_many(model, runs: Sequence[dict], *, tokens_per_call: int = TOKENS_PER_CALL,
                tokens_in_flight: int = TOKENS_IN_FLIGHT, logits_in_flight: int = LOGITS_IN_FLIGHT, merge: bool = True,
                on_finish: Callable[[int, Trajectory | None], None] | None = None,
                between_calls: Callable[[], object] | None = None) -> list[Trajectory | None]:
    """Run many sampler runs with shared model calls (see the module docstring); one result per run.

    Returns a list as long as `runs`: run i's Trajectory, equal token for token to
    sample(model, **runs[i]) alone (the tests hold it to that), or None where it was cancelled.
    Example (a quality-vs-steps sweep in a fraction of the calls of its runs one by one):
        >>> from explorer import load_checkpoint
        >>> from explorer.sampling import SamplerConfig, sample_many
        >>> model = load_checkpoint("patterns")
        >>> runs = [{"config": SamplerConfig(steps=s, seed=0), "batch_size": 4, "record": False}
        ...         for s in (1, 2, 4, 8)]
        >>> [tr.nfe for tr in sample_many(model, runs)]
        [1, 2, 4, 8]

    runs: one dict of sample()'s arguments per run ("config" plus any keyword of sample: batch_size,
    length, template, plan, generator, record, on_step, should_stop). Run i's result is what
    sample(model, **runs[i]) returns, timings aside, or None where its on_step / should_stop cancelled
    it (the other runs go on). on_finish(i, result) is called as each run ends; an exception it raises
    stops the pack. tokens_per_call: rows x length per shared model call (calls are never split).
    tokens_in_flight: runs start in order as earlier ones end, so that at most this many rows x
    length are under way (their logits are held meanwhile); the first run always starts.
    logits_in_flight: the same limit in bytes of float32 logits (tokens x vocabulary x 4), the one that
    binds on a large vocabulary; merged walks are cut to fit it too.
    between_calls(): called after each shared model call, e.g. to lend the device to other work
    between calls (a dashboard's waiting run need not wait for a whole round of calls).
    merge: step runs that merged.merge_key pairs as one batch (the same results; False: each alone).
    """
    if getattr(model.config, "kind", "diffusion") != "diffusion":
        raise ValueError(f"sample_many() needs a diffusion model, got kind {model.config.kind!r}")
    for name, value in (("tokens_per_call", tokens_per_call), ("tokens_in_flight", tokens_in_flight),
                        ("logits_in_flight", logits_in_flight)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"sample_many(): {name} must be a positive whole number, got {value!r}")
    if model_process(model) == "uniform":  # a cache per run and random canvases: nothing to share, one by one
        return _one_by_one(model, runs, on_finish)
    held = min(tokens_in_flight, logits_in_flight // (4 * model.config.vocab_size))
    pack = _Pack(model, runs, on_finish, max(held, 1), merge)
    with torch.no_grad(), eval_mode(model):
        pack.admit()
        while pack.pending:
            for unit in _units(_flat(pack.pending.values()), tokens_per_call):
                _serve(model, unit)
                if between_calls is not None:
                    between_calls()
            for i in list(pack.pending):
                pack.advance(i)
            pack.admit()
    return pack.results
