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

Blocks (rule 5) partition the positions to generate, in order, into runs of `block_length` (the last
run may be shorter: any block_length works). For a prompt this is LLaDA's semi-AR layout; for an
infill template it fills the gaps left to right. The steps are split as evenly as possible across
blocks, the first blocks taking the remainder, and every block gets at least one step.
With a threshold the step count is not fixed: each block runs until it is fully decoded.

One generator per row (`generator=[g0, g1, ...]`): row i of the batch is exactly the run of row i alone
with generator gi (batch invariance of the model's own arithmetic aside: see test_sampler_rows.py). Every
random draw is made per row, from that row's generator, with the shape a run of it alone draws; a row
that has nothing to commit at a step draws nothing, as it would alone. Temperatures annealed by the
decoded fraction (threshold decoding) are each row's own. Under a schedule every row commits and
re-masks the same number of positions per step, so rows stay in step; under a threshold each row
walks its own blocks and a finished row waits for the others (padding steps that `Trajectory.row`
cuts off). This is how the dashboard serves many sessions with one batched call.

The loop is a generator (`sample_steps`): it yields every model call it needs as a ModelCall (x, t)
and reads the logits its driver puts there. `sample` drives one run, calling the model itself;
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
from .config import SamplerConfig
from .proposals import draw, draw_rows, gumbel
from .recorder import Recorder
from .schedules import get_schedule, split_steps
from .strategies import get_strategy
from .template import Canvas, blank_canvas, parse_template
from .trajectory import Trajectory

NAN = float("nan")


@dataclass(eq=False)
class ModelCall:
    """One model call a run needs: its driver fills `logits` (and may fill `seconds`) before resuming it."""

    x: torch.Tensor  # (B, L) long canvas
    t: torch.Tensor  # (B,) float masked fraction of each row
    logits: torch.Tensor | None = None  # (B, L, V) model(x, t), or bit-identical to it
    seconds: float | None = None  # what the run is charged for the call; None: all the time it was away


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


def make_canvas(model, length: int | None, template: str | None) -> Canvas:
    """The starting canvas from a template (needs the model's tokenizer) or a plain length."""
    cfg = model.config
    if template is not None:
        tok = getattr(model, "tokenizer", None)
        if tok is None:
            raise ValueError("a template needs the model's tokenizer: load the model with load_checkpoint, "
                             "or sample by length only")
        return parse_template(template, tok, length=length, context=cfg.block_size)
    return blank_canvas(cfg.block_size if length is None else length, cfg.mask_id, cfg.block_size)


def plan_blocks(fixed: np.ndarray, block_length: int) -> np.ndarray:
    """(L,) block index of every position to generate (runs of block_length, in order); -1 if fixed."""
    todo = np.flatnonzero(~fixed)
    blocks = np.full(fixed.shape, -1, dtype=np.int64)
    size = block_length if 0 < block_length < len(todo) else max(len(todo), 1)
    blocks[todo] = np.arange(len(todo)) // size
    return blocks


@dataclass
class _Run:
    """Everything that stays fixed during one call."""

    model: torch.nn.Module
    config: SamplerConfig
    generator: torch.Generator | list[torch.Generator]  # a list: one per row (see the module docstring)
    device: torch.device
    mask_id: int
    n_generate: int  # positions to generate per row
    total_steps: int | None  # None under threshold / factor decoding
    fixed: torch.Tensor | None = None  # (L,) bool: the template's given positions (the prompt, for CFG)
    strategy: object = None
    schedule: object = None
    recorder: Recorder | None = None
    clock: RunClock = field(default_factory=RunClock)

    def __post_init__(self):
        self.strategy = get_strategy(self.config.strategy)
        self.schedule = get_schedule(self.config.schedule)
        self.mask_index = torch.tensor([self.mask_id], device=self.device)
        self.per_row = isinstance(self.generator, list)
        eos = getattr(getattr(self.model, "tokenizer", None), "eos_ids", None) or []
        self.eos_index = torch.tensor(sorted(eos), dtype=torch.long, device=self.device)  # (E,)


@dataclass
class _State:
    """The evolving canvas and what each position's commit looked like."""

    x: torch.Tensor  # (B, L) long
    committed_at: torch.Tensor  # (B, L) long, -1 until committed (and for fixed positions)
    commit_conf: torch.Tensor  # (B, L) float32, NaN until committed
    logits: torch.Tensor | None = None  # (B, L, V) float32 from the last model call, [MASK] at -inf
    stale: bool = True  # canvas changed since `logits` were computed
    nfe: int = 0
    step: int = 0  # global step index
    block_start_masked: torch.Tensor | None = field(default=None, repr=False)  # (B,) N of the block


def initial_state(canvas: Canvas, batch_size: int, device) -> _State:
    x = torch.as_tensor(canvas.tokens, device=device).expand(batch_size, -1).clone()  # (B, L)
    return _State(x=x, committed_at=torch.full_like(x, -1),
                  commit_conf=torch.full(x.shape, NAN, dtype=torch.float32, device=device))


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


def _temperature(run: _Run, st: _State, masked: torch.Tensor) -> float:
    cfg = run.config
    if cfg.temperature_end is None:
        return cfg.temperature
    if run.total_steps is not None:
        frac = st.step / (run.total_steps - 1) if run.total_steps > 1 else 0.0
    else:  # threshold decoding has no step count: anneal by the fraction already decoded
        frac = 1.0 - float(masked.sum()) / (masked.shape[0] * run.n_generate)
    return cfg.temperature + (cfg.temperature_end - cfg.temperature) * frac


def _row_temperatures(run: _Run, st: _State, masked: torch.Tensor) -> list[float]:
    """Each row's temperature as it would be alone: threshold decoding anneals by the row's own
    decoded fraction; otherwise the step decides and every row shares it."""
    B = masked.shape[0]
    if run.config.temperature_end is None or run.total_steps is not None:
        return [_temperature(run, st, masked[:1])] * B
    return [_temperature(run, st, masked[i:i + 1]) for i in range(B)]


def call_model(model, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """model(x, t), computing a batch whose rows are all the same canvas as one row: every batched run
    starts so (all [MASK], or one template), and at step 1 of a 30-row sweep that is a 30x cheaper call.
    Each row then gets exactly the logits of its solo run (a solo run is this one-row call)."""
    if x.shape[0] > 1 and bool((x == x[:1]).all()):
        return model(x[:1], t[:1]).expand(x.shape[0], -1, -1)  # (B, L, V) view of one row
    return model(x, t)


def _ask_model(run: _Run, x: torch.Tensor, t: torch.Tensor):
    """Hand one model call to the driver (yield) and return the logits it filled in (B, L, V)."""
    call = ModelCall(x, t)
    run.clock.pause()
    yield call
    run.clock.resume(call.seconds)
    return call.logits


def _refresh_logits(run: _Run, st: _State, masked: torch.Tensor):
    """Call the model if the canvas changed since its last call (rule 9); True if it was called."""
    if st.logits is not None and not st.stale:
        return False
    t = masked.float().mean(dim=1)  # (B,) masked fraction of each row's canvas
    w = run.config.cfg_scale
    if w > 0 and bool(run.fixed.any()):  # with no prompt the unconditional pass equals the conditional
        logits = yield from _guided_logits(run, st.x, t, w)
        st.nfe += 1  # the unconditional half is a second evaluation of every row
    else:
        logits = (yield from _ask_model(run, st.x, t)).float()  # (B, L, V)
    logits = logits.index_fill(-1, run.mask_index, float("-inf"))  # [MASK] is never proposed
    if run.config.suppress_eos in ("logits", "both") and len(run.eos_index):
        logits = logits.index_fill(-1, run.eos_index, float("-inf"))  # nor EOS / end-of-turn
    st.logits = logits  # (B, L, V); softmax only where a step needs it (_scored): the masked positions
    st.stale, st.nfe = False, st.nfe + 1
    return True


def _guided_logits(run: _Run, x: torch.Tensor, t: torch.Tensor, w: float):
    """Classifier-free guidance as LLaDA does it: one call on the canvas and on the canvas with its
    prompt (the fixed positions) masked, then l_u + (w + 1) (l_c - l_u)."""
    uncond = x.masked_fill(run.fixed[None, :], run.mask_id)  # (B, L)
    t_u = (uncond == run.mask_id).float().mean(dim=1)  # (B,)
    both = (yield from _ask_model(run, torch.cat([x, uncond]), torch.cat([t, t_u]))).float()  # (2B, L, V)
    cond, free = both.chunk(2)
    return free + (w + 1.0) * (cond - free)  # (B, L, V)


def _propose(run: _Run, st: _State, masked: torch.Tensor, todo: torch.Tensor, temperature):
    """Proposals (B, L) everywhere (current token where not masked); scores and confidence (B, L)
    at masked positions, NaN elsewhere."""
    cfg = run.config
    if run.per_row:
        return _propose_rows(run, st, masked, todo, temperature)
    where = masked.nonzero(as_tuple=True)  # noise only where a proposal is needed: ~half the cost
    drawn = draw(st.logits[where], temperature, run.generator, cfg.top_k, cfg.top_p)  # (M,)
    proposals = st.x.index_put(where, drawn)  # (B, L)
    conf, scores = _scored(run, st, proposals, where, run.generator)
    return proposals, _last_if_eos(run, scores, proposals).masked_fill(~masked, NAN), conf


def _scored(run: _Run, st: _State, proposals: torch.Tensor, where: tuple, generator, rows=None):
    """(conf, scores), each (B, L) and NaN outside `where`: the proposal's probability under the
    untempered distribution and the strategy's score. The softmax over the vocabulary is taken only at
    `where` (the masked positions): with a real model's vocabulary (30k-126k tokens) it is a large share
    of a step, and the decoded positions never need it. `rows`: a position-only strategy (random)
    scores only these rows, each with its own generator (one generator per row)."""
    probs = torch.softmax(st.logits[where], dim=-1)  # (M, V)
    nan = torch.full(st.x.shape, NAN, device=st.x.device)
    conf = nan.clone()
    conf[where] = probs.gather(-1, proposals[where].unsqueeze(-1)).squeeze(-1)
    if not getattr(run.strategy, "position_only", False):
        scores = nan
        scores[where] = run.strategy(probs[None], proposals[where][None], generator)[0].float()
        return conf, scores
    if rows is None:
        return conf, run.strategy(None, proposals, generator).float()  # (B, L)
    nan[rows] = run.strategy(None, proposals[rows], [generator[i] for i in rows]).float()
    return conf, nan


def _last_if_eos(run: _Run, scores: torch.Tensor, proposals: torch.Tensor) -> torch.Tensor:
    """suppress_eos 'confidence' / 'both': a position proposing EOS / end-of-turn scores -inf, so it
    commits only when nothing else is left (LLaDA's confidence_eos_eot_inf)."""
    if run.config.suppress_eos not in ("confidence", "both") or not len(run.eos_index):
        return scores
    return scores.masked_fill(torch.isin(proposals, run.eos_index), float("-inf"))


def _propose_rows(run: _Run, st: _State, masked, todo, temperatures: list[float]):
    """_propose with one generator per row: only rows with something to commit draw (alone, such a
    row would skip the step), each from its own generator with the shapes a run of it alone draws."""
    cfg = run.config
    active = todo.any(dim=1)  # (B,)
    need = masked & active[:, None]  # (B, L)
    rows, cols = need.nonzero(as_tuple=True)
    drawn = draw_rows(st.logits[rows, cols], rows, temperatures, run.generator, cfg.top_k, cfg.top_p)
    proposals = st.x.index_put((rows, cols), drawn)  # (B, L)
    act = active.nonzero().flatten().tolist()
    # random draws only for the rows that step (alone, the others would draw nothing)
    conf, scores = _scored(run, st, proposals, (rows, cols), run.generator,
                           None if len(act) == len(run.generator) else act)
    scores = _last_if_eos(run, scores, proposals)
    return proposals, scores.masked_fill(~need, NAN), conf.masked_fill(~need, NAN)


def rank_in_row(key: torch.Tensor, descending: bool) -> torch.Tensor:
    """(B, L) rank of each entry within its row, 0 = first; ties go to the earlier position."""
    order = key.argsort(dim=1, descending=descending, stable=True)  # (B, L)
    ranks = torch.arange(key.shape[1], device=key.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, ranks)


def _choose(run: _Run, st: _State, todo: torch.Tensor, scores: torch.Tensor, s: int, S: int | None):
    """(B, L) bool: the masked positions of the block that commit at this step."""
    cfg = run.config
    if cfg.alg_temp > 0:
        scores = scores / cfg.alg_temp + _gumbel(run, todo)  # (B, L) Dream: k draws from softmax(score / T)
    # a -inf score (suppress_eos) still ranks above every position outside `todo`
    key = scores.clamp(min=torch.finfo(scores.dtype).min).masked_fill(~todo, float("-inf"))  # (B, L)
    rank = rank_in_row(key, descending=True)  # (B, L)
    if cfg.threshold is not None:  # rule 6: all above threshold, at least the best one
        return todo & ((scores >= cfg.threshold) | (rank == 0))
    if cfg.factor is not None:  # Fast-dLLM: the n best while the n-th (1-based) >= 1 - f / (n + 1)
        return todo & ((scores >= 1.0 - cfg.factor / (rank + 2).float()) | (rank == 0))
    n = todo.sum(dim=1)  # (B,)
    k = run.schedule(n, st.block_start_masked, s, S).clamp(min=0).minimum(n)  # (B,)
    return todo & (rank < k[:, None])


def _gumbel(run: _Run, todo: torch.Tensor) -> torch.Tensor:
    """(B, L) Gumbel noise from the CPU generator(s): top-k of score / T + Gumbel is k draws without
    replacement from softmax(score / T). One generator per row: only rows that step draw, (1, L) each."""
    B, L = todo.shape
    if run.per_row:
        u = torch.full((B, L), 0.5, dtype=torch.float64)
        for i in todo.any(dim=1).nonzero().flatten().tolist():
            u[i] = torch.rand((1, L), generator=run.generator[i], dtype=torch.float64)
    else:
        u = torch.rand((B, L), generator=run.generator, dtype=torch.float64)
    u = u.clamp(1e-12, 1 - 1e-12).to(todo.device)  # the logs run on the device
    return gumbel(u).float()


def _revise(run: _Run, st: _State, block: torch.Tensor) -> torch.Tensor:
    """(B, L) bool: the ceil(eta * d) lowest-confidence decoded tokens of the block, in rows whose
    block masked fraction lies in [t_off, t_on] (rule 7)."""
    cfg = run.config
    masked = st.x == run.mask_id  # (B, L)
    decoded = block & ~masked  # (B, L) committed, never fixed (blocks hold no fixed position)
    t_block = (block & masked).sum(dim=1) / block.sum()  # (B,)
    active = (t_block >= cfg.remask_t_off) & (t_block <= cfg.remask_t_on)
    # float64 and a tiny epsilon so that e.g. 0.3 * 10 counts as 3, not 4
    r = torch.ceil(decoded.sum(dim=1).double() * cfg.remask - 1e-9).long() * active  # (B,)
    rank = rank_in_row(st.commit_conf.masked_fill(~decoded, float("inf")), descending=False)
    return decoded & (rank < r[:, None])


def _decide(run: _Run, st: _State, masked, todo, temperature: float, s: int, S: int | None):
    """Proposals, scores, confidence and the commit mask of one step; skips the model entirely when
    nothing of the block is left to commit."""
    if not bool(todo.any()):
        nan = torch.full(st.x.shape, NAN, device=st.x.device)
        return st.x, nan, nan, torch.zeros_like(todo), False
    called = yield from _refresh_logits(run, st, masked)
    proposals, scores, conf = _propose(run, st, masked, todo, temperature)
    return proposals, scores, conf, _choose(run, st, todo, scores, s, S), called


def _step(run: _Run, st: _State, block: torch.Tensor, s: int, S: int | None, active=None) -> None:
    """One step; `block` is (L,) or, threshold rows walking their own blocks, (B, L); `active` (B,)
    marks the rows that are not done yet (one generator per row only)."""
    start = run.clock()
    masked = st.x == run.mask_id  # (B, L)
    t_mean = float(masked.float().mean())
    temperature = _temperature(run, st, masked)
    per_row = _per_row_facts(run, st, masked, active) if run.per_row else None
    draw_t = per_row["row_temperature"].tolist() if per_row else temperature
    proposals, scores, conf, commit, called = yield from _decide(run, st, masked, masked & block, draw_t, s, S)
    st.x = torch.where(commit, proposals, st.x)  # (B, L), a new tensor: recorded rows stay intact
    st.committed_at.masked_fill_(commit, st.step)
    st.commit_conf = torch.where(commit, conf, st.commit_conf)
    remask = torch.zeros_like(commit)
    if run.config.remask > 0 and S is not None and s < S - 1:  # never at a block's last step
        remask = _revise(run, st, block)
        st.x = st.x.masked_fill(remask, run.mask_id)
        st.committed_at.masked_fill_(remask, -1)
        st.commit_conf.masked_fill_(remask, NAN)
    st.stale = st.stale or bool((commit | remask).any())
    run.recorder.add(st.step, st.x, proposals, scores, conf, commit, remask, t=t_mean,
                     temperature=temperature, called=called, seconds=run.clock() - start,
                     per_row=per_row)
    st.step += 1


def _per_row_facts(run: _Run, st: _State, masked: torch.Tensor, active) -> dict:
    """Each row's t and temperature, computed exactly as a run of the row alone computes them, and
    whether the row is still running."""
    B = masked.shape[0]
    row_t = torch.stack([masked[i:i + 1].float().mean() for i in range(B)])  # (B,) as t_mean alone
    return {"row_t": row_t.cpu().numpy().astype(np.float32),
            "row_temperature": np.array(_row_temperatures(run, st, masked), dtype=np.float64),
            "row_active": np.ones(B, dtype=bool) if active is None else active.cpu().numpy()}


def _run_block(run: _Run, st: _State, block: torch.Tensor, S: int | None) -> None:
    """S steps on one block; with a threshold (S None), steps until the block is decoded."""
    st.block_start_masked = ((st.x == run.mask_id) & block).sum(dim=1)  # (B,) N of the schedule
    s = 0
    while s < S if S is not None else bool(((st.x == run.mask_id) & block).any()):
        yield from _step(run, st, block, s, S)
        s += 1


def _run_rows(run: _Run, st: _State, block_ids: torch.Tensor, n_blocks: int) -> None:
    """Threshold decoding with one generator per row: each row walks its own blocks exactly as it
    would alone; a finished row waits for the others (its padding steps are marked inactive)."""
    cur = torch.zeros(st.x.shape[0], dtype=torch.long, device=st.x.device)  # (B,) each row's block
    while True:
        masked = st.x == run.mask_id
        while True:  # move rows whose block is decoded on to their next block
            left = (masked & (block_ids[None, :] == cur[:, None])).any(dim=1)
            move = ~left & (cur < n_blocks)
            if not bool(move.any()):
                break
            cur = cur + move.long()
        active = cur < n_blocks
        if not bool(active.any()):
            return
        yield from _step(run, st, block_ids[None, :] == cur[:, None], 0, None, active)


def as_config(config) -> SamplerConfig:
    if isinstance(config, SamplerConfig):
        return config
    if isinstance(config, dict):
        return SamplerConfig.from_dict(config)
    raise TypeError(f"config must be a SamplerConfig (or a dict of its knobs), got {type(config).__name__}")


def sample(model, config: SamplerConfig, *, batch_size: int | None = None, length: int | None = None,
           template: str | None = None, generator=None, record: bool = True,
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

    length: canvas length (default: the model's context). template: █ / [___] / plain prompt,
    see parse_template (needs `model.tokenizer`). generator: a CPU torch.Generator (default: seeded
    from config.seed), or a list of them, one per row: then batch_size is its length and row i is
    the run of row i alone with generator i (module docstring; `Trajectory.row(i)`). batch_size
    defaults to 1. record=False keeps only final tokens, NFE and timings (for sweeps).
    on_step(StepRecord) runs after every step; returning False raises SamplingCancelled.
    should_stop() is checked after every step, True raises SamplingCancelled; unlike on_step it copies
    nothing to the host, so it leaves record=False timings as they are.
    """
    steps = sample_steps(model, config, batch_size=batch_size, length=length, template=template,
                         generator=generator, record=record, on_step=on_step, should_stop=should_stop)
    with torch.no_grad(), eval_mode(model):
        return drive(model, steps)


def drive(model, steps) -> Trajectory:
    """Run one step generator to its end, serving each of its model calls with call_model."""
    try:
        while True:
            call = next(steps)
            call.logits = call_model(model, call.x, call.t)  # (B, L, V)
    except StopIteration as done:
        return done.value


def sample_steps(model, config: SamplerConfig, *, batch_size: int | None = None, length: int | None = None,
                 template: str | None = None, generator=None, record: bool = True,
                 on_step=None, should_stop=None):
    """sample()'s run as a generator, for drivers that serve model calls themselves (packing.sample_many).

    The arguments are checked here, before anything runs. The generator yields a ModelCall for every
    model call; before it is resumed the driver must set the call's `logits` to model(x, t) (exactly:
    the run's result depends on them bit for bit) and may set `seconds`, the time to charge the run for
    the call (Trajectory.seconds and step_seconds count it; None: all the time the run was waiting).
    It returns the Trajectory (StopIteration.value); cancellation raises SamplingCancelled from it.
    The caller provides torch.no_grad() and eval mode around the model calls (sample does).
    """
    config = as_config(config)
    batch_size, rng = resolve_generators(generator, batch_size, config.seed)
    if getattr(model.config, "kind", "diffusion") != "diffusion":
        raise ValueError(f"sample() needs a diffusion model, got kind {model.config.kind!r}; "
                         "use sample_ar() or sample_any()")
    canvas = make_canvas(model, length, template)
    blocks = plan_blocks(canvas.fixed, config.block_length)
    n_blocks = int(blocks.max()) + 1
    steps = None if config.adaptive else split_steps(config.steps, n_blocks)
    run = _Run(model, config, rng, model_device(model), model.config.mask_id,
               canvas.n_generate, None if steps is None else sum(steps),
               fixed=torch.as_tensor(canvas.fixed, device=model_device(model)))
    seed = config.seed if generator is None else -1
    return _walk(run, canvas, blocks, steps, batch_size, (record, on_step, should_stop), seed)


def _walk(run: _Run, canvas: Canvas, blocks: np.ndarray, steps: list[int] | None, batch_size: int,
          recording: tuple, seed: int):
    """The run itself (a generator: see sample_steps); its clock starts when it first runs."""
    st = initial_state(canvas, batch_size, run.device)
    run.recorder = Recorder(st.x, *recording, clock=run.clock)
    block_ids = torch.as_tensor(blocks, device=run.device)  # (L,)
    n_blocks = int(blocks.max()) + 1
    if run.per_row and steps is None:  # threshold rows walk their blocks independently
        yield from _run_rows(run, st, block_ids, n_blocks)
    else:
        for b in range(n_blocks):
            yield from _run_block(run, st, block_ids == b, None if steps is None else steps[b])
    return run.recorder.finish(
        final=st.x, committed_at=st.committed_at, commit_confidence=st.commit_conf, fixed=canvas.fixed,
        nfe=st.nfe, config=run.config, seed=seed, mask_id=run.mask_id,
        kind="diffusion", tokenizer=getattr(run.model, "tokenizer", None), blocks=blocks)
