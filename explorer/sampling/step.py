"""One step of the masked-diffusion sampler, on a batch of rows with per-row settings.

Every diffusion run steps through these functions, whoever drives it: sample() (sampler.py: one run)
and the merged walks of sample_many (merged.py: several runs as one batch). A batch's rows come in
groups (`Group`): the rows that share a generator and the knobs that may differ between runs
(temperature, strategy, schedule, steps; everything else is the batch's `config`):
  - a run with one generator is one group of all its rows;
  - a run with one generator per row is one group per row (each row is its solo run);
  - a merged walk is one group per run.
A step is, in order (the rules are sampler.py's):
  refresh  call the model for the parts whose canvas changed since their last call (rules 1, 9, 10:
           guidance); a part is rows whose model call is one (a run's batch, or one merged run);
  propose  draw a proposal at every masked position of the groups that step, score it with the
           group's strategy, and take its untempered probability (rules 2, 3, 10: EOS rules);
  choose   which of them commit: the schedule's k best, or the threshold / factor / entropy-bound rule,
           after Dream's Gumbel noise (rules 4, 6, 10, 11);
  commit   write them into the canvas; edit replaces committed tokens the model now rejects (rule 12:
           propose_block and choose_block take propose's and choose's place, diffusers' step);
           revise sends decoded ones back to [MASK] (rule 7).

Seed compatibility: a group draws from its generator exactly what a run of that group alone draws,
in the same order and shapes, and these functions keep the samples that the sampler gave for a seed
before they were shared (tests/unit/sampling/test_seed_stability.py holds runs of every path to
tokens the earlier code produced):
  1. one float64 uniform per masked position of the group, row-major, at temperature > 0 (draw);
  2. a position-only strategy's (rows, L) uniforms (random);
  3. with alg_temp, (rows, L) float64 uniforms for the Gumbel noise;
and a group with nothing to commit at a step draws nothing (alone it would skip the step). Token editing
draws instead as diffusers' BlockRefinementScheduler does (propose_block: one torch.multinomial call over
every position of the group's block, a post step too; then a position-only strategy's uniforms). What is
computed per row (softmax, scores, ranks, schedules) is row-wise, so a row's values do not depend on
the rows beside it; the model's own arithmetic is the caller's to keep batch-invariant (packing.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..devices import to_device
from .config import SamplerConfig
from .proposals import draw, draw_block, draw_rows, gumbel
from .schedules import get_schedule
from .strategies import get_strategy
from .template import Canvas

NAN = float("nan")
# Token editing under threshold / factor / entropy-bound decoding: a block whose last mask is filled takes
# more steps while they edit, at most this many + 1 (diffusers' max_post_steps, counted as it counts them)
EDIT_POST_STEPS = 16
ELEMENTWISE = ("remaining", "linear")  # schedules whose arithmetic takes a per-row step count S


@dataclass(eq=False)
class ModelCall:
    """One model call a run needs: its driver fills `logits` (and may fill `seconds`) before resuming it."""

    x: torch.Tensor  # (B, L) long canvas
    t: torch.Tensor  # (B,) float masked fraction of each row
    logits: torch.Tensor | None = None  # (B, L, V) model(x, t), or bit-identical to it
    seconds: float | None = None  # what the run is charged for the call; None: all the time it was away
    kwargs: dict | None = None  # the extended call's arguments (a uniform-state model's cache, uniform.py)
    one_row: bool | None = None  # every row is one canvas, as the run read it with its step (None: unknown)


@dataclass(eq=False)
class Part:
    """Rows a:b served by one model call, whether their canvas changed since it (`stale`), and the
    model calls made for them (NFE) and what the driver charged for the last one."""

    a: int
    b: int
    stale: bool = True
    nfe: int = 0
    seconds: float | None = None


@dataclass(eq=False)
class Group(Part):
    """Rows a:b that share a generator and their own knobs (temperature, strategy, schedule, steps)."""

    generator: torch.Generator | None = None
    config: SamplerConfig = field(default_factory=SamplerConfig)
    steps: int = 0  # its step count (a merged walk's groups differ; a run's groups share its blocks')

    def __post_init__(self):
        self.strategy = get_strategy(self.config.strategy)
        self.schedule = get_schedule(self.config.schedule)
        self.position_only = bool(getattr(self.strategy, "position_only", False))

    @property
    def rows(self) -> int:
        return self.b - self.a


@dataclass
class State:
    """The evolving canvas of a batch and what each position's commit looked like."""

    x: torch.Tensor  # (B, L) long
    committed_at: torch.Tensor  # (B, L) long, -1 until committed (and for fixed positions)
    commit_conf: torch.Tensor  # (B, L) float32, NaN until committed
    logits: torch.Tensor | None = None  # (B, L, V) float32 from the last model calls, [MASK] at -inf
    entropy: torch.Tensor | None = None  # (B, L) float32 entropy (nats) at the proposals' positions (EB only)
    step: int = 0  # global step index
    block_start_masked: torch.Tensor | None = field(default=None, repr=False)  # (B,) N of the schedule


