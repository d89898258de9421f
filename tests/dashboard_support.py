"""Tiny checkpoints for the dashboard tests, written into a temporary checkpoints/ directory.

They use the pattern alphabet (A..O), so sweeps score them by pattern quality without an AR judge,
and validation data for the mean-confidence view is generated rather than read from a file.
"""
from __future__ import annotations

from pathlib import Path

import torch

from explorer.checkpoint import save_checkpoint
from explorer.data.patterns import pattern_tokenizer
from tests.conftest import make_model

LENGTH = 24


def _meta(tok, model, finished: bool) -> dict:
    meta = {"tokenizer": tok.to_dict(), "n_params": sum(p.numel() for p in model.parameters()),
            "corpus": {"name": "patterns", "kind": "patterns", "sha256": None},
            "train_config": {"corpus": "patterns", "data": None}, "words": [],
            "curves": {"train": [[1, 2.7]], "val": [[1, 2.6]]}, "training_state": {"step": 1}}
    if finished:
        meta["metrics"] = {"nelbo_nats_per_char": 1.5, "nelbo_bits_per_char": 1.5 / 0.6931471805599453}
    return meta


def save_tiny_checkpoints(directory: Path) -> Path:
    """tiny (finished: has NELBO), tiny-training (no final metrics yet) and tiny-ar (causal)."""
    tok = pattern_tokenizer()
    for name, kind, finished in (("tiny", "diffusion", True), ("tiny-training", "diffusion", False),
                                 ("tiny-ar", "ar", True)):
        model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=LENGTH, kind=kind,
                           n_layer=1, n_embd=32, n_head=2, seed=1)
        save_checkpoint(model, directory / f"{name}.safetensors", _meta(tok, model, finished), dtype=torch.float32)
    return directory
