"""A run whose steps never wait for the host: Explore's live run at a GPU's launch floor.

The general walk (sampler.py) reads the device once a step, to learn what only the device knows: how many
positions are masked, whether anything is left to commit, whether the canvas changed. On a GPU each read
waits for every kernel queued before it, so a step's time is its kernels' launch time plus that wait, and
a small model's 64-step run was 2.5-3.7x the time of its 64 forwards.

For the runs whose structure is known before they start, the host needs none of it. Under a schedule (no
threshold, factor or entropy bound) every row commits exactly min(k, n) positions a step, so with one row
each step's counts follow from the plan alone. `plan_steps` walks the plan on the host: each step's block,
how many of its positions are masked, how many commit, whether the model is called (the canvas changed
since its last call) and the temperature. `predraw` then draws every random number the general walk draws,
in the same order and shapes, from the same CPU generator, before the first step: the proposals' float64
uniforms (one per masked position, in position order) and a position-only strategy's (1, L) uniforms.
They reach the device in one copy. Each step is then a fixed sequence of tensor ops on static shapes
(`_step_ops`): the model's forward, a proposal drawn at every position and kept where the canvas is masked,
the scores, the rank, the commit, and the step's rows written into the record's device buffers at the
step's index, itself a device tensor. Nothing is read back, so the host queues step after step.

On a GPU, where the model's forward replays from a CUDA graph (explorer.graphs), the whole step, forward
included, is captured once into one CUDA graph and replayed at each step (`Engine`); an engine is kept per
model and run shape, so a repeated run captures nothing. Elsewhere (the CPU, a model without graphs) the
same ops run eagerly, and the model is called only at the steps the plan says.

Same seed, same trajectory: the tokens, scores, confidence, commits, t, temperatures and model calls equal
the general walk's for every seed, and the generator ends in the same state (tests hold the two walks
to it on the CPU; on a GPU, benchmarks/bench_live.py compares their texts). Two things differ in how, not
what: the proposals are computed at every position (the general walk computes the masked ones; each
position's arithmetic is its own, so the kept ones are the same numbers), and a run cancelled part way has
drawn all its random numbers already.

`applies` says which runs take this walk: a schedule, one generator and one row, no revision, token editing,
cache, guidance, Dream's alg_temp or EOS rule, a masked-diffusion model, and a canvas x vocabulary small
enough that computing every position's proposal costs less than the waits it saves (MAX_ENTRIES: a 126k
vocabulary's 256 positions do not). MDLM_EXPLORER_RESIDENT picks when it is used: auto (the default: on a
GPU), on (wherever it applies: the tests run it on the CPU) or off.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from .. import graphs
from ..devices import model_device, to_device
from .config import SamplerConfig
from .proposals import filter_logits, inverse_cdf
from .recorder import Recorder
from .schedules import get_schedule
from .step import NAN, rank_in_row, temperature, undecided
from .strategies import get_strategy

MODES = ("auto", "on", "off")
MAX_ENTRIES = 1 << 21  # canvas positions x vocabulary computed per step at most (256 x 8,192)
MAX_ENGINES = 8  # captured step graphs kept per model, the least recently used dropped
_ENGINES_LOCK = threading.Lock()  # sessions' threads share a model's engines


def mode() -> str:
    """MDLM_EXPLORER_RESIDENT: auto (on a GPU), on (wherever the walk applies) or off."""
    value = os.environ.get("MDLM_EXPLORER_RESIDENT", "auto").strip().lower()
    if value not in MODES:
        raise ValueError(f"MDLM_EXPLORER_RESIDENT must be one of {', '.join(MODES)}, got {value!r}")
    return value


def applies(model, config: SamplerConfig, plan, batch_size: int, generator) -> bool:
    """Whether this run takes the resident walk (see the module docstring for which runs can)."""
    wanted = mode()
    if wanted == "off" or wanted == "auto" and model_device(model).type != "cuda":
        return False
    vocab = getattr(model.config, "vocab_size", None)
    eos = getattr(getattr(model, "tokenizer", None), "eos_ids", None) or []
    guided = config.cfg_scale > 0 and bool(np.asarray(plan.canvas.fixed).any())
    return (plan.process == "masked" and plan.steps is not None and batch_size == 1
            and isinstance(generator, torch.Generator) and not config.adaptive and config.remask == 0
            and config.edit_threshold == 0 and config.cache == "none" and config.alg_temp == 0 and not guided
            and (config.suppress_eos == "off" or not eos) and isinstance(vocab, int)
            and plan.length * vocab <= MAX_ENTRIES and _temperatures_uniform(config, plan))


def _temperatures_uniform(config: SamplerConfig, plan) -> bool:
    """Every step greedy (T = 0) or every step sampling: a step that switches draws differently."""
    total = sum(plan.steps)
    greedy = {temperature(config, i, total, None, plan.n_generate) == 0 for i in range(total)}
    return len(greedy) == 1


@dataclass(frozen=True)
class StepPlan:
    """What the host knows of one step before the run: block b, step s of its S, the block's masked
    positions (todo) and the canvas' (masked) at the step's start, how many commit (k), whether the model
    is called and the temperature."""

    block: int
    s: int
    S: int
    todo: int
    masked: int
    k: int
    called: bool
    temperature: float


def plan_steps(config: SamplerConfig, plan, mask_id: int) -> list[StepPlan]:
    """Every step of a one-row run under a schedule, as the general walk takes it: a step with nothing of
    its block masked draws and calls nothing; the model is called at a step that has work when the canvas
    changed since its last call; k is the schedule's count, at most what is masked."""
    tokens, blocks = np.asarray(plan.canvas.tokens), np.asarray(plan.blocks)
    masked = int((tokens == mask_id).sum())
    schedule, total = get_schedule(config.schedule), sum(plan.steps)
    out, stale, i = [], True, 0
    for b, S in enumerate(plan.steps):
        n = N = int(((tokens == mask_id) & (blocks == b)).sum())
        for s in range(S):
            T = temperature(config, i, total, None, plan.n_generate)
            if n == 0:  # nothing of the block left: no draw, no call, nothing committed
                out.append(StepPlan(b, s, S, 0, masked, 0, False, T))
            else:
                k = int(schedule(torch.tensor([n]), torch.tensor([N]), s, S).clamp(min=0).minimum(torch.tensor(n)))
                out.append(StepPlan(b, s, S, n, masked, k, stale, T))
                stale = k > 0  # called now if it was stale; changed again by its own commits
            n, masked, i = n - out[-1].k, masked - out[-1].k, i + 1
    return out