def initial_state(canvas: Canvas, batch_size: int, device) -> State:
    x = torch.as_tensor(canvas.tokens, device=device).expand(batch_size, -1).clone()  # (B, L)
    return State(x=x, committed_at=torch.full_like(x, -1),
                 commit_conf=torch.full(x.shape, NAN, dtype=torch.float32, device=device))


class Batch:
    """What stays fixed across a batch's steps: its groups, the knobs they share (`config`: top-k,
    top-p, threshold, factor, alg_temp, revision, guidance, EOS rules), the special tokens and the
    per-row lookups that let one tensor op serve every group."""

    def __init__(self, groups: list[Group], config: SamplerConfig, mask_id: int, device, *,
                 fixed: torch.Tensor | None = None, eos_ids=()):
        self.groups, self.config, self.mask_id, self.device = groups, config, mask_id, device
        self.mask_index = torch.tensor([mask_id], device=device)
        self.eos_index = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)  # (E,)
        self.fixed = fixed  # (L,) bool: the given positions (the prompt, for guidance)
        # with no prompt the unconditional pass equals the conditional one: no guidance
        self.guided = config.cfg_scale > 0 and fixed is not None and bool(fixed.any())
        self.one = len(groups) == 1  # one generator for every row: no per-group bookkeeping at all
        self.B = groups[-1].b
        self._rows: dict[tuple, torch.Tensor] = {}  # rows_of's masks, per tuple of groups
        self._shapes: dict[int, torch.Tensor] = {}  # stand-ins for position-only strategies (never written)
        names = sorted({g.config.strategy for g in groups})
        self.distribution = [n for n in names if not getattr(get_strategy(n), "position_only", False)]
        if not self.one:
            sizes = torch.tensor([g.rows for g in groups], device=device)
            self.group_of_row = torch.repeat_interleave(torch.arange(len(groups), device=device), sizes)  # (B,)
            self.strategy_of_row = self.per_row([names.index(g.config.strategy) for g in groups], torch.long)
            self.steps_of_row = self.per_row([g.steps for g in groups], torch.long)
            self.rows_of_schedule = {n: self.per_row([g.config.schedule == n for g in groups], torch.bool)
                                     for n in {g.config.schedule for g in groups}}
            self.strategy_index = {n: i for i, n in enumerate(names)}

    def per_row(self, values: list, dtype) -> torch.Tensor:
        """(B,) each row's entry of a per-group list."""
        return torch.tensor(values, dtype=dtype, device=self.device)[self.group_of_row]

    def rows_of(self, groups: list[Group]) -> torch.Tensor:
        """(B,) bool: the rows of `groups` (one copy to the device, one gather), kept per set of groups:
        the set that steps changes only as groups finish."""
        key = tuple(id(g) for g in groups)
        if key not in self._rows:
            chosen = torch.zeros(len(self.groups), dtype=torch.bool)
            chosen[[self.groups.index(g) for g in groups]] = True
            self._rows[key] = to_device(chosen, self.device)[self.group_of_row]
        return self._rows[key]

    def shape(self, rows: int, length: int) -> torch.Tensor:
        """A (rows, L) stand-in: a position-only strategy reads only its proposals' shape."""
        if rows not in self._shapes:
            self._shapes[rows] = torch.empty((rows, length), dtype=torch.long)
        return self._shapes[rows]


# ---------------------------------------------------------------------------------- statistics

