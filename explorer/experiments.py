"""Sweeps over sampler knobs: quality and speed as tidy tables (the experiments of the
"Sampling Strategies & Speed Tradeoffs" notebook, generalised).

    table, summary = sweep(model, SamplerConfig(), {"steps": [1, 4, 16], "strategy": ["confidence", "random"]},
                           n_samples=30, seed=0)
    sweet_spot(summary, "pattern_quality")

`table` has one row per generated sample (every varied knob, nfe, wall seconds, tokens/s, each
quality metric); `summary` = aggregate(table) has mean / std / sem per cell. The AR baseline and
the held-out reference appear as their own rows (column `sampler` = "ar" / "reference").
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, fields
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from . import metrics
from .data.corpus import checkpoint_corpus
from .data.tokenizer import is_subword
from .sampling import SamplerConfig, SamplingCancelled, parse_template, sample, sample_ar, sample_many
from .sampling.config import default_length
from .sampling.knobs import KNOBS, unread_by
from .sampling.uniform import model_process

# +1: higher is better, -1: lower is better, 0: no better direction (entropy is judged against the reference)
METRIC_DIRECTION = {"pattern_quality": 1, "pattern_quality_p2": 1, "distinct_symbols": 0, "collapsed": -1,
                    "gen_ppl": -1, "gen_nll": -1, "entropy": 0, "word_validity": 1, "distinct_2": 1,
                    "distinct_3": 1, "ref_distance": -1}
# What ranks cells (sweet spot, "best") when the metric shown can be fooled by collapse: a one-symbol
# pattern scores 1.0 on the notebook's pattern quality, and `the the the` has a low gen-PPL and valid words.
RANKED_BY = {"pattern_quality": "pattern_quality_p2",
             **dict.fromkeys(("gen_ppl", "gen_nll", "entropy", "word_validity", "distinct_2", "distinct_3"),
                             "ref_distance")}
SPEED_COLUMNS = ("nfe", "seconds", "solo_seconds", "tokens_per_s", "ms_per_sample")
# A cell's speed is one generation of it timed alone (time_cells_alone), repeated while the repeats stay
# this cheap, the fastest kept: the least disturbed by whatever else the machine did meanwhile.
SOLO_REPEATS, SOLO_BUDGET_S = 3, 0.25
_clock = time.perf_counter  # what solo runs are timed with (a test's fake clock counts model calls instead)
GROUP_SAMPLER = "sampler"  # "diffusion", "ar" or "reference"
# Whole-number columns: the schema's integer knobs (sampling/knobs.py) and the rows' own counts
INT_COLUMNS = (*(k.name for k in KNOBS.values() if k.type is int), "sample", "batch_size", "length", "nfe")


class SweepCancelled(RuntimeError):
    """Raised when `cancel` fires (before a batch or at any sampler step); `.table` holds the rows
    of the batches finished so far (a batch stopped mid-call is dropped whole)."""

    def __init__(self, table: pd.DataFrame, done: int, total: int):
        super().__init__(f"sweep cancelled after {done} of {total} samples")
        self.table, self.done, self.total = table, done, total


def sample_kind(model) -> str:
    """'patterns' for checkpoints trained on the pattern corpus (scored by pattern quality), 'tokens' for
    a model whose positions are subword tokens (Hugging Face), else 'text'."""
    if is_subword(getattr(model, "tokenizer", None)):
        return "tokens"
    meta = getattr(model, "meta", None) or {}
    return "patterns" if (meta.get("corpus") or {}).get("kind") == "patterns" else "text"


def _check_knob(name: str, knobs: set) -> None:
    if name == "seed":
        raise ValueError("'seed' cannot be varied: samples already use seed, seed+1, ... per batch")
    if name not in knobs:
        raise ValueError(f"unknown sampler knob {name!r}; valid: {', '.join(sorted(knobs - {'seed'}))}")


def read_axes(vary: dict, model) -> dict:
    """A sweep's axes less the knobs `model`'s sampler does not read (the schema's `kinds` and `processes`):
    a uniform-state run accepts by the entropy bound, in no strategy's order or schedule, and an AR model
    writes left to right, one token a call, so their curves per strategy (or step count) were one curve
    drawn again, at as many times the model calls.

    Args: vary, {knob: [values]}; model, the model swept (None: not loaded yet, every axis kept).
    Returns the axes it reads, in their order."""
    if model is None:
        return vary
    kind = getattr(model.config, "kind", "diffusion")
    unread = unread_by(kind, model_process(model) if kind == "diffusion" else "masked", vary)
    return {k: v for k, v in vary.items() if k not in unread}


def sweep_cells(base_config: SamplerConfig, vary) -> list[dict]:
    """The cells of a sweep, each a dict of every varied knob, validated up front so a bad value fails
    before minutes of sampling rather than at cell 7.

    vary: {knob: [values]} (the cartesian product, in the order given) or a list of {knob: value}
    cells (explicit, e.g. threshold cells that need no step count); knobs a cell omits take the base
    config's value, so every row says what it was sampled with.
    """
    knobs = {f.name for f in fields(SamplerConfig)}
    if isinstance(vary, dict):
        for name, values in vary.items():
            if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or not len(values):
                raise ValueError(f"vary[{name!r}] must be a non-empty list of values, got {values!r}")
        cells = [dict(zip(vary, combo)) for combo in itertools.product(*vary.values())]
    else:
        cells = [dict(c) for c in vary]
    if not cells:
        raise ValueError("the sweep has no cells")
    names = list(dict.fromkeys(k for c in cells for k in c))  # union, first-seen order
    for name in names:
        _check_knob(name, knobs)
    full = [{k: c.get(k, getattr(base_config, k)) for k in names} for c in cells]
    for cell in full:
        base_config.replace(**cell)  # raises ValueError naming the bad knob
    return full


ADAPTIVE_RULES = ("threshold", "factor", "entropy_bound")  # each replaces the schedule: no step count


def cells_from_vary(vary: dict):
    """`vary` with the cells of each adaptive rule (threshold, factor, entropy bound: ADAPTIVE_RULES)
    crossed with every knob but the step count and the other rules: such decoding ignores the step
    count, so crossing it with the steps would repeat one run per step value, and one rule at a time
    decides. A None among a rule's values keeps the scheduled cells over the steps. Without a rule's
    values, `vary` itself."""
    rules = {k: vary[k] for k in ADAPTIVE_RULES if vary.get(k) and vary[k] != [None]}
    if not rules:
        return vary
    rest = {k: v for k, v in vary.items() if k not in rules}
    off = dict.fromkeys(rules)
    cells = []
    if any(None in values for values in rules.values()):
        cells += [dict(zip(rest, c), **off) for c in itertools.product(*rest.values())]
    no_steps = {k: v for k, v in rest.items() if k != "steps"}
    cells += [{**dict(zip(no_steps, c)), **off, rule: v} for rule, values in rules.items() for v in values
              if v is not None for c in itertools.product(*no_steps.values())]
    return cells


def _is_cancelled(cancel) -> bool:
    if cancel is None:
        return False
    if hasattr(cancel, "is_set"):  # threading.Event
        return cancel.is_set()
    return bool(cancel())


def score_samples(kind: str, final: np.ndarray, texts: list[str], *, judge=None, words=None) -> pd.DataFrame:
    """Quality metrics of a batch, one row per sample: for patterns the notebook's quality beside the
    collapse readings (metrics.pattern_scores), text metrics else."""
    if kind == "patterns":
        return metrics.pattern_scores(np.atleast_2d(final))
    if kind == "tokens":  # a Hugging Face model: entropy and distinct-n over its tokens
        return metrics.token_quality(np.atleast_2d(final), texts, judge=judge)
    return metrics.text_quality(texts, judge=judge, words=words)


@dataclass(frozen=True)
class _Scoring:
    """How samples of one sweep are scored: the same for diffusion, AR and reference rows."""

    kind: str
    judge: object = None
    words: frozenset | None = None
    tokenizer: object = None

    @classmethod
    def for_model(cls, model, judge=None, words=None) -> "_Scoring":
        kind = sample_kind(model)
        if words is None and kind == "text":  # default: the training corpus word set from the checkpoint
            words = (getattr(model, "meta", None) or {}).get("words")
        return cls(kind, judge if kind in ("text", "tokens") else None,
                   frozenset(words) if words is not None and kind == "text" else None,
                   getattr(model, "tokenizer", None))

    def rows(self, final: np.ndarray, columns: dict) -> pd.DataFrame:
        """`columns` (scalars or per-sample lists) beside the decoded text and quality of `final` (B, L)."""
        final = np.atleast_2d(np.asarray(final))
        texts = [self.tokenizer.decode(r) for r in final] if self.tokenizer is not None else [""] * len(final)
        info = pd.DataFrame({**columns, "text": texts}, index=np.arange(len(final)))
        quality = score_samples(self.kind, final, texts, judge=self.judge, words=self.words)
        return pd.concat([info, quality], axis=1)


@dataclass(frozen=True)
class _Job:
    """One sampler call: `n` samples of one cell (or of the AR baseline) with one seed."""

    baseline: bool  # True: the AR baseline's samples; False: the swept model's
    cell: dict
    seed: int
    n: int
    first: int  # index of its first sample within the cell


def _plan(cells: list[dict], n_samples: int, batch_size: int, with_ar: bool) -> list[_Job]:
    """Batch j of every cell uses seed + j: cells share random numbers, so their differences are the
    knobs' and not the dice's (common random numbers), and any one cell can be re-run alone."""
    sizes = [min(batch_size, n_samples - s) for s in range(0, n_samples, batch_size)]
    firsts = list(range(0, n_samples, batch_size))
    jobs = [_Job(False, cell, j, b, f) for cell in cells for j, (b, f) in enumerate(zip(sizes, firsts))]
    if with_ar:
        jobs += [_Job(True, {}, j, b, f) for j, (b, f) in enumerate(zip(sizes, firsts))]
    return jobs


def _job_args(job: _Job, base: SamplerConfig, seed: int) -> tuple[SamplerConfig, torch.Generator]:
    """The job's config and generator: batch j of every cell draws from seed + j."""
    config = base.replace(**job.cell, seed=seed + job.seed)
    return config, torch.Generator().manual_seed(seed + job.seed)  # CPU: the same samples on every device


def _run_job(job: _Job, model, ar_model, base: SamplerConfig, seed: int, length: int, template, stop=None):
    """The real, batched sampler without recording (record=False: only the final canvas and timings);
    None when `stop()` turned true during the call. should_stop, not on_step: on_step would copy every
    step's tensors to the host, and those copies would land in the timings being measured."""
    config, g = _job_args(job, base, seed)
    m = ar_model if job.baseline else model
    try:
        if m.config.kind == "ar":
            return sample_ar(m, config, batch_size=job.n, length=length, generator=g, record=False,
                             should_stop=stop)
        return sample(m, config, batch_size=job.n, length=length, template=template,
                      generator=g, record=False, should_stop=stop)
    except SamplingCancelled:
        return None


def _packed_run(job: _Job, base: SamplerConfig, seed: int, length: int, template, stop) -> dict:
    """_run_job's sample() arguments, for sample_many."""
    config, g = _job_args(job, base, seed)
    return dict(config=config, batch_size=job.n, length=length, template=template, generator=g,
                record=False, should_stop=stop)


class _Stopped(Exception):
    """A job was cancelled: the sweep stops."""


class _Finished:
    """Rows of the jobs finished so far, scored as each ends and kept in job order (packed jobs end
    out of order); progress(samples done, total) after each. A batch that ends once the sweep is
    cancelled is not scored (scoring costs judge calls, on a device others may be waiting for)."""

    def __init__(self, jobs: list[_Job], scoring: "_Scoring", seed: int, progress, cancel=None):
        self.jobs, self.scoring, self.seed, self.progress, self.cancel = jobs, scoring, seed, progress, cancel
        self.rows: dict[int, pd.DataFrame] = {}
        self.done, self.total = 0, sum(j.n for j in jobs)

    def __call__(self, i: int, traj) -> None:
        if traj is None or _is_cancelled(self.cancel):
            raise _Stopped
        self.rows[i] = self.scoring.rows(traj.final, _job_columns(self.jobs[i], traj, self.seed))
        self.done += self.jobs[i].n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def parts(self) -> list[pd.DataFrame]:
        return [self.rows[i] for i in sorted(self.rows)]


def _execute(jobs: list[_Job], model, ar_model, base, seed: int, length: int, template, cancel,
             finished: _Finished, pack: bool, tokens_in_flight: int | None = None) -> None:
    """Run every job, finished(i, trajectory) as each ends. pack: the swept diffusion model's jobs go
    through sample_many together (shared model calls, the same samples); the rest one after another."""
    stop = None if cancel is None else (lambda: _is_cancelled(cancel))
    packed = [i for i, job in enumerate(jobs) if pack and not job.baseline and model.config.kind == "diffusion"]
    if packed:
        if _is_cancelled(cancel):
            raise _Stopped
        runs = [_packed_run(jobs[i], base, seed, length, template, stop) for i in packed]
        # between calls, `cancel` is asked too: a dashboard's cancel check is where it lends the device
        # to a waiting run (runtime/queue.DeviceTurns.pause), so a run waits one call, not a round
        held = {} if tokens_in_flight is None else {"tokens_in_flight": tokens_in_flight}
        sample_many(model, runs, on_finish=lambda k, traj: finished(packed[k], traj), between_calls=stop, **held)
    for i in sorted(set(range(len(jobs))) - set(packed)):
        traj = None if _is_cancelled(cancel) else _run_job(jobs[i], model, ar_model, base, seed, length, template, stop)
        finished(i, traj)


def _job_columns(job: _Job, traj, seed: int) -> dict:
    B, L = traj.final.shape
    sampler = "ar" if job.baseline or traj.kind == "ar" else "diffusion"
    # `seconds`: the batch's cost inside the sweep (packed: its steps plus its share of the shared model
    # calls), not a speed; tokens_per_s / ms_per_sample come from one generation of the cell timed alone
    # (time_cells_alone), until then from the batch (a cluster's rows keep these)
    per_sample = traj.seconds / B
    return {GROUP_SAMPLER: sampler, **job.cell, "seed": seed + job.seed,
            "sample": job.first + np.arange(B), "batch_size": B, "length": L, "nfe": traj.nfe,
            "seconds": traj.seconds, "solo_seconds": math.nan,
            "tokens_per_s": _generated(traj) / B / per_sample if per_sample > 0 else math.nan,
            "ms_per_sample": 1000 * per_sample}


def _generated(traj) -> int:
    """Positions the run generated (a template's given ones are not)."""
    fixed = getattr(traj, "fixed", None)
    return int((~np.asarray(fixed, dtype=bool)).sum()) if fixed is not None else int(np.size(traj.final))


def _solo_seconds(job: _Job, model, ar_model, base: SamplerConfig, seed: int, length: int, template,
                  stop=None) -> tuple[float, int] | None:
    """(wall seconds, positions generated) of one generation of the job's cell run by itself: its first
    sample, nothing else on the sampler (no shared calls, no queue), timed with _clock. Repeated up to
    SOLO_REPEATS times while the repeats stay under SOLO_BUDGET_S; the fastest kept. None if stopped."""
    solo, best, spent = _Job(job.baseline, job.cell, job.seed, 1, 0), math.inf, 0.0
    for _ in range(SOLO_REPEATS):
        start = _clock()
        traj = _run_job(solo, model, ar_model, base, seed, length, template, stop)
        took = _clock() - start
        if traj is None:
            return None
        best, spent = min(best, took), spent + took
        if spent >= SOLO_BUDGET_S:
            break
    return best, _generated(traj)


def time_cells_alone(finished: "_Finished", model, ar_model, base: SamplerConfig, seed: int, length: int,
                     template, cancel=None) -> None:
    """Each cell's speed, from one of its generations timed alone (_solo_seconds), written to every row of
    the cell: solo_seconds, ms_per_sample and tokens_per_s. A packed sweep shares model calls between cells
    (and the first all-[MASK] step between all of them), so a batch's seconds are its share of calls, not
    what the cell costs: two sweeps of one link differed 3x at one step. Costs one sample per cell."""
    stop = None if cancel is None else (lambda: _is_cancelled(cancel))
    for i, job in enumerate(finished.jobs):
        if job.first != 0 or i not in finished.rows:
            continue
        if _is_cancelled(cancel):
            raise _Stopped
        timed = _solo_seconds(job, model, ar_model, base, seed, length, template, stop)
        if timed is None:
            raise _Stopped
        seconds, generated = timed
        cell = [k for k, other in enumerate(finished.jobs) if other.baseline == job.baseline and other.cell == job.cell]
        for k in cell:
            if k in finished.rows:
                finished.rows[k] = finished.rows[k].assign(
                    solo_seconds=seconds, ms_per_sample=1000 * seconds,
                    tokens_per_s=generated / seconds if seconds > 0 else math.nan)


def canvas_length(model, length: int | None, template) -> int:
    """Canvas length: the template's (parsed as the sampler will parse it), else length, else the model's
    default (sampling.config.default_length: its recommended length or its context)."""
    if template is not None:
        return parse_template(template, model.tokenizer, length=length, context=model.config.block_size).length
    length = default_length(model) if length is None else int(length)
    if not 1 <= length <= model.config.block_size:
        raise ValueError(f"length must be in [1, {model.config.block_size}] (the model's context), got {length}")
    return length


def _ar_model(include_ar, judge):
    """include_ar: an AR checkpoint, True (= the judge doubles as the AR baseline), or None/False."""
    if include_ar is None or include_ar is False:
        return None
    ar = judge if include_ar is True else include_ar
    if ar is None or getattr(ar.config, "kind", None) != "ar":
        raise ValueError("include_ar needs a causal (ar) model: pass one, or include_ar=True with an AR judge")
    return ar


def _warm_up(model, ar_model, base: SamplerConfig, length: int, template) -> None:
    """One untimed tiny call each, so one-time costs (allocator, kernels) do not land in cell 1's timing."""
    g = torch.Generator().manual_seed(0)
    if model.config.kind == "ar":
        sample_ar(model, base, batch_size=1, length=min(length, 8), generator=g, record=False)
    else:
        sample(model, base.replace(steps=1, threshold=None), batch_size=1, length=length,
               template=template, generator=g, record=False)
    if ar_model is not None:
        sample_ar(ar_model, base, batch_size=1, length=min(length, 8), generator=g, record=False)


def reference_rows(scoring: _Scoring, reference, length: int) -> pd.DataFrame:
    """The yardstick: held-out text (list of strings) or pattern ids (N, L), scored like samples."""
    if len(reference) and isinstance(reference[0], str):
        if scoring.tokenizer is None:
            raise ValueError("reference texts need a model with a tokenizer")
        ids = np.array([scoring.tokenizer.encode(s) for s in reference])
    else:
        ids = np.atleast_2d(np.asarray(reference))
    if ids.shape[1] != length:
        raise ValueError(f"reference rows have {ids.shape[1]} positions, samples have {length}")
    return scoring.rows(ids, {GROUP_SAMPLER: "reference", "sample": np.arange(len(ids)), "length": length})


def sweep(model, base_config: SamplerConfig | None = None, vary: dict | None = None, n_samples: int = 30,
          seed: int = 0, *, length: int | None = None, template=None, judge=None, words=None,
          batch_size: int | None = None, progress: Callable[[int, int], None] | None = None, cancel=None,
          include_ar=None, reference=None, pack: bool = True,
          tokens_in_flight: int | None = None, time_alone: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sample n_samples per cell of `vary` (see sweep_cells) and score every sample.

    Returns (table, aggregate(table)). progress(done, total) counts samples after each batch; `cancel`
    (threading.Event or callable) is checked before each batch and after every sampler step (a long
    cell stops within a step), and raises SweepCancelled with the finished batches' rows.
    pack (default): the batches of every diffusion cell run together, their model calls shared
    (sampling.sample_many): the same samples, tokens and NFE as pack=False, row for row, in less time.
    Then a batch's `seconds` is its own steps' wall time plus, for each shared model call, the call's
    time times the batch's share of its rows (its share of shared calls: the batches add up to the packed
    run's time), not its time alone. Speed is measured apart: after sampling, one generation of each cell
    (its first sample) runs by itself (time_cells_alone): its wall time is `solo_seconds` and
    `ms_per_sample`, its generated positions over that `tokens_per_s`, the same in every row of the cell.
    time_alone=False leaves that out (a sweep's own model calls only, its speed the batches' shares):
    what a benchmark of the sweep itself, or a caller that needs no speed, wants.
    pack=False runs batch after batch.
    The AR baseline always runs batch after batch. tokens_in_flight: rows x length a packed sweep keeps
    under way (sampling.sample_many's; default its own): what its working memory grows with.
    template: as the sampler takes it (█ / [___] / plain prompt); the canvas length is the sampler's.
    reference: held-out texts (or pattern ids) scored as a "reference" row.
    On a Dask cluster: cluster.sweep(..., client=...) (the same arguments and table).
    """
    base = base_config or SamplerConfig()
    cells = sweep_cells(base, vary or {"steps": [base.steps]})
    knobs = list(cells[0])
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    length = canvas_length(model, length, template)
    ar_model = _ar_model(include_ar, judge)
    if template is not None and (ar_model is not None or model.config.kind == "ar"):
        raise ValueError("an AR model cannot fill a template; sweep without include_ar")
    scoring = _Scoring.for_model(model, judge, words)
    jobs = _plan(cells, n_samples, batch_size or min(n_samples, 64), ar_model is not None)
    finished = _Finished(jobs, scoring, seed, progress, cancel)
    _warm_up(model, ar_model, base, length, template)
    try:
        _execute(jobs, model, ar_model, base, seed, length, template, cancel, finished, pack, tokens_in_flight)
        if time_alone:
            time_cells_alone(finished, model, ar_model, base, seed, length, template, cancel)
    except _Stopped:
        table = _concat(finished.parts(), base=base.to_dict(), knobs=knobs, kind=scoring.kind)
        raise SweepCancelled(table, finished.done, finished.total) from None
    parts = finished.parts()
    if reference is not None:
        parts.append(reference_rows(scoring, reference, length))
    table = _concat(parts, base=base.to_dict(), knobs=knobs, kind=scoring.kind)
    return table, aggregate(table, knobs)


def _concat(parts: list[pd.DataFrame], **attrs) -> pd.DataFrame:
    """One table from the batches' rows; attrs carry what the rows alone do not (knobs, base config).
    Integer columns stay integers (nullable Int64) where reference / AR rows leave them empty."""
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    for col in INT_COLUMNS:
        if col in table and table[col].dtype.kind in "fi":
            table[col] = table[col].astype("Int64")
    table = with_ref_distance(table)  # needs the reference row: only the whole table has it
    table.attrs.update(attrs)
    return table


def _value_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in (*SPEED_COLUMNS, *METRIC_DIRECTION) if c in table.columns]


def with_ref_distance(table: pd.DataFrame) -> pd.DataFrame:
    """The table with a per-sample `ref_distance` (metrics.ref_distance: |ln gen-PPL - ln gen-PPL_ref| / ln 4
    + |entropy - entropy_ref| / 0.35, against the reference row's mean gen NLL and mean entropy) when
    it holds a reference row scored by a judge; the table itself otherwise. Every row gets it, the
    reference's own rows included (their spread: the floor a setting can reach)."""
    if not {GROUP_SAMPLER, "gen_nll", "entropy"} <= set(table.columns):
        return table
    ref = table[table[GROUP_SAMPLER] == "reference"]
    if not ref["gen_nll"].notna().any():
        return table
    dist = metrics.ref_distance(table["gen_nll"].astype(float), table["entropy"].astype(float),
                                ref["gen_nll"].astype(float).mean(), ref["entropy"].astype(float).mean())
    return table.assign(ref_distance=dist)


def _symbols_used(groups) -> pd.Series:
    """Per cell, how many different symbols appear across all its samples (patterns: one char each);
    a collapsed sampler uses few of the vocabulary's symbols even where each sample looks fine."""
    return groups["text"].agg(lambda texts: len(set("".join(texts.dropna()))))


def aggregate(table: pd.DataFrame, knobs: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per cell (sampler + varied knobs): n, and mean / std / sem of speed and quality columns.

    std is the sample std (ddof=1, the ±1 std bands); sem = std / sqrt(count of non-NaN values).
    Quality stats are over samples; speed stats (nfe, seconds, tokens/s) over sampler calls (batches),
    so one batch per cell gives a speed without a spread (NaN std) rather than a false ± 0.
    Text with a judge and a reference row adds ref_distance (with_ref_distance); patterns add
    symbols_used, the different symbols across all of a cell's samples.
    """
    if knobs is None:
        knobs = table.attrs.get("knobs") or [f.name for f in fields(SamplerConfig)
                                             if f.name in table.columns and f.name != "seed"]
    keys = [GROUP_SAMPLER, *knobs]
    table = with_ref_distance(table)  # a table built elsewhere (a filtered or read-back CSV) gets it too
    groups = table.groupby(keys, dropna=False, sort=False)
    # speed is measured once per sampler call: its spread is over batches, not over the rows sharing one
    batches = table.drop_duplicates([*keys, "seed"]) if "seed" in table else table
    by_batch = batches.groupby(keys, dropna=False, sort=False)
    out = groups.size().rename("n").to_frame()
    for col in _value_columns(table):
        g = by_batch if col in SPEED_COLUMNS else groups
        stats = g[col].agg(["mean", "std", "count"]).astype(float)  # Int64 NA -> NaN
        out[f"{col}_mean"], out[f"{col}_std"] = stats["mean"], stats["std"]
        out[f"{col}_sem"] = stats["std"] / np.sqrt(stats["count"])
    if "gen_nll_mean" in out:  # corpus-level gen-PPL (exp of the mean NLL, as MDLM reports it); the
        out["gen_ppl_pooled"] = np.exp(out["gen_nll_mean"])  # mean of per-sample PPLs is >= this (Jensen)
    if "distinct_symbols" in table and "text" in table:
        out["symbols_used"] = _symbols_used(groups)
    out = out.reset_index()
    out.attrs.update(table.attrs)
    out.attrs.setdefault("knobs", list(knobs))  # inferred ones too (a table read back from a CSV has no attrs)
    return out


def metric_direction(metric: str, higher_is_better: bool | None = None) -> int:
    if higher_is_better is not None:
        return 1 if higher_is_better else -1
    d = METRIC_DIRECTION.get(metric)
    if not d:
        raise ValueError(f"{metric!r} has no better direction; pass higher_is_better "
                         f"(known: {', '.join(k for k, v in METRIC_DIRECTION.items() if v)})")
    return d


def _measured(summary: pd.DataFrame, metric: str) -> bool:
    col = f"{metric}_mean"
    return col in summary and bool(summary[col].notna().any())


def ranking_metric(summary: pd.DataFrame, metric: str | None = None) -> str:
    """The metric that picks the sweet spot or the "best" cell of a summary, so that a collapsed sampler
    (one-symbol patterns, `the the the`) never wins: for `metric` (or, without one, the main metric)
    its RANKED_BY reading when the summary measured it (pattern_quality_p2 on patterns; ref_distance
    on text scored by a judge beside a reference row), else `metric` itself."""
    if metric is None:
        metric = next((m for m in ("pattern_quality", "gen_ppl", "word_validity") if _measured(summary, m)),
                      "gen_ppl")
    ranked = RANKED_BY.get(metric)
    return ranked if ranked is not None and _measured(summary, ranked) else metric


def sweet_spot(table: pd.DataFrame, metric: str | None = None, *, x: str = "steps", by: Sequence[str] | None = None,
               frac: float = 0.9, higher_is_better: bool | None = None) -> pd.DataFrame:
    """The sweet spot per group (as the "Sampling Strategies & Speed Tradeoffs" notebook marks it, §6): the fewest
    `x` whose mean reaches `frac` of the best mean.

    Higher-is-better: mean >= frac * best. Lower-is-better (gen-PPL): mean <= best / frac, i.e. 1/PPL
    reaches frac of the best 1/PPL. Accepts the tidy table or its aggregate. Only rows with an `x` value
    (diffusion cells) take part; one output row per group of the other varied knobs.
    metric=None ranks by ranking_metric(summary): pattern_quality_p2 on patterns, ref_distance on judged
    text with a reference row (else pattern quality, gen-PPL or word validity); a named metric is used as named.
    """
    summary = table if any(c.endswith("_mean") for c in table.columns) else aggregate(table)
    metric = metric or ranking_metric(summary)
    col, sign = f"{metric}_mean", metric_direction(metric, higher_is_better)
    x = x if x in summary or f"{x}_mean" not in summary else f"{x}_mean"  # x="nfe": the cell's mean NFE
    if col not in summary or x not in summary:
        raise ValueError(f"the table has no {metric!r} or {x!r} column")
    rows = summary[(summary[GROUP_SAMPLER] == "diffusion") & summary[x].notna() & summary[col].notna()]
    if x == "steps" and "threshold" in rows:  # threshold decoding ignores the step count
        rows = rows[rows["threshold"].isna()]
    if by is None:
        names = {f.name for f in fields(SamplerConfig)}
        knobs = summary.attrs.get("knobs") or [c for c in summary.columns if c in names]
        # x = NFE: the points along x are still steps; x = steps: only scheduled (threshold-free) cells remain
        by = [k for k in knobs if k not in (x, "steps") and not (x == "steps" and k == "threshold")]
    groups = rows.groupby(list(by), dropna=False, sort=False) if by else [((), rows)]
    return pd.DataFrame([_sweet_row(g, x, col, sign, frac, key, by) for key, g in groups])


def _sweet_row(group: pd.DataFrame, x: str, col: str, sign: int, frac: float, key, by) -> dict:
    group = group.sort_values(x)
    best = group[col].max() if sign > 0 else group[col].min()
    target = frac * best if sign > 0 else best / frac
    ok = group[col] >= target if sign > 0 else group[col] <= target
    first = group[ok].iloc[0]
    key = key if isinstance(key, tuple) else (key,)
    return {**dict(zip(by, key)), x: first[x], col: first[col], "target": target, "best": best,
            f"best_{x}": group.loc[group[col].idxmax() if sign > 0 else group[col].idxmin(), x]}


def reference_samples(model, corpus, length: int, n: int, seed: int = 0):
    """n held-out samples of `length` for the reference row: text crops, or pattern rows (ids)."""
    if getattr(corpus, "kind", "text") == "patterns":
        return corpus.val_tensor(length, n).numpy()
    return metrics.reference_texts(corpus.val_text, length, n, seed)


def held_out(model, data: str | None = None):
    """The corpus a checkpoint was trained on, for its held-out split (data.corpus.checkpoint_corpus:
    `data`, the recorded file, or Tiny Shakespeare's verified cache / download)."""
    return checkpoint_corpus(getattr(model, "meta", None) or {}, model.tokenizer, model.config.block_size, data)


# The metrics a quality plot can show, in the order one is picked when none is asked for: on patterns
# the period->=2 quality first, which a one-symbol tiling cannot fool (the notebook's pattern_quality
# scores it 1.0, and confidence order collapses to it, so that reading would hide the collapse).
QUALITY_METRICS = ("pattern_quality_p2", "pattern_quality", "ref_distance", "gen_ppl", "word_validity", "entropy", "distinct_2",
                   "distinct_symbols")


def pick_metric(summary, wanted: str = "auto") -> str | None:
    """The metric to plot: the one asked for if the sweep measured it, else the first measured."""
    measured = [m for m in QUALITY_METRICS if f"{m}_mean" in summary and summary[f"{m}_mean"].notna().any()]
    if wanted in measured:
        return wanted
    return measured[0] if measured else None
