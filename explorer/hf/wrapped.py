"""What every wrapper of a transformers network shares: the device, dtype and size read from the network."""
from __future__ import annotations

import torch
from torch import nn


class WrappedNet(nn.Module):
    """Base of the wrappers that hold a transformers network as `self.net` (with their own config): the
    sampler and the dashboard read a model's device, dtype and parameter count whatever wraps it."""

    net: nn.Module

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.net.parameters()).dtype

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.net.parameters())