def temperature(config: SamplerConfig, step: int, total_steps: int | None, masked: torch.Tensor,
                n_generate: int) -> float:
    """The temperature of `masked`'s rows at global step `step` (rule 8): linear across the steps, or,
    threshold decoding having no step count, by the fraction of those rows already decoded."""
    if config.temperature_end is None:
        return config.temperature
    if total_steps is not None:
        # min: token editing's post steps may take a run past its planned steps (the end temperature then)
        frac = min(step / (total_steps - 1), 1.0) if total_steps > 1 else 0.0
    else:
        frac = 1.0 - float(masked.sum()) / (masked.shape[0] * n_generate)
    return config.temperature + (config.temperature_end - config.temperature) * frac


def group_means(masked: torch.Tensor, groups: list[Group]) -> torch.Tensor:
    """(G,) masked[g.a:g.b].float().mean() of each group, bit for bit (what the group's run alone
    records as t): groups of one size are one (G, rows x L) reduction (the same exact sum of 0/1
    values times the same 1/N); groups of different sizes, one reduction each."""
    if len({g.rows for g in groups}) == 1:
        return masked.float().view(len(groups), -1).mean(dim=1)
    return torch.stack([masked[g.a:g.b].float().mean() for g in groups])


def rank_in_row(key: torch.Tensor, descending: bool) -> torch.Tensor:
    """(B, L) rank of each entry within its row, 0 = first; ties go to the earlier position."""
    order = key.argsort(dim=1, descending=descending, stable=True)  # (B, L)
    ranks = torch.arange(key.shape[1], device=key.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, ranks)


# ---------------------------------------------------------------------------------- refresh

def refresh(batch: Batch, st: State, masked: torch.Tensor, parts: list[Part], clock=None, one_canvas=None,
            cache=None):
    """Ask one model call for each stale part (yields the list of ModelCalls; its driver fills their
    logits), and put what comes back into st.logits (float32, [MASK] and suppressed EOS at -inf).
    t is row-wise, so a part's slice is what its run alone computes. clock: pause() / resume(charged)
    around the wait (sampler.RunClock). one_canvas: whether every row of the batch is one canvas, when the
    caller read it (its call then says so: the driver need not ask the device). cache: the run's
    cache.BlockCache (one part): the part's call is made as its full and window forwards. Returns the
    parts that were called (each stale no more)."""
    stale = [p for p in parts if p.stale]
    if not stale:
        return []
    t = masked.float().mean(dim=1)  # (B,) masked fraction of each row's canvas
    calls = [_model_call(batch, st.x[p.a:p.b], t[p.a:p.b]) for p in stale]
    if one_canvas is not None and not batch.guided:  # whether all rows are one canvas, read with the step
        for call, p in zip(calls, stale):
            call.one_row = one_canvas if (p.a, p.b) == (0, batch.B) else None
    sent = calls if cache is None else cache.calls(calls[0])
    if clock is not None:
        clock.pause()
    yield sent
    if clock is not None:
        charged = [c.seconds for c in sent]
        clock.resume(None if None in charged else sum(charged))
    for c in sent:
        check_device(c.logits, batch.device)
    if cache is not None:
        calls[0].logits = cache.logits(sent)  # (B, L, V) the window's, and the block's full forward's elsewhere
    outs = [_guided(batch, c.logits) if batch.guided else c.logits for c in calls]
    _store(batch, st, stale, outs)
    for p, call in zip(stale, calls):
        p.stale, p.nfe, p.seconds = False, p.nfe + (2 if batch.guided else 1), call.seconds
    return stale


def check_device(logits: torch.Tensor, device: torch.device) -> None:
    """Refuse logits that are not on the run's device, the model's (devices.model_device: its `device`
    attribute, else its first parameter). Every tensor of a run is made there, so logits from elsewhere
    (a wrapper without parameters computing on a GPU: it looks like a CPU model) would meet the run's
    own tensors in the next op and fail there, far from the cause."""
    there, here = torch.device(logits.device), torch.device(device)
    if there.type != here.type or None not in (there.index, here.index) and there.index != here.index:
        raise ValueError(f"the model returned logits on {there}, but its run's tensors are on {here}, where "
                         "its parameters are (or its `device` attribute says): give the model a `device` "
                         "attribute, or a parameter, on the device it computes on")


