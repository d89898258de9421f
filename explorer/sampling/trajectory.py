"""Trajectory: what one sampler run returns. Plain numpy arrays, never display strings or colours.

Shapes: S = number of steps recorded, B = batch, L = canvas length.

A run with one generator per row (sample(..., generator=[g0, g1, ...])) also records each row's own t,
temperature and step count, so that `.row(i)` gives exactly what a run of row i alone would have
given (timings aside): that is how the dashboard serves many sessions from one batched call.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .config import SamplerConfig


@dataclass
class StepRecord:
    """One denoising step, handed to `on_step` callbacks while sampling runs (for live views)."""

    index: int  # 0-based step index
    tokens: np.ndarray  # (B, L) canvas after this step
    scores: np.ndarray  # (B, L) score of each masked position's proposal; NaN elsewhere
    proposals: np.ndarray  # (B, L) proposed token at every position (fixed/decoded: current token; edited: new)
    confidence: np.ndarray  # (B, L) p(proposal) under the untempered distribution (token editing: the one drawn from); NaN where neither masked nor edited
    committed: np.ndarray  # (B, L) bool: committed at this step
    remasked: np.ndarray  # (B, L) bool: returned to [MASK] at this step (revision)
    t: float  # masked fraction the model was called with (mean over the batch)
    temperature: float
    called_model: bool  # False when the previous logits were reused (no NFE)
    seconds: float
    # A uniform-state run (uniform.py): committed = accepted, remasked = re-noised (a fresh random token),
    # and settled (B, L) bool: the block stopped and the position took its final token (else None)
    settled: np.ndarray | None = None
    process: str = "masked"  # "masked" ([MASK] noise) or "uniform" (random-token noise)
    # A uniform-state run's first step only: (B, L) the canvas before it, the first block's random tokens (the
    # Trajectory's row 0; a live view's row 0 is drawn before the run draws them). Else None.
    start: np.ndarray | None = None
    # Runs with one generator per row only (else None):
    row_t: np.ndarray | None = None  # (B,) each row's own masked fraction
    row_temperature: np.ndarray | None = None  # (B,) each row's own temperature
    row_active: np.ndarray | None = None  # (B,) bool: False for a row that is already done (threshold
    # decoding: a row alone would have stopped; this step is padding for it)
    edited: np.ndarray | None = None  # (B, L) bool: a committed token replaced by another (token editing)
    row_called: np.ndarray | None = None  # (B,) bool: whether each row alone called the model (per row only)

    def row(self, i: int) -> "StepRecord":
        """Row i as a batch of one: what a run of that row alone records at this step."""
        cut = {k: getattr(self, k)[i:i + 1].copy() for k in
               ("tokens", "scores", "proposals", "confidence", "committed", "remasked")}
        if self.edited is not None:
            cut["edited"] = self.edited[i:i + 1].copy()
        if self.row_t is not None:
            cut.update(t=float(self.row_t[i]), temperature=float(self.row_temperature[i]))
        if self.settled is not None:
            cut["settled"] = self.settled[i:i + 1].copy()
        if self.row_called is not None:
            cut["called_model"] = bool(self.row_called[i])
        return replace(self, **cut, row_t=None, row_temperature=None, row_active=None, row_called=None)


@dataclass
class Trajectory:
    tokens: np.ndarray | None  # (S+1, B, L) int64: canvas before the first step and after each
    scores: np.ndarray | None  # (S, B, L) float32, NaN where the position was not masked
    proposals: np.ndarray | None  # (S, B, L) int64
    confidence: np.ndarray | None  # (S, B, L) float32, NaN where neither masked nor edited
    remasked: np.ndarray | None  # (S, B, L) bool: revision events
    committed_at: np.ndarray  # (B, L) int64: step that committed the final token; -1 for fixed positions
    commit_confidence: np.ndarray  # (B, L) float32: confidence of the final token when committed (NaN: fixed)
    fixed: np.ndarray  # (B, L) bool: template positions that were given
    final: np.ndarray  # (B, L) int64
    nfe: int  # model forward passes (the batch counts once per call)
    step_seconds: np.ndarray  # (S,) wall seconds per step
    seconds: float  # total wall time of the run
    config: SamplerConfig
    seed: int
    mask_id: int
    kind: str = "diffusion"  # "diffusion" or "ar"
    tokenizer: object | None = field(default=None, repr=False)
    # Added by the sampler engine (optional for anyone building a Trajectory by hand):
    blocks: np.ndarray | None = None  # (L,) int64 semi-AR block of each position; -1 for fixed
    # A uniform-state run (uniform.py): the process, and settled (S, B, L) bool, the step where a block
    # stopped and its positions took their final tokens; there committed means accepted (drawn and kept
    # this step), remasked re-noised (a fresh random token), committed_at the step a position settled
    process: str = "masked"
    settled: np.ndarray | None = None
    step_t: np.ndarray | None = None  # (S,) float32 masked fraction the model saw (batch mean)
    temperatures: np.ndarray | None = None  # (S,) float32 temperature used at each step
    called_model: np.ndarray | None = None  # (S,) bool: False where logits were reused or not needed
    committed: np.ndarray | None = None  # (S, B, L) bool: committed at the step (even if re-masked at once)
    edited: np.ndarray | None = None  # (S, B, L) bool: a committed token replaced by another (token editing)
    # Runs with one generator per row only (else None):
    row_t: np.ndarray | None = None  # (S, B) float32 each row's own masked fraction
    row_temperatures: np.ndarray | None = None  # (S, B) float32 each row's own temperature
    row_steps: np.ndarray | None = None  # (B,) int64 steps each row took alone (threshold rows differ)
    row_called: np.ndarray | None = None  # (S, B) bool whether each row alone called the model at the step

    @property
    def n_steps(self) -> int:
        return len(self.step_seconds)

    @property
    def batch_size(self) -> int:
        return self.final.shape[0]

    @property
    def length(self) -> int:
        return self.final.shape[1]

    @property
    def recorded(self) -> bool:
        return self.tokens is not None

    def row(self, i: int) -> "Trajectory":
        """Row i as a batch of one: what a run of that row alone with the same generator returns
        (timings aside: they are the batch's). Its steps are the first row_steps[i]: a threshold row
        that finished early only waited for the others after that."""
        n = self.n_steps if self.row_steps is None else int(self.row_steps[i])

        def cut(a, extra=0):  # (S[+1], B, ...) -> the row's steps, batch axis kept
            return None if a is None else a[:n + extra, i:i + 1].copy()

        per_row = {k: getattr(self, k)[i:i + 1].copy() for k in
                   ("committed_at", "commit_confidence", "fixed", "final")}
        called = None if self.called_model is None else self.called_model[:n].copy()
        if self.row_called is not None:
            called = self.row_called[:n, i].copy()
        step_t = self.step_t if self.row_t is None else self.row_t[:, i]
        temps = self.temperatures if self.row_temperatures is None else self.row_temperatures[:, i]
        return replace(
            self, tokens=cut(self.tokens, 1), scores=cut(self.scores), proposals=cut(self.proposals),
            confidence=cut(self.confidence), remasked=cut(self.remasked), committed=cut(self.committed),
            edited=cut(self.edited),
            **per_row, nfe=self.nfe if called is None else int(called.sum()),
            step_seconds=self.step_seconds[:n].copy(), called_model=called,
            step_t=None if step_t is None else step_t[:n].copy(),
            temperatures=None if temps is None else temps[:n].copy(),
            row_t=None, row_temperatures=None, row_steps=None, row_called=None,
            settled=cut(self.settled))

    @property
    def accepted(self) -> np.ndarray | None:
        """(S, B, L) a uniform-state run's accepted positions (its `committed`)."""
        return self.committed

    @property
    def renoised(self) -> np.ndarray | None:
        """(S, B, L) a uniform-state run's re-noised positions (its `remasked`)."""
        return self.remasked

    @property
    def tokens_per_forward(self) -> float:
        """Generated positions per model call: what parallel decoding buys (AR: 1; one-shot: L)."""
        return float((~self.fixed).sum(axis=1).mean()) / max(1, self.nfe)

    def token_strings(self, tokenizer=None) -> list[list[str]]:
        """Each row's final tokens as display strings (a character each for the char tokenizer)."""
        tok = tokenizer or self.tokenizer
        if tok is None:
            raise ValueError("token_strings() needs a tokenizer: pass one, or sample from a loaded checkpoint")
        if hasattr(tok, "token_strings"):
            return [tok.token_strings(row) for row in self.final]
        return [list(tok.decode(row)) for row in self.final]

    def texts(self, tokenizer=None) -> list[str]:
        tok = tokenizer or self.tokenizer
        if tok is None:
            raise ValueError("texts() needs a tokenizer: pass one, or sample from a loaded checkpoint")
        return [tok.decode(row) for row in self.final]
