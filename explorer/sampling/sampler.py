"""The masked-diffusion sampler: one pure, batched function that records the whole trajectory.

One step, in numbered rules (rule 5, the blocks, is described after the list):
  1. call the model on the canvas with t = masked fraction of each row's canvas;
  2. draw proposals from softmax(logits / T) after top-k then top-p, inverse-CDF in float64, with
     [MASK] excluded (T = 0: argmax);
  3. score every masked position with the strategy, on the untempered, unfiltered distribution;
  4. commit the k best-scored masked positions of the current block (k from the schedule), or
  6. with a threshold, every masked position of the block scoring >= threshold, at least the best;
  7. inside the revision window, send the lowest-confidence decoded tokens of the block back to
     [MASK] (never at a block's last step, so the canvas always ends fully decoded);
  8. the temperature moves linearly from `temperature` to `temperature_end` across the steps;
  9. the model is called only when the canvas changed since the last call: t is a function of the
     canvas, so unchanged input means unchanged logits, and they are reused (no NFE), with or
     without time conditioning. A step with nothing left to commit in its block calls nothing.
 10. what real diffusion LMs add (LLaDA, Dream, Fast-dLLM): classifier-free guidance (cfg_scale: a second pass with the
     prompt masked, 2 NFE per call), EOS / end-of-turn never proposed or committed last (suppress_eos),
     Dream's alg_temp (the k positions drawn from softmax(score / alg_temp), Gumbel-top-k), and
     Fast-dLLM's factor rule beside the threshold rule (commit the n best while the n-th scores
     >= 1 - factor / (n + 1)).
 11. entropy_bound (EB-sampler, Ben-Hamu et al. 2025), a third rule beside threshold and factor: in the
     strategy's order, commit the longest run of positions whose entropies sum to at most the bound plus
     the largest of them (at least one).
 12. edit_threshold (token editing, LLaDA2.1): the step is diffusers' BlockRefinementScheduler.step, driven
     as its LLaDA2 pipeline drives it. Every position of the current block draws a token as the scheduler
     draws it (rule 2 gives way: logits / T, its top-k then top-p, one torch.multinomial call for the
     block from the run's generator; the argmax at T = 0), scored on the distribution it was drawn from
     (rule 3 gives way: confidence is that token's tempered, filtered probability); the masked ones commit
     by the schedule's k (torch.topk, as there) or the threshold rule (strictly above it, else the best),
     and a token committed at an earlier step is replaced by the token drawn there when it differs and
     its probability exceeds edit_threshold (from the step's logits: no extra call). A block filled
     before its last step (a schedule's spare steps; threshold decoding in fewer steps than the block's
     positions) then takes post steps while they edit, at most step.EDIT_POST_STEPS + 1; one that used
     all its steps takes none. Runs without editing keep rules 2 and 3 and their draws (their seeds give
     the trajectories they always gave), and a schedule's spare steps stay empty steps there: nothing can
     change in them, and the plan's step count stays exact.

Blocks (rule 5) partition the positions to generate, in order, into runs of `block_length` (the last
run may be shorter: any block_length works). For a prompt this is LLaDA's semi-AR layout; for an
infill template it fills the gaps left to right. The steps are split as evenly as possible across
blocks, the first blocks taking the remainder, and every block gets at least one step.
With the `cache` knob (cache.py: Fast-dLLM's prefix and dual caches) a block's first model call is a full
forward that writes every layer's keys and values, and its later calls run the model on a window of the
canvas (the block and what follows it, or the block alone) over them: approximate for a bidirectional model.
With a threshold (factor, entropy bound) the step count is not fixed: each block runs until it is fully
decoded (and, with editing, until its edits stop); with editing each group walks its own blocks under a
schedule too (_run_until_decoded), as its post steps are its own.

One generator per row (`generator=[g0, g1, ...]`): row i of the batch is exactly the run of row i alone
with generator gi (batch invariance of the model's own arithmetic aside: see test_batched_rows.py). Every
random draw is made per row, from that row's generator, with the shape a run of it alone draws; a row
that has nothing to commit at a step draws nothing, as it would alone. Temperatures annealed by the
decoded fraction (threshold decoding) are each row's own. Under a schedule every row commits and
re-masks the same number of positions per step, so rows stay in step; under a threshold each row
walks its own blocks and a finished row waits for the others (padding steps that `Trajectory.row`
cuts off). This is how the dashboard serves many sessions with one batched call.

Where the code is: a run starts from its plan (plan.py: the canvas, blocks, steps per block and rows,
which the dashboard draws before the run); this module walks the plan's blocks; the step itself
(refresh, propose, choose, commit, revise) is step.py's, the same functions a merged walk of
sample_many (merged.py) calls, so a step is defined once. A run with one generator is one group of
rows there, a run with one generator per row one group per row. Seeds: step.py says what is kept.

Host syncs (on a GPU each read of a device tensor by the host waits for the device; at small batches
those waits, not the kernels, set a step's time): a step reads the device once (_read_step: t, whether
the canvas changed, which groups step and how many positions each draws for), whatever record is:
record=True keeps the steps on the device and copies them to the host once, when the run ends, and an
on_step callback adds one copy of the step (recorder.py); one generator per row adds one copy of the
rows' own t; threshold decoding, a few scalar reads to move rows to their next block (with the cache
knob, one more a step: each row's block, which decides its window).
Whether several rows are all one canvas (call_model computes them as one row) is part of that read; a
guided call's rows are not, and the driver asks the device (one more). A merged walk (merged.py) reads
once a step. The random numbers, drawn on the CPU, go to a GPU from page-locked memory (devices.to_device):
a copy from pageable memory would wait for the stream too, twice a step. tests/unit/sampling/test_host_syncs.py
counts the reads on the CPU, and CUDA's own count of synchronisations on a GPU. A one-row run under a
schedule reads nothing in its steps: sample() gives it to resident.py, which plans its steps on the host
(on a GPU by default; MDLM_EXPLORER_RESIDENT), with the same trajectory.

The loop is a generator (`sample_steps`): it yields the model calls it needs as a list of ModelCalls
(x, t) and reads the logits its driver puts there. `sample` drives one run, calling the model itself;
`packing.sample_many` drives many runs together and serves their pending calls with shared model
calls. Either way the run's code is the same, so a run's result does not depend on its driver.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from ..devices import model_device
from . import resident, step, uniform
from .cache import BlockCache, check_cache
from .config import SamplerConfig
from .plan import RunPlan, check_plan, plan_run
from .recorder import Recorder
from .step import Group, ModelCall, Part, initial_state  # noqa: F401  (ModelCall: re-exported for drivers)
from .trajectory import Trajectory


class RunClock:
    """A run's own seconds: wall time while its code runs, plus what its driver charges for each model
    call. Driven alone (charge None) that is plain wall time; packed with other runs it leaves out the
    other runs' work, so the runs of one packed call add up to its wall time instead of each claiming it."""

    def __init__(self):
        self.skipped, self.paused = 0.0, 0.0

    def __call__(self) -> float:
        return time.perf_counter() - self.skipped

    def pause(self) -> None:
        self.paused = time.perf_counter()

    def resume(self, charged: float | None) -> None:
        if charged is not None:
            self.skipped += max(0.0, time.perf_counter() - self.paused - charged)