def _model_call(batch: Batch, x: torch.Tensor, t: torch.Tensor) -> ModelCall:
    """The call of rows x; with guidance (LLaDA's), the same rows with the prompt masked ride along."""
    if not batch.guided:
        return ModelCall(x, t)
    uncond = x.masked_fill(batch.fixed[None, :], batch.mask_id)  # (B, L)
    t_u = (uncond == batch.mask_id).float().mean(dim=1)  # (B,)
    return ModelCall(torch.cat([x, uncond]), torch.cat([t, t_u]))


def _guided(batch: Batch, logits: torch.Tensor) -> torch.Tensor:
    """Classifier-free guidance: l_u + (w + 1) (l_c - l_u) of a call's two halves."""
    cond, free = logits.float().chunk(2)  # (B, L, V) each
    return free + (batch.config.cfg_scale + 1.0) * (cond - free)


def _store(batch: Batch, st: State, parts: list[Part], outs: list[torch.Tensor]) -> None:
    """The parts' new logits into st.logits, cast to float as .float() would, [MASK] (and EOS under
    suppress_eos logits / both) at -inf. One part of every row: a new tensor (what a call returns
    may be a shared view, never written to). Several: into the batch's buffer, in a few tensor ops
    whatever the number of parts (on a GPU each op is a kernel launch)."""
    cfg, mask = batch.config, batch.mask_index
    eos = len(batch.eos_index) and cfg.suppress_eos in ("logits", "both")
    if len(parts) == 1 and parts[0].a == 0 and parts[0].b == batch.B:
        logits = outs[0].float().index_fill(-1, mask, float("-inf"))  # [MASK] is never proposed
        st.logits = logits.index_fill(-1, batch.eos_index, float("-inf")) if eos else logits  # nor EOS
        return
    if st.logits is None:
        st.logits = torch.empty((batch.B, *outs[0].shape[1:]), device=batch.device)
    if sum(p.b - p.a for p in parts) == batch.B and all(o.dtype == st.logits.dtype for o in outs):
        torch.cat(outs, out=st.logits)  # every part: all the rows, in order
    else:
        # the rows' indices built on the host (one tensor op per part before, a fifth of a step's ops)
        rows = to_device(torch.from_numpy(np.concatenate([np.arange(p.a, p.b) for p in parts])), batch.device)
        st.logits.index_copy_(0, rows, torch.cat(outs).to(st.logits.dtype))
    st.logits.index_fill_(-1, mask, float("-inf"))  # every row: idempotent on the others
    if eos:
        st.logits.index_fill_(-1, batch.eos_index, float("-inf"))


# ---------------------------------------------------------------------------------- propose

def propose(batch: Batch, st: State, masked: torch.Tensor, stepping: list[Group], temperatures: list[float],
            counts: list[int] | None = None):
    """Proposals (B, L) (the current token where none is drawn), strategy scores and confidence (B, L),
    NaN outside the masked positions of the `stepping` groups.

    temperatures: each group's (of batch.groups) temperature now. counts: each group's masked positions
    when the caller knows them on the host (the entries are then found without waiting for the device)."""
    need = masked if len(stepping) == len(batch.groups) else masked & batch.rows_of(stepping)[:, None]
    if counts is None:
        where = need.nonzero(as_tuple=True)  # noise only where a proposal is needed: ~half the cost
    else:
        where = torch.nonzero_static(need, size=sum(counts)).unbind(1)  # row-major, as nonzero
    entries = st.logits[where]  # (M, V)
    drawn = _draw(batch, entries, where[0], temperatures, counts)  # (M,)
    proposals = st.x.index_put(where, drawn)  # (B, L)
    # softmax only at the masked positions: with a real model's vocabulary it is a large share of a step
    probs = torch.softmax(entries, dim=-1)  # (M, V) untempered, unfiltered
    conf = torch.full(st.x.shape, NAN, device=st.x.device)
    conf[where] = probs.gather(-1, drawn.unsqueeze(-1)).squeeze(-1)
    if batch.config.entropy_bound is not None:  # what the EB rule (choose) adds up
        st.entropy = torch.full(st.x.shape, NAN, device=st.x.device)  # (B, L)
        st.entropy[where] = -torch.special.xlogy(probs, probs).sum(dim=-1)
    scores = _scores(batch, probs, drawn, where, stepping, st.x.shape)
    positional = any(g.position_only for g in stepping)
    if batch.config.suppress_eos in ("confidence", "both") and len(batch.eos_index):
        # LLaDA's confidence_eos_eot_inf: a position proposing EOS commits only when nothing else is left
        scores, positional = scores.masked_fill(torch.isin(proposals, batch.eos_index), float("-inf")), True
    return proposals, scores.masked_fill(~need, NAN) if positional else scores, conf


