"""A tiny training run's settings and a corpus a tiny model can memorise, for the training tests."""
from __future__ import annotations

import torch

from explorer.data.corpus import TextCorpus

TINY = dict(corpus="tiny", block_size=32, n_layer=2, n_head=4, n_embd=64, batch_size=16, lr=3e-3,
            warmup_steps=20, eval_every=100, save_every=1000, eval_sequences=4, precision="fp32",
            device="cpu")


class FixedBatchCorpus(TextCorpus):
    """Always the same 8 crops: a tiny corpus a tiny model can memorise at every masking ratio."""

    def batch(self, batch_size, length, generator=None, split="train"):
        return torch.stack([self.train_ids[i * 7:i * 7 + length] for i in range(batch_size)])