def predraw(config: SamplerConfig, steps: list[StepPlan], length: int, generator: torch.Generator):
    """(uniforms (steps, L) float64, scores (steps, L) float32 or None): what the general walk draws at each
    step, in its order: the proposals' uniforms (one per masked position, in position order: row i's
    first `masked` entries; none at T = 0), then a position-only strategy's (1, L) scores. A step with
    nothing to commit draws nothing."""
    strategy = get_strategy(config.strategy)
    positional = bool(getattr(strategy, "position_only", False))
    uniforms = torch.full((len(steps), length), 0.5, dtype=torch.float64)
    scores = torch.zeros((len(steps), length)) if positional else None
    shape = torch.empty((1, length), dtype=torch.long)
    for i, sp in enumerate(steps):
        if sp.todo == 0:
            continue
        if sp.temperature != 0:
            uniforms[i, :sp.masked] = torch.rand((sp.masked,), generator=generator, dtype=torch.float64)
        if positional:
            scores[i] = strategy(None, shape, generator).float()[0]
    return uniforms, scores


class Engine:
    """A run shape's device buffers and step: the canvas state, the per-step tables (block masks, commit
    counts, 1/T, uniforms, scores), the record's buffers, and on a GPU the step captured as one CUDA graph.

    Args:
        forward: the model's plain forward(x, t) -> (1, L, V) logits.
        config: the run's knobs (strategy, top-k, top-p, temperature 0 or not are part of the step).
        n_steps, length, mask_id: the run's shape and its [MASK].
        device: where it runs.
        capture: capture the step into a CUDA graph (a GPU only).
        autocast: the caller's autocast dtype on the device (None: off), which a captured forward keeps.
    """

    def __init__(self, forward, config: SamplerConfig, n_steps: int, length: int, mask_id: int,
                 device: torch.device, capture: bool, autocast: torch.dtype | None = None):
        self.forward, self.config, self.mask_id, self.device = forward, config, mask_id, device
        self.autocast = autocast
        self.strategy = get_strategy(config.strategy)
        self.positional = bool(getattr(self.strategy, "position_only", False))
        self.lock = threading.Lock()  # one run at a time: the buffers are shared by its steps
        z = dict(device=device)
        S, L = n_steps, length
        self.mask_index = torch.tensor([mask_id], **z)
        self.x = torch.full((1, L), mask_id, dtype=torch.long, **z)
        self.committed_at = torch.full((1, L), -1, dtype=torch.long, **z)
        self.commit_conf = torch.full((1, L), NAN, **z)
        self.logits = None  # (1, L, V) the last call's, [MASK] at -inf (made at the first call)
        self.i = torch.zeros(1, dtype=torch.long, **z)  # the step's index, advanced by the step itself
        self.blocks = torch.zeros((S, L), dtype=torch.bool, **z)
        self.k = torch.zeros((S, 1), dtype=torch.long, **z)
        self.inv_t = torch.ones(S, dtype=torch.float64, **z)  # each step's 1 / T (CUDA) or T
        self.uniforms = torch.full((S, L), 0.5, dtype=torch.float64, **z)
        self.drawn_scores = torch.zeros((S, L), **z) if self.positional else None
        self.rec = dict(tokens=torch.zeros((S + 1, 1, L), dtype=torch.long, **z),
                        scores=torch.zeros((S, 1, L), **z), proposals=torch.zeros((S, 1, L), dtype=torch.long, **z),
                        confidence=torch.zeros((S, 1, L), **z), committed=torch.zeros((S, 1, L), dtype=torch.bool, **z),
                        t=torch.zeros(S, **z))
        self.graph = None
        self.capture = capture
        self.replayable = capture  # every step calls the model and reads its temperature from the table

    def load(self, x0: torch.Tensor, steps: list[StepPlan], blocks: np.ndarray, uniforms, scores) -> None:
        """A run's start: its canvas and tables, copied in (queued: nothing waits)."""
        L = x0.shape[-1]
        block_of_step = np.array([sp.block for sp in steps])
        masks = torch.from_numpy(np.asarray(blocks)[None, :] == block_of_step[:, None])  # (S, L)
        k = torch.tensor([[sp.k] for sp in steps])
        # CUDA divides by a Python float as x * (1 / T), 1 / T taken on the host in float64; the CPU divides
        inv = self.device.type == "cuda"
        inv_t = torch.tensor([(1.0 / sp.temperature if inv else sp.temperature) if sp.temperature else 1.0
                              for sp in steps], dtype=torch.float64)
        self.x.copy_(x0.view(1, L))
        self.committed_at.fill_(-1)
        self.commit_conf.fill_(NAN)
        self.i.zero_()
        self.rec["tokens"][0].copy_(self.x)
        for dst, src in ((self.blocks, masks), (self.k, k), (self.inv_t, inv_t), (self.uniforms, uniforms),
                         (self.drawn_scores, scores)):
            if dst is not None:
                dst.copy_(to_device(src, self.device))

    def step(self, sp: StepPlan) -> None:
        """One step of the plan: the captured graph where there is one (captured at the first step that
        calls the model), else the ops themselves, calling the model only where the plan says."""
        if self.graph is None and self.capture and sp.called:
            self._capture()
        if self.graph is not None:
            self.graph.replay()
        elif self.replayable:  # the graph's ops run as they are captured (the tests run them on the CPU)
            self._step_ops(True, None)
        else:
            self._step_ops(sp.called, sp.temperature)

    def _capture(self) -> None:
        """Capture one step (forward included) into a CUDA graph, after warm-up steps on a side stream (as
        torch.cuda.graphs' docs ask); the warm-ups' writes are undone. A step that cannot be captured leaves
        the engine eager (the plain ops are the same step)."""
        saved = [t.clone() for t in (self.x, self.committed_at, self.commit_conf, self.i)]
        rec = {k: v.clone() for k, v in self.rec.items()}
        precision = (torch.autocast(self.device.type, dtype=self.autocast, cache_enabled=False) if self.autocast
                     else contextlib.nullcontext())
        try:
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side), precision:
                for _ in range(graphs.WARMUP_CALLS):
                    self._step_ops(True, None)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"), precision:
                self._step_ops(True, None)
            self.graph = graph
        except Exception:  # a forward a graph cannot hold: the same ops, eagerly
            self.capture = False
        for dst, src in zip((self.x, self.committed_at, self.commit_conf, self.i), saved):
            dst.copy_(src)
        for k, v in rec.items():
            self.rec[k].copy_(v)

    def _step_ops(self, call: bool, T: float | None) -> None:
        """The step, as the general walk computes it (step.refresh, propose, choose, commit) for one row
        whose counts the plan knows. T: the step's temperature as the general walk divides by it (a
        Python float); None in a graph, which multiplies by the step's 1/T from the table, as CUDA's
        division by a Python float does (it takes the reciprocal on the host)."""
        cfg, x, i = self.config, self.x, self.i
        masked = x == self.mask_id  # (1, L)
        todo = masked & self.blocks.index_select(0, i)  # (1, L)
        self.rec["t"].index_copy_(0, i, masked.float().mean()[None])
        if call:
            out = self.forward(x, masked.float().mean(dim=1))  # (1, L, V)
            new = out.float().index_fill(-1, self.mask_index, float("-inf"))
            if self.logits is None or self.logits.shape != new.shape:
                self.logits = torch.empty_like(new)
            self.logits.copy_(new)
        entries = self.logits[0]  # (L, V)
        if cfg.temperature == 0:
            drawn = entries.argmax(dim=-1)  # (L,)
        else:
            if T is not None:
                scaled = entries.double() / T
            elif self.device.type == "cuda":
                scaled = entries.double() * self.inv_t.index_select(0, i)
            else:
                scaled = entries.double() / self.inv_t.index_select(0, i)
            scaled = filter_logits(scaled, cfg.top_k, cfg.top_p)  # (L, V)
            at = (masked[0].long().cumsum(0) - 1).clamp(min=0)  # (L,) each masked position's uniform
            drawn = inverse_cdf(scaled, self.uniforms.index_select(0, i)[0].gather(0, at))  # (L,)
        probs = torch.softmax(entries, dim=-1)  # (L, V) untempered, unfiltered
        conf = probs.gather(-1, drawn[:, None])[:, 0].masked_fill(~masked[0], NAN)[None]  # (1, L)
        if self.positional:
            scores = self.drawn_scores.index_select(0, i)  # (1, L)
        else:
            scores = self.strategy(probs[None], drawn[None], None).float()  # (1, L)
        scores = scores.masked_fill(~masked, NAN)
        proposals = torch.where(masked, drawn[None], x)  # (1, L)
        key = scores.clamp(min=torch.finfo(scores.dtype).min).masked_fill(~todo, float("-inf"))
        chosen = todo & (rank_in_row(key, descending=True) < self.k.index_select(0, i))  # (1, L)
        x.copy_(torch.where(chosen, proposals, x))
        self.committed_at.copy_(torch.where(chosen, i, self.committed_at))
        self.commit_conf.copy_(torch.where(chosen, conf, self.commit_conf))
        self._record(proposals, scores, conf, chosen)

    def idle(self) -> None:
        """A step with nothing of its block masked: the canvas unchanged, nothing drawn or committed (what
        the general walk records for it, step.undecided)."""
        self.rec["t"].index_copy_(0, self.i, (self.x == self.mask_id).float().mean()[None])
        self._record(*undecided(self.x))

    def _record(self, proposals, scores, conf, chosen) -> None:
        """The step's rows (each (1, L)) into the record's buffers at its index, the canvas after it at the
        next; then the index moves on."""
        i = self.i
        for name, value in (("scores", scores), ("proposals", proposals), ("confidence", conf),
                            ("committed", chosen)):
            self.rec[name].index_copy_(0, i, value[None])
        self.rec["tokens"].index_copy_(0, i + 1, self.x[None])
        i.add_(1)