def _draw(batch: Batch, entries: torch.Tensor, rows: torch.Tensor, temperatures: list[float], counts):
    """draw() of each group's entries with its temperature and generator (proposals.draw_rows: the
    uniforms of each group drawn from its generator, shaped (its entries,), as alone)."""
    cfg = batch.config
    if batch.one:
        return draw(entries, temperatures[0], batch.groups[0].generator, cfg.top_k, cfg.top_p)
    return draw_rows(entries, batch.group_of_row[rows], temperatures, [g.generator for g in batch.groups],
                     cfg.top_k, cfg.top_p, counts=counts)


def _scores(batch: Batch, probs, drawn, where, stepping: list[Group], shape) -> torch.Tensor:
    """(B, L) each stepping group's strategy scores at its entries, NaN elsewhere (position-only
    strategies: their whole rows; the caller masks them)."""
    scores = torch.full(shape, NAN, device=probs.device)
    values = None
    entry = batch.strategy_of_row[where[0]] if len(batch.distribution) > 1 else None  # (M,)
    for name in batch.distribution:  # row-wise: computed for every entry, kept where its group uses it
        value = get_strategy(name)(probs[None], drawn[None], None)[0].float()  # (M,)
        if entry is None:
            values = value
        else:
            values = torch.where(entry == batch.strategy_index[name], value, NAN if values is None else values)
    if values is not None:
        scores[where] = values
    positional = [g for g in stepping if g.position_only]
    if not positional:
        return scores
    L = shape[1]
    if batch.one:
        g = positional[0]
        return to_device(g.strategy(None, batch.shape(g.rows, L), g.generator).float(), probs.device)
    # each group's (rows, L) drawn as alone from its own generator, on the CPU (random draws there in
    # any case), then moved in one copy
    drawn_cpu = torch.zeros((shape[0], L))
    for g in positional:
        drawn_cpu[g.a:g.b] = g.strategy(None, batch.shape(g.rows, L), g.generator).float()
    return torch.where(batch.rows_of(positional)[:, None], to_device(drawn_cpu, probs.device), scores)


# ---------------------------------------------------------------------------------- choose

def choose(batch: Batch, todo: torch.Tensor, scores: torch.Tensor, stepping: list[Group], s: int,
           S: int | None, N: torch.Tensor | None, entropy: torch.Tensor | None = None) -> torch.Tensor:
    """(B, L) bool: the positions of `todo` (the masked positions of the current blocks, False outside
    the stepping groups' rows) that commit at this step.

    s: the step within the block; S: the block's steps (None: each group's own `steps`, a merged walk's
    one block); N (B,): each row's masked positions when the block started (the schedule's N);
    entropy (B, L): each proposal's entropy (propose's st.entropy), read by the entropy-bound rule."""
    cfg = batch.config
    if cfg.alg_temp > 0:
        scores = scores / cfg.alg_temp + _gumbel(batch, stepping, todo)  # (B, L) Dream: k draws from softmax(score / T)
    # a -inf score (suppress_eos) still ranks above every position outside `todo`
    key = scores.clamp(min=torch.finfo(scores.dtype).min).masked_fill(~todo, float("-inf"))  # (B, L)
    rank = rank_in_row(key, descending=True)  # (B, L)
    if cfg.threshold is not None:  # rule 6: all above threshold, at least the best one
        return todo & ((scores >= cfg.threshold) | (rank == 0))
    if cfg.factor is not None:  # Fast-dLLM: the n best while the n-th (1-based) >= 1 - f / (n + 1)
        return todo & ((scores >= 1.0 - cfg.factor / (rank + 2).float()) | (rank == 0))
    if cfg.entropy_bound is not None:
        return todo & (rank < _entropy_bound_counts(entropy, todo, rank, cfg.entropy_bound)[:, None])
    n = todo.sum(dim=1)  # (B,)
    k = _commit_counts(batch, stepping, n, N, s, S)  # (B,)
    return todo & (rank < k.clamp(min=0).minimum(n)[:, None])


