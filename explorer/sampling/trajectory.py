"""Trajectory: what one sampler run returns. Plain numpy arrays, never display strings or colours.

Shapes: S = number of steps recorded, B = batch, L = canvas length.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import SamplerConfig


@dataclass
class StepRecord:
    """One denoising step, handed to `on_step` callbacks while sampling runs (for live views)."""

    index: int  # 0-based step index
    tokens: np.ndarray  # (B, L) canvas after this step
    scores: np.ndarray  # (B, L) score of each masked position's proposal; NaN elsewhere
    proposals: np.ndarray  # (B, L) proposed token at every position (fixed/decoded: current token)
    confidence: np.ndarray  # (B, L) p(proposal) under the untempered distribution; NaN where not masked
    committed: np.ndarray  # (B, L) bool: committed at this step
    remasked: np.ndarray  # (B, L) bool: returned to [MASK] at this step (revision)
    t: float  # masked fraction the model was called with (mean over the batch)
    temperature: float
    called_model: bool  # False when the previous logits were reused (no NFE)
    seconds: float


@dataclass
class Trajectory:
    tokens: np.ndarray | None  # (S+1, B, L) int64: canvas before the first step and after each
    scores: np.ndarray | None  # (S, B, L) float32, NaN where the position was not masked
    proposals: np.ndarray | None  # (S, B, L) int64
    confidence: np.ndarray | None  # (S, B, L) float32, NaN where not masked
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
    step_t: np.ndarray | None = None  # (S,) float32 masked fraction the model saw (batch mean)
    temperatures: np.ndarray | None = None  # (S,) float32 temperature used at each step
    called_model: np.ndarray | None = None  # (S,) bool: False where logits were reused or not needed
    committed: np.ndarray | None = None  # (S, B, L) bool: committed at the step (even if re-masked at once)

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

    def texts(self, tokenizer=None) -> list[str]:
        tok = tokenizer or self.tokenizer
        if tok is None:
            raise ValueError("texts() needs a tokenizer: pass one, or sample from a loaded checkpoint")
        return [tok.decode(row) for row in self.final]