def check_batch_size(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")


@dataclass
class _Run:
    """Everything that stays fixed during one run: its plan, and its rows as step.py's batch (one group
    of every row, or with one generator per row one group per row) served by one model call."""

    model: torch.nn.Module
    config: SamplerConfig
    plan: RunPlan
    batch: step.Batch
    per_row: bool  # one generator per row: each row's t, temperature and step count are recorded
    part: Part = None  # every row: one model call
    recorder: Recorder | None = None
    clock: RunClock = field(default_factory=RunClock)
    cache: BlockCache | None = None  # the `cache` knob's keys and values (cache.py), None when off

    def __post_init__(self):
        self.part = Part(0, self.batch.B)
        self.changed = torch.zeros(self.batch.B, dtype=torch.bool, device=self.batch.device)  # (B,) rows the last step changed
        self.stale = [True] * len(self.batch.groups)  # per group: changed since the model was last called for it
        self.total_steps = None if self.plan.steps is None else sum(self.plan.steps)
        self.edited = None  # (B, L) what the last step edited (token editing), else None
        self.one_canvas = None  # whether the rows were all one canvas at the last read (several rows only)


@contextmanager
def eval_mode(model):
    """Sample in eval mode (no dropout) and leave the model as it was found."""
    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def cpu_generator(generator: torch.Generator | None, seed: int) -> torch.Generator:
    if generator is None:
        return torch.Generator().manual_seed(seed)
    if generator.device.type != "cpu":
        raise ValueError("generator must be a CPU torch.Generator (noise is drawn on the CPU and moved, "
                         "so every device gives the same trajectory for a seed)")
    return generator


def resolve_generators(generator, batch_size: int | None, seed: int):
    """(batch_size, generator): one CPU generator (default: seeded from `seed`; batch_size default 1),
    or a list of CPU generators, one per row (batch_size, if given, must be its length)."""
    if not isinstance(generator, (list, tuple)):
        batch_size = 1 if batch_size is None else batch_size
        check_batch_size(batch_size)
        return batch_size, cpu_generator(generator, seed)
    if not generator or not all(isinstance(g, torch.Generator) for g in generator):
        raise ValueError("generator must be a torch.Generator or a non-empty list of them (one per row)")
    if batch_size is not None and batch_size != len(generator):
        raise ValueError(f"batch_size {batch_size!r} does not match the {len(generator)} generators given "
                         "(one per row): leave batch_size out")
    return len(generator), [cpu_generator(g, seed) for g in generator]


def call_model(model, x: torch.Tensor, t: torch.Tensor, kwargs: dict | None = None,
               one_row: bool | None = None) -> torch.Tensor:
    """model(x, t), computing a batch whose rows are all the same canvas as one row: every batched run
    starts so (all [MASK], or one template), and at step 1 of a 30-row sweep that is a 30x cheaper call.
    Each row then gets exactly the logits of its solo run (a solo run is this one-row call).
    kwargs: the extended call's (a cache holds the rows' context: the call is made as it is)."""
    if kwargs:
        return model(x, t, **kwargs)
    if one_row is None:  # not read with the run's step (ModelCall.one_row): asking waits for the device
        one_row = x.shape[0] > 1 and bool((x == x[:1]).all())
    if x.shape[0] > 1 and one_row:
        return model(x[:1], t[:1]).expand(x.shape[0], -1, -1)  # (B, L, V) view of one row
    return model(x, t)


def _group_temperatures(run: _Run, st: step.State, masked: torch.Tensor) -> list[float]:
    """Each group's temperature as its run alone would have it: threshold decoding anneals by the
    group's own decoded fraction; otherwise the step decides and every group shares it."""
    cfg, n = run.config, run.plan.n_generate
    if run.batch.one or cfg.temperature_end is None or run.total_steps is not None:
        return [step.temperature(cfg, st.step, run.total_steps, masked, n)] * len(run.batch.groups)
    return [step.temperature(cfg, st.step, None, masked[g.a:g.b], n) for g in run.batch.groups]


def _read_step(run: _Run, masked: torch.Tensor, todo: torch.Tensor, post: torch.Tensor | None = None, x=None):
    """What the host needs of a step, read from the device at once (on a GPU each read waits for it:
    read one by one these were four or five waits a step): the canvas' masked fraction t (recorded,
    exactly masked.float().mean()), whether the last step changed the canvas (then the model is
    called again), which groups have something to commit (alone, the others would skip the step) and
    each group's masked positions (so the proposals' entries are found without another wait).
    post (B,): the rows whose filled block takes a step for its edits alone (token editing).
    x (B, L), the canvas of several rows: whether they are all one canvas (run.one_canvas; call_model
    computes such a batch as one row) is read too, instead of by the driver before the model call.
    Returns (t, the stepping groups, each group's masked count, the groups that edit: stepping or post)."""
    groups = run.batch.groups
    if run.batch.one:
        has, counts, changed = todo.any()[None], masked.sum()[None], run.changed.any()[None]  # (1,) each
        post = None if post is None else post.any()[None]
    else:  # one group per row
        has, counts, changed = todo.any(dim=1), masked.sum(dim=1), run.changed  # (B,) each
    # float64 holds the float32 mean and every count exactly
    same = [] if x is None or x.shape[0] < 2 else [(x == x[:1]).all()[None].double()]  # (1,)
    host = torch.cat([masked.float().mean()[None].double(), changed.double(), has.double(), counts.double(),
                      *([] if post is None else [post.double()]), *same]).tolist()
    run.one_canvas = bool(host.pop()) if same else None
    G = len(groups)
    changed, has, counts = host[1:1 + G], host[1 + G:1 + 2 * G], host[1 + 2 * G:1 + 3 * G]
    run.part.stale = run.part.stale or any(c > 0 for c in changed)
    run.stale = [s or c > 0 for s, c in zip(run.stale, changed)]
    stepping = [g for g, h in zip(groups, has) if h > 0]
    counts = [int(n) if h > 0 else 0 for n, h in zip(counts, has)]
    editing = stepping if post is None else [g for g, h, p in zip(groups, has, host[1 + 3 * G:]) if h > 0 or p > 0]
    return host[0], stepping, counts, editing


def _decide(run: _Run, st: step.State, todo, temperatures: list[float], s, S, read, block=None):
    """Proposals, scores, confidence and the commit mask of one step (step.py); the model is not
    called and nothing is drawn when nothing of the block is left to commit (or, token editing, to
    edit). read: _read_step's. Token editing (`block` given) draws at every position of the block as
    diffusers does (step.propose_block), a filled block's post step too; its draws come back as a sixth
    value for step.edit."""
    masked, stepping, counts, editing = read
    if not editing:  # editing includes stepping
        return (*step.undecided(st.x), False, None)
    if block is not None:
        called = yield from step.refresh(run.batch, st, masked, [run.part], run.clock, run.one_canvas, run.cache)
        proposals, scores, conf, drawn = step.propose_block(run.batch, st, masked, block, stepping, editing,
                                                             temperatures)
        chosen = (step.choose_block(run.batch, todo, scores, block, stepping, s, S, st.block_start_masked,
                                    st.entropy) if stepping else torch.zeros_like(todo))
        return proposals, scores, conf, chosen, bool(called), drawn
    called = yield from step.refresh(run.batch, st, masked, [run.part], run.clock, run.one_canvas, run.cache)
    if not stepping:
        return (*step.undecided(st.x), bool(called), None)
    proposals, scores, conf = step.propose(run.batch, st, masked, stepping, temperatures, counts)
    chosen = step.choose(run.batch, todo, scores, stepping, s, S, st.block_start_masked, st.entropy)
    return proposals, scores, conf, chosen, bool(called), None


def _step(run: _Run, st: step.State, block: torch.Tensor, s, S, active=None, post=None) -> None:
    """One step; `block` is (L,) or, rows walking their own blocks, (B, L); s and S the step within the
    block and its steps (ints, or (B,) each row's when rows walk their own blocks; S None: no schedule);
    `active` (B,) marks the rows that are not done yet (one generator per row only); `post` (B,) the rows
    whose filled block steps for its edits (token editing)."""
    start = run.clock()
    masked = st.x == run.batch.mask_id  # (B, L)
    todo = masked & block
    t_mean, stepping, counts, editing = _read_step(run, masked, todo, post, st.x)
    temperatures = _group_temperatures(run, st, masked)
    temperature = temperatures[0] if run.batch.one else step.temperature(
        run.config, st.step, run.total_steps, masked, run.plan.n_generate)  # what the batch records
    editing_on = run.config.edit_threshold > 0
    proposals, scores, conf, chosen, called, drawn = yield from _decide(
        run, st, todo, temperatures, s, S, (masked, stepping, counts, editing), block if editing_on else None)
    per_row = _per_row_facts(run, masked, temperatures, active, called, editing) if run.per_row else None
    step.commit(st, chosen, proposals, conf, st.step)
    changed = chosen
    run.edited = None
    if editing_on and editing:
        run.edited = step.edit(run.batch, st, block, masked, editing, st.step, drawn)
        changed = changed | run.edited
        # recorded as a commit is: the new token as the proposal, its probability as the confidence
        proposals, conf = torch.where(run.edited, st.x, proposals), torch.where(run.edited, st.commit_conf, conf)
    remask = torch.zeros_like(chosen)
    if run.config.remask > 0 and S is not None:  # never at a block's last step, nor in a post step
        late = s < S - 1  # bool, or (B,) each row's
        if post is not None:
            late = late & ~post
        if torch.is_tensor(late) or late:
            remask = step.revise(run.batch, st, block, late if torch.is_tensor(late) else None)
    run.changed = (changed | remask).any(dim=1)  # (B,) read with the next step's statistics (_read_step)
    run.recorder.add(st.step, st.x, proposals, scores, conf, chosen, remask, t=t_mean,
                     temperature=temperature, called=called, seconds=run.clock() - start,
                     per_row=per_row, edited=run.edited)
    st.step += 1


def _per_row_facts(run: _Run, masked: torch.Tensor, temperatures: list[float], active, called: bool,
                   editing: list) -> dict:
    """Each row's t and temperature, computed exactly as a run of the row alone computes them, whether
    the row is still running, and whether its run alone called the model at this step: it steps and its
    canvas changed since its last call (the batch's call may be for the other rows: after a post step
    that edited nothing, token editing, a row alone reuses its logits)."""
    B = masked.shape[0]
    stepped = {id(g) for g in editing}
    row_called = [called and run.stale[i] and id(g) in stepped for i, g in enumerate(run.batch.groups)]
    run.stale = [s and not c for s, c in zip(run.stale, row_called)]
    return {"row_t": step.group_means(masked, run.batch.groups).cpu().numpy().astype(np.float32),
            "row_temperature": np.array(temperatures, dtype=np.float64),
            "row_active": np.ones(B, dtype=bool) if active is None else active.cpu().numpy(),
            "row_called": np.array(row_called, dtype=bool)}


def _run_block(run: _Run, st: step.State, block: torch.Tensor, S: int, b: int) -> None:
    """The S steps of block b (`block` (L,) its positions)."""
    if run.cache is not None:
        run.cache.at([b] * st.x.shape[0])
    st.block_start_masked = ((st.x == run.batch.mask_id) & block).sum(dim=1)  # (B,) N of the schedule
    for s in range(S):
        yield from _step(run, st, block, s, S)


@dataclass
class _Walkers:
    """Where each row of a run whose rows walk their own blocks is (_run_until_decoded): (B,) each."""

    cur: torch.Tensor  # long: the row's block (n_blocks once done)
    post: torch.Tensor  # long: post steps the row took in its block (token editing)
    edits: torch.Tensor  # bool: whether the row's last step edited
    taken: torch.Tensor  # long: steps the row took in its block
    fresh: torch.Tensor  # bool: the row started its block since the schedule's N was last taken
    one: list = field(default_factory=lambda: [0, 0])  # one group: its block and steps in it, on the host

    @classmethod
    def start(cls, B: int, device) -> "_Walkers":
        zeros = torch.zeros(B, dtype=torch.long, device=device)
        return cls(zeros, zeros, zeros.bool(), zeros, torch.ones(B, dtype=torch.bool, device=device))


def _run_until_decoded(run: _Run, st: step.State, block_ids: torch.Tensor, n_blocks: int) -> None:
    """Threshold / factor / entropy-bound decoding, and every run with token editing: each group walks its
    own blocks, a block until the group has decoded it, exactly as it would alone; a finished group waits
    for the others (its padding steps are marked inactive). With token editing a block ends as diffusers'
    LLaDA2 loop ends it (check_block_should_continue): once its last [MASK] is filled, it takes a post step
    (for its edits alone) if its filling steps were fewer than its budget (diffusers' num_inference_steps:
    a schedule's steps for the block; under threshold decoding the block's positions, one commit a step at
    least), then more while the last one edited, at most step.EDIT_POST_STEPS + 1 (a group's post steps
    are those that began with its block filled). So a schedule's steps left after its block is filled
    become post steps, and a block that took its whole budget takes none."""
    mask_id, B, dev = run.batch.mask_id, st.x.shape[0], st.x.device
    editing = run.config.edit_threshold > 0
    budget = _budgets(run.plan, n_blocks, dev)  # (n_blocks + 1,) long
    w = _Walkers.start(B, dev)
    while True:
        masked = st.x == mask_id
        _move_on(run, w, masked, block_ids, n_blocks, budget)
        active = w.cur < n_blocks
        if not bool(active.any()):
            return
        block = block_ids == w.cur[0] if run.batch.one else block_ids[None, :] == w.cur[:, None]  # (L,) or (B, L)
        if run.cache is not None:  # each row's block, read by the host (one more read a step, cached runs only)
            run.cache.at(w.cur.tolist())
        s, S = _schedule_step(run, st, w, masked, block, budget)
        filled = None
        if editing:
            filled = active & ~(masked & block).any(dim=1)  # (B,) rows whose step is a post step
            filled = filled.all().expand(B) if run.batch.one else filled  # one group's: every row filled
        yield from _step(run, st, block, s, S, active if run.per_row else None, filled)
        if editing:
            w.post, w.taken, w.one[1] = w.post + filled.long(), w.taken + 1, w.one[1] + 1
            edits = torch.zeros_like(w.edits) if run.edited is None else run.edited.any(dim=1)
            w.edits = edits.any().expand(B) if run.batch.one else edits


def _move_on(run: _Run, w: _Walkers, masked: torch.Tensor, block_ids: torch.Tensor, n_blocks: int,
             budget: torch.Tensor) -> None:
    """Move the groups whose block is decoded (and, token editing, done with its post steps) on to their
    next block (_run_until_decoded's rule), as many blocks as that takes."""
    B = masked.shape[0]
    while True:
        left = (masked & (block_ids[None, :] == w.cur[:, None])).any(dim=1)  # (B,)
        if run.config.edit_threshold > 0:
            # as diffusers, a block's filling steps stop at its budget (every rule fills it by then)
            left &= w.taken < budget[w.cur]
            first = (w.post == 0) & (w.taken < budget[w.cur])  # filled within its budget: a post step
            again = (w.post > 0) & w.edits & (w.post <= step.EDIT_POST_STEPS)  # the last post step edited
            left |= (first | again) & (w.cur < n_blocks)
        if run.batch.one:  # the rows of one group move together
            left = left.any().expand(B)
        move = ~left & (w.cur < n_blocks)
        if not bool(move.any()):
            return
        w.cur, w.post, w.edits = w.cur + move.long(), w.post.masked_fill(move, 0), w.edits & ~move
        w.taken, w.fresh, w.one = w.taken.masked_fill(move, 0), w.fresh | move, [w.one[0] + 1, 0]


def _schedule_step(run: _Run, st: step.State, w: _Walkers, masked, block, budget):
    """(s, S) of the step: each row's step in its block and the block's steps when a schedule decides (token
    editing), the step's ints for one group or (B,) each row's; else (0, None). Takes the schedule's N
    (st.block_start_masked) of the rows that started a block."""
    if run.plan.steps is None:
        return 0, None
    start = (masked & block).sum(dim=1)  # (B,) masked positions of each row's block
    st.block_start_masked = start if st.block_start_masked is None else torch.where(w.fresh, start,
                                                                                    st.block_start_masked)
    w.fresh = torch.zeros_like(w.fresh)
    if run.batch.one:
        return w.one[1], run.plan.steps[w.one[0]]
    return w.taken, budget[w.cur]


def _budgets(plan: RunPlan, n_blocks: int, device) -> torch.Tensor:
    """(n_blocks + 1,) long: each block's filling steps at most, diffusers' num_inference_steps (the last
    entry, 1, is for rows past their last block): a schedule's steps for the block, or under threshold
    decoding (one commit a step at least) the block's positions."""
    steps = plan.steps if plan.steps is not None else np.bincount(plan.blocks[plan.blocks >= 0], minlength=n_blocks)
    return torch.tensor([*map(int, steps), 1], dtype=torch.long, device=device)


def as_config(config) -> SamplerConfig:
    if isinstance(config, SamplerConfig):
        return config
    if isinstance(config, dict):
        return SamplerConfig.from_dict(config)
    raise TypeError(f"config must be a SamplerConfig (or a dict of its knobs), got {type(config).__name__}")


def sample(model, config: SamplerConfig, *, batch_size: int | None = None, length: int | None = None,
           template: str | None = None, plan: RunPlan | None = None, generator=None, record: bool = True,
           on_step=None, should_stop=None) -> Trajectory:
    """Generate `batch_size` samples from a masked-diffusion model; see the module docstring.

    Args:
        model: called as model(x, t) -> logits (B, L, V), with `.config` (mask_id, block_size, kind);
            an "ar" model is sampled left to right (ar.py).
        config: the sampler's knobs (SamplerConfig).
    Returns:
        A Trajectory: every step's canvas, proposals, scores and commits as numpy arrays
        (record=True), the final tokens, NFE and timings; `.texts()` decodes the final rows.
    Example:
        >>> from explorer import load_checkpoint
        >>> from explorer.sampling import SamplerConfig, sample
        >>> model = load_checkpoint("patterns")
        >>> tr = sample(model, SamplerConfig(steps=8, strategy="confidence", seed=0), batch_size=2)
        >>> tr.tokens.shape[0] == tr.n_steps + 1, tr.nfe
        (True, 8)

    length: canvas length (default: config.default_length). template: █ / [___] / plain prompt,
    see parse_template (needs `model.tokenizer`). plan: instead of length / template, a RunPlan of this
    model and config (plan_run): the run starts from its canvas and walks its blocks, the same run.
    generator: a CPU torch.Generator (default: seeded from config.seed), or a list of them, one per
    row: then batch_size is its length and row i is the run of row i alone with generator i (module
    docstring; `Trajectory.row(i)`). batch_size defaults to 1. record=False keeps only final tokens, NFE and timings (for sweeps).
    on_step(StepRecord) runs after every step; returning False raises SamplingCancelled.
    should_stop() is checked after every step, True raises SamplingCancelled; unlike on_step it copies
    nothing to the host, so it leaves record=False timings as they are.
    """
    config, batch_size, rng, plan, seed = _prepared(model, config, batch_size, length, template, plan, generator)
    recording = (record, on_step, should_stop)
    with torch.no_grad(), eval_mode(model):
        if resident.applies(model, config, plan, batch_size, rng):  # every step planned on the host (resident.py)
            return resident.walk(model, config, plan, rng, recording, seed)
        return drive(model, _steps(model, config, batch_size, rng, plan, recording, seed))


def drive(model, steps) -> Trajectory:
    """Run one step generator to its end, serving each of its model calls with call_model."""
    try:
        while True:
            for call in next(steps):
                call.logits = call_model(model, call.x, call.t, call.kwargs, call.one_row)  # (B, L, V)
    except StopIteration as done:
        return done.value


def resolve_plan(model, config: SamplerConfig, plan, length, template, *, named: str = "template") -> RunPlan:
    """The run's plan: `plan` checked against the model and config, or made from length / template (an AR
    run's prompt: `named` is what its caller calls that argument, for the error)."""
    if plan is None:
        return plan_run(model, config, length=length, template=template)
    if length is not None or template is not None:
        raise ValueError(f"give either a plan or length / {named}: the plan holds the canvas")
    return check_plan(model, config, plan)


def sample_steps(model, config: SamplerConfig, *, batch_size: int | None = None, length: int | None = None,
                 template: str | None = None, plan: RunPlan | None = None, generator=None, record: bool = True,
                 on_step=None, should_stop=None):
    """sample()'s run as a generator, for drivers that serve model calls themselves (packing.sample_many).

    The arguments are checked here, before anything runs. The generator yields a list of ModelCalls
    (one per call the step needs); before it is resumed the driver must set each call's `logits` to
    model(x, t) (exactly: the run's result depends on them bit for bit) and may set `seconds`, the time
    to charge the run for the call (Trajectory.seconds and step_seconds count it; None: all the time
    the run was waiting). It returns the Trajectory (StopIteration.value); cancellation raises
    SamplingCancelled from it. The caller provides torch.no_grad() and eval mode around the model
    calls (sample does).
    """
    config, batch_size, rng, plan, seed = _prepared(model, config, batch_size, length, template, plan, generator)
    return _steps(model, config, batch_size, rng, plan, (record, on_step, should_stop), seed)


def _prepared(model, config, batch_size, length, template, plan, generator):
    """(config, batch size, generator or generators, plan, seed) of a diffusion run, every argument checked
    (one ValueError line for a bad one), once for whichever walk takes the run; seed is what its Trajectory
    records (-1: generators given)."""
    config = as_config(config)
    batch_size, rng = resolve_generators(generator, batch_size, config.seed)
    if getattr(model.config, "kind", "diffusion") != "diffusion":
        raise ValueError(f"sample() needs a diffusion model, got kind {model.config.kind!r}; "
                         "use sample_ar() or sample_any()")
    seed = -1 if generator is not None else config.seed
    return config, batch_size, rng, resolve_plan(model, config, plan, length, template), seed


def _steps(model, config: SamplerConfig, batch_size: int, rng, plan: RunPlan, recording: tuple, seed: int):
    """The general walk of a prepared run (_prepared's): sample_steps' generator. recording: (record,
    on_step, should_stop); seed: what the Trajectory records (-1: generators given)."""
    if plan.process == "uniform":  # random-token noise, not [MASK]: DiffusionGemma's sampler (uniform.py)
        return uniform.walk(model, config, plan, batch_size, rng, recording, seed, RunClock())
    device = model_device(model)
    per_row = isinstance(rng, list)
    groups = ([Group(i, i + 1, generator=g, config=config) for i, g in enumerate(rng)] if per_row
              else [Group(0, batch_size, generator=rng, config=config)])
    eos = getattr(getattr(model, "tokenizer", None), "eos_ids", None) or []
    batch = step.Batch(groups, config, model.config.mask_id, device, eos_ids=eos,
                       fixed=torch.as_tensor(plan.canvas.fixed, device=device))
    check_cache(model, config)
    run = _Run(model, config, plan, batch, per_row)
    if config.cache != "none":
        run.cache = BlockCache(config.cache, plan.blocks, batch_size, bool(getattr(model.config, "shift_logits", False)))
    return _walk(run, batch_size, recording, seed)


def _walk(run: _Run, batch_size: int, recording: tuple, seed: int):
    """The run itself (a generator: see sample_steps); its clock starts when it first runs."""
    plan = run.plan
    st = initial_state(plan.canvas, batch_size, run.batch.device)
    run.recorder = Recorder(st.x, *recording, clock=run.clock)
    block_ids = torch.as_tensor(plan.blocks, device=run.batch.device)  # (L,)
    if plan.steps is None or run.config.edit_threshold > 0:  # each group walks its blocks until decoded
        yield from _run_until_decoded(run, st, block_ids, plan.n_blocks)
    else:
        for b, S in enumerate(plan.steps):
            yield from _run_block(run, st, block_ids == b, S, b)
    return run.recorder.finish(
        final=st.x, committed_at=st.committed_at, commit_confidence=st.commit_conf, fixed=plan.canvas.fixed,
        nfe=run.part.nfe, config=run.config, seed=seed, mask_id=run.batch.mask_id,
        kind="diffusion", tokenizer=getattr(run.model, "tokenizer", None), blocks=plan.blocks.copy())