def choose_block(batch: Batch, todo: torch.Tensor, scores: torch.Tensor, block: torch.Tensor, stepping: list[Group],
                 s, S, N: torch.Tensor | None, entropy: torch.Tensor | None = None) -> torch.Tensor:
    """Token editing's choose (rule 12): the pick of diffusers' BlockRefinementScheduler.step, its reference.
    Row by row over the block's positions in order (`block` (L,) or (B, L)), with the score where the
    block is masked and -inf elsewhere: a schedule's k positions by torch.topk (so ties, common once
    top-k / top-p leave one token at probability 1, go as torch.topk sends them); the threshold rule
    every position above the threshold (strictly, as there), else the best by torch.topk. The factor and
    entropy-bound rules have no counterpart there: choose()'s. Returns (B, L) bool as choose() does."""
    cfg = batch.config
    if cfg.factor is not None or cfg.entropy_bound is not None:
        return choose(batch, todo, scores, stepping, s, S, N, entropy)
    if cfg.alg_temp > 0:
        scores = scores / cfg.alg_temp + _gumbel(batch, stepping, todo)  # (B, L)
    # a -inf score (suppress_eos) still ranks above the block's committed positions, as in choose()
    key = torch.where(todo, scores.float().clamp(min=torch.finfo(torch.float32).min), float("-inf"))  # (B, L)
    n = todo.sum(dim=1)  # (B,)
    high = key > cfg.threshold if cfg.threshold is not None else torch.zeros_like(todo)  # (B, L)
    k = torch.ones_like(n) if cfg.threshold is not None else _commit_counts(batch, stepping, n, N, s, S)
    ks, ns, highs = torch.stack([k.clamp(min=0).minimum(n), n, high.sum(dim=1)]).tolist()  # one read
    on = block.expand_as(todo) if block.dim() == 1 else block  # (B, L)
    chosen = torch.zeros_like(todo)
    for b in range(todo.shape[0]):
        if ns[b] == 0:
            continue
        if cfg.threshold is not None and highs[b] >= 1:
            chosen[b] = high[b]
        elif ks[b] > 0:
            at = on[b].nonzero().squeeze(1)  # (bl,) the block's positions, in order
            chosen[b, at[torch.topk(key[b, at], k=ks[b]).indices]] = True
    return chosen & todo


def _entropy_bound_counts(entropy: torch.Tensor, todo: torch.Tensor, rank: torch.Tensor, bound: float):
    """(B,) EB-sampler (Ben-Hamu et al. 2025, rule 11): the longest prefix of each row's positions in
    rank order whose entropies sum to at most `bound` plus the largest of them (its first position
    always qualifies: at least one commits). The sum minus the max never falls along the order, so
    the prefix is where it first exceeds the bound."""
    h = entropy.masked_fill(~todo, 0.0)  # (B, L) positions outside todo rank last and add nothing
    h = torch.empty_like(h).scatter_(1, rank, h)  # (B, L) in rank order
    excess = h.cumsum(dim=1) - h.cummax(dim=1).values  # (B, L)
    return (excess <= bound).long().cumprod(dim=1).sum(dim=1)  # (B,) a prefix, even with float rounding


def _commit_counts(batch: Batch, stepping: list[Group], n, N, s: int, S: int | None) -> torch.Tensor:
    """(B,) k of each row from its group's schedule. Rows outside `stepping` have nothing in todo, so
    their k is never read: a schedule that every stepping group shares is one call for all rows."""
    names = sorted({g.config.schedule for g in stepping})
    if torch.is_tensor(s):  # token editing: each row at its own step s (B,) of its own block of S (B,) steps
        return _commit_counts_per_row(stepping, n, N, s, torch.maximum(S, s + 1))  # past S: finished rows
    if S is None:
        # remaining and linear are integer arithmetic, elementwise in S: one call for all their rows with
        # each row's own step count (rows already past theirs have nothing to do; s + 1 keeps them finite)
        S_rows = batch.steps_of_row.clamp(min=s + 1)
    if len(names) == 1 and (S is not None or names[0] in ELEMENTWISE):
        return stepping[0].schedule(n, N, s, S if S is not None else S_rows)
    k = torch.zeros_like(n)
    for name in names:
        mine = [g for g in stepping if g.config.schedule == name]
        if S is not None or name in ELEMENTWISE:
            k = torch.where(batch.rows_of_schedule[name], mine[0].schedule(n, N, s, S if S is not None else S_rows), k)
        else:  # cosine's plan needs a scalar S: each group apart
            for g in mine:
                k[g.a:g.b] = g.schedule(n[g.a:g.b], N[g.a:g.b], s, g.steps)
    return k