def engine_for(model, config: SamplerConfig, n_steps: int, length: int, device) -> Engine:
    """The model's engine for this run shape (made once; kept on the model, least recently used dropped)."""
    graphed = graphs.installed(model)
    capture = device.type == "cuda" and graphed is not None and graphed.enabled
    forward = graphed.eager if graphed is not None else model
    autocast = graphs.active_autocast_dtype(device.type)
    key = (config.strategy, config.temperature == 0, config.top_k, config.top_p, n_steps, length, str(device),
           autocast, capture)
    with _ENGINES_LOCK:
        engines = model.__dict__.setdefault("_resident_engines", {})
        engine = engines.pop(key, None)
        if engine is None:
            engine = Engine(forward, config, n_steps, length, model.config.mask_id, device, capture, autocast)
        engines[key] = engine  # now the most recently used
        while len(engines) > MAX_ENGINES:
            engines.pop(next(iter(engines)))
        return engine


def walk(model, config: SamplerConfig, plan, generator: torch.Generator, recording: tuple, seed: int):
    """The run (sampler.sample's, when `applies`): its Trajectory, as the general walk returns it.
    recording: (record, on_step, should_stop)."""
    device = model_device(model)
    mask_id = model.config.mask_id
    steps = plan_steps(config, plan, mask_id)
    uniforms, scores = predraw(config, steps, plan.length, generator)
    x0 = torch.as_tensor(plan.canvas.tokens, device=device)[None]  # (1, L)
    record, on_step, should_stop = recording
    recorder = Recorder(x0, record, on_step, should_stop, host_rows=True)
    engine = engine_for(model, config, len(steps), plan.length, device)
    with engine.lock:
        engine.load(x0, steps, plan.blocks, uniforms, scores)
        _run(engine, steps, recorder, device)
        final = engine.x.clone(), engine.committed_at.clone(), engine.commit_conf.clone()
    return recorder.finish(
        final=final[0], committed_at=final[1], commit_confidence=final[2], fixed=plan.canvas.fixed,
        nfe=sum(sp.called for sp in steps), config=config, seed=seed, mask_id=mask_id, kind="diffusion",
        tokenizer=getattr(model, "tokenizer", None), blocks=plan.blocks.copy())