def _commit_counts_per_row(stepping: list[Group], n, N, s: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """(B,) k when rows walk their own blocks (one run: its groups share the schedule): remaining and
    linear are elementwise in s and S; cosine's plan takes scalars, so each group apart."""
    schedule = stepping[0].schedule
    if stepping[0].config.schedule in ELEMENTWISE:
        return schedule(n, N, s, S)
    k = torch.zeros_like(n)
    for g in stepping:
        k[g.a:g.b] = schedule(n[g.a:g.b], N[g.a:g.b], int(s[g.a]), int(S[g.a]))
    return k


def _gumbel(batch: Batch, stepping: list[Group], todo: torch.Tensor) -> torch.Tensor:
    """(B, L) Gumbel noise from the CPU generators: top-k of score / T + Gumbel is k draws without
    replacement from softmax(score / T). Each stepping group draws its (rows, L) as alone."""
    B, L = todo.shape
    if batch.one:
        u = torch.rand((B, L), generator=batch.groups[0].generator, dtype=torch.float64)
    else:
        u = torch.full((B, L), 0.5, dtype=torch.float64)
        for g in stepping:
            u[g.a:g.b] = torch.rand((g.rows, L), generator=g.generator, dtype=torch.float64)
    u = to_device(u.clamp(1e-12, 1 - 1e-12), todo.device)  # the logs run on the device
    return gumbel(u).float()


# ---------------------------------------------------------------------------------- commit, revise

def undecided(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a step that has nothing to commit records for canvas x (B, L): the canvas as its proposals, NaN
    scores and confidence, no position committed (the proposals, scores, confidence and chosen of propose
    and choose)."""
    nan = torch.full(x.shape, NAN, device=x.device)
    return x, nan, nan, torch.zeros(x.shape, dtype=torch.bool, device=x.device)


def commit(st: State, chosen: torch.Tensor, proposals: torch.Tensor, conf: torch.Tensor, step: int) -> None:
    """Write the chosen proposals into the canvas (a new tensor: recorded rows stay intact)."""
    st.x = torch.where(chosen, proposals, st.x)  # (B, L)
    st.committed_at.masked_fill_(chosen, step)
    st.commit_conf = torch.where(chosen, conf, st.commit_conf)


def propose_block(batch: Batch, st: State, masked: torch.Tensor, block: torch.Tensor, stepping: list[Group],
                  editing: list[Group], temperatures: list[float]):
    """Token editing's propose (rule 12): the step of diffusers' BlockRefinementScheduler, its reference. Every
    position of the current block (`block` (L,) or (B, L)) in the rows of `editing` gets a token drawn as
    proposals.draw_block draws it (one call per group, all its rows' block positions, row-major: diffusers'
    call for a batch) and that token's probability under the distribution it was drawn from (tempered and
    filtered: diffusers' sampled_probs). The masked positions of `stepping` propose their token, scored by
    the strategy on that same distribution (so confidence is diffusers'); the others are edit candidates.

    Returns proposals, scores, confidence as propose() does, and (tokens, probs) (B, L), the draws at every
    block position of `editing` (the current token and NaN elsewhere), which edit() reads."""
    cfg, (B, L) = batch.config, st.x.shape
    on = block.expand(B, L) if block.dim() == 1 else block  # (B, L)
    out = dict(tokens=st.x.clone(), probs=torch.full((B, L), NAN, device=st.x.device),
               scores=torch.full((B, L), NAN, device=st.x.device), entropy=torch.full((B, L), NAN, device=st.x.device))
    ids, steps = {id(g) for g in editing}, {id(g) for g in stepping}
    for g, T in zip(batch.groups, temperatures):
        if id(g) in ids:
            _draw_group(batch, st, g, on[g.a:g.b], T, id(g) in steps, out)
    tokens, probs, scores, entropy = out["tokens"], out["probs"], out["scores"], out["entropy"]
    need = masked & on if stepping else torch.zeros_like(masked)  # (B, L) the positions that propose
    if stepping and len(stepping) < len(batch.groups):
        need = need & batch.rows_of(stepping)[:, None]
    st.entropy = entropy if cfg.entropy_bound is not None else None
    proposals = torch.where(need, tokens, st.x)  # (B, L)
    if cfg.suppress_eos in ("confidence", "both") and len(batch.eos_index):  # as propose() does
        scores = scores.masked_fill(torch.isin(proposals, batch.eos_index), float("-inf"))
    return proposals, scores.masked_fill(~need, NAN), probs.masked_fill(~need, NAN), (tokens, probs)


def _draw_group(batch: Batch, st: State, g: Group, at: torch.Tensor, temperature: float, scored: bool,
                out: dict) -> None:
    """propose_block for group g: its draws at `at` (rows, L), its block positions, written into out's
    (B, L) tokens and probs; and, `scored` (it has positions to commit), its strategy's scores (and
    entropies, for the entropy bound) on the distribution drawn from."""
    cfg, rows = batch.config, slice(g.a, g.b)
    tok, p, dist = draw_block(st.logits[rows][at], temperature, g.generator, cfg.top_k, cfg.top_p)  # (M,) (M,) (M, V)
    out["tokens"][rows].masked_scatter_(at, tok)
    out["probs"][rows].masked_scatter_(at, p)
    if not scored:
        return
    if g.position_only:  # its (rows, L) uniforms, after the tokens' draw
        out["scores"][rows] = to_device(g.strategy(None, batch.shape(g.rows, at.shape[1]), g.generator).float(), at.device)
    else:
        out["scores"][rows].masked_scatter_(at, g.strategy(dist[None], tok[None], None)[0].float())
    if cfg.entropy_bound is not None:
        out["entropy"][rows].masked_scatter_(at, -torch.special.xlogy(dist, dist).sum(dim=-1))


def edit(batch: Batch, st: State, block: torch.Tensor, masked: torch.Tensor, editing: list[Group],
         step: int, drawn: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rule 12, token editing (LLaDA2.1): a token of the current block committed before this step (`block`
    (L,) or (B, L), `masked` the canvas's [MASK]s at the step's start), in the rows of `editing`, is replaced
    by the token drawn there at this step when that token differs and its probability exceeds
    edit_threshold. drawn: propose_block's (tokens, probs) (B, L). Returns the (B, L) positions edited.

    This is diffusers' BlockRefinementScheduler.step with editing_threshold in mask-token mode (prompt
    positions never edited: blocks hold none): its candidate is the token it sampled at that position
    (the argmax at temperature 0) and its confidence that token's sampled probability. Every (B, L) entry
    is computed (no host sync to find them)."""
    tokens, p = drawn
    editable = block & ~masked  # (B, L)
    if not batch.one and len(editing) < len(batch.groups):
        editable = editable & batch.rows_of(editing)[:, None]
    edited = editable & (tokens != st.x) & (p > batch.config.edit_threshold)  # NaN compares False
    st.x = torch.where(edited, tokens, st.x)  # (B, L) a new tensor: recorded rows stay intact
    st.committed_at.masked_fill_(edited, step)
    st.commit_conf = torch.where(edited, p, st.commit_conf)
    return edited


def revise(batch: Batch, st: State, block: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Rule 7: send the ceil(eta * d) lowest-confidence decoded tokens of the block (`block` (L,) or
    (B, L)) back to [MASK], in rows whose block masked fraction lies in [t_off, t_on] (and, given, `rows`
    (B,) bool). Returns the (B, L) positions re-masked."""
    cfg = batch.config
    masked = st.x == batch.mask_id  # (B, L)
    decoded = block & ~masked  # (B, L) committed, never fixed (blocks hold no fixed position)
    t_block = (block & masked).sum(dim=1) / block.sum(dim=-1)  # (B,)
    active = (t_block >= cfg.remask_t_off) & (t_block <= cfg.remask_t_on)
    if rows is not None:
        active = active & rows
    # float64 and a tiny epsilon so that e.g. 0.3 * 10 counts as 3, not 4
    r = torch.ceil(decoded.sum(dim=1).double() * cfg.remask - 1e-9).long() * active  # (B,)
    rank = rank_in_row(st.commit_conf.masked_fill(~decoded, float("inf")), descending=False)
    remask = decoded & (rank < r[:, None])
    st.x = st.x.masked_fill(remask, batch.mask_id)
    st.committed_at.masked_fill_(remask, -1)
    st.commit_conf.masked_fill_(remask, NAN)
    return remask