def _run(engine: Engine, steps: list[StepPlan], recorder: Recorder, device) -> None:
    """Queue the steps; hand each to the recorder (its live callback, its cancel check) once it has run.
    On a GPU the host queues ahead: a run watched step by step (a live callback or a cancel check) has each
    step's rows copied behind it and handed over once its event has passed, so a page gets each step as
    the device finishes it; any other run is copied once, at its end. Elsewhere each step is handed over
    as it ends, as the general walk does."""
    if device.type != "cuda":
        last = time.perf_counter()
        for i, sp in enumerate(steps):
            engine.idle() if sp.todo == 0 else engine.step(sp)
            now = time.perf_counter()
            _hand_step(engine, sp, i, recorder, None, now - last)
            last = now
        return
    watched = recorder.on_step is not None or recorder.should_stop is not None
    copies = _HostCopies(engine, per_step=watched)
    marks = [torch.cuda.Event(enable_timing=True)]  # the start, then one after each step
    marks[0].record()
    handed = 0
    for i, sp in enumerate(steps):
        engine.idle() if sp.todo == 0 else engine.step(sp)
        copies.queue(i)
        marks.append(torch.cuda.Event(enable_timing=True))
        marks[-1].record()
        while watched and handed <= i and marks[handed + 1].query():
            handed = _hand(engine, steps, recorder, copies, marks, handed)
    while handed < len(steps):
        marks[handed + 1].synchronize()
        handed = _hand(engine, steps, recorder, copies, marks, handed)


def _hand(engine, steps, recorder, copies, marks, i: int) -> int:
    """Hand step i (its event, marks[i + 1], has passed) to the recorder; returns i + 1."""
    seconds = marks[i].elapsed_time(marks[i + 1]) / 1e3
    _hand_step(engine, steps[i], i, recorder, copies, seconds)
    return i + 1


def _hand_step(engine: Engine, sp: StepPlan, i: int, recorder: Recorder, copies, seconds: float) -> None:
    """The recorder's add() of step i, from the host copies (a GPU) or the buffers (elsewhere)."""
    rows = copies.rows(i) if copies is not None else step_rows(engine.rec, i)
    t = float(rows.pop("t"))
    host = {k: (v.numpy() if torch.is_tensor(v) else v).copy() for k, v in rows.items()}
    host["remasked"] = np.zeros_like(host["committed"])
    host["edited"] = np.zeros_like(host["committed"])
    recorder.add(i, None, None, None, None, None, None, t=t, temperature=sp.temperature, called=sp.called,
                 seconds=seconds, host=host)


class _HostCopies:
    """Page-locked host copies of the recorded rows: each step's queued behind it (per_step: nothing
    blocks the host), or all of them in one copy once the last step has run."""

    def __init__(self, engine: Engine, per_step: bool):
        self.engine, self.per_step = engine, per_step
        self.host = {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=True) for k, v in engine.rec.items()}
        self.copied = per_step

    def queue(self, i: int) -> None:
        if self.per_step:
            on_host = step_rows(self.host, i)
            for k, row in step_rows(self.engine.rec, i).items():
                on_host[k].copy_(row, non_blocking=True)

    def rows(self, i: int) -> dict:
        if not self.copied:  # called once the last step's event has passed
            for k, v in self.engine.rec.items():
                self.host[k].copy_(v)
            self.copied = True
        return step_rows(self.host, i)


def step_rows(record: dict, i: int) -> dict:
    """Step i's rows of a record's buffers (views): the canvas after it (tokens row i + 1, row 0 being the
    start), its other arrays and t (row i)."""
    return {k: v[i + 1] if k == "tokens" else v[i] for k, v in record.items()}
