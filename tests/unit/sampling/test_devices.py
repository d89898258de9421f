"""A run's tensors live on the model's device (devices.model_device), and logits that come back from
anywhere else are refused with one clear message, before they meet the run's own tensors. The meta
device stands in for a GPU: a wrapper without parameters (so it looks like a CPU model) whose forward
hands back its logits on meta is what a parameterless stand-in computing on a GPU did to a merged walk
(torch.cat(out=...) of GPU logits into the walk's CPU buffer)."""
from __future__ import annotations

import pytest
import torch

from explorer.sampling import SamplerConfig, sample, sample_many
from tests.support.models import adaln_patterns_model, assert_same_run, gen


class Elsewhere(torch.nn.Module):
    """The inner model's logits moved to `to`; no parameter of its own, so model_device says CPU
    unless `device` is given."""

    def __init__(self, inner, to: str, device: torch.device | None = None):
        super().__init__()
        self.config, self.tokenizer, self.to_device = inner.config, getattr(inner, "tokenizer", None), to
        self.held = [inner]  # not a submodule: its parameters stay hidden from model_device
        if device is not None:
            self.device = device

    def forward(self, x, t=None):
        return self.held[0](x, t).to(self.to_device)


def runs():
    """Three runs that merge (fresh generators each time: a run draws from its generator)."""
    return [dict(config=SamplerConfig(steps=s, strategy=st), batch_size=n, generator=gen(i), record=False)
            for i, (s, st, n) in enumerate([(3, "confidence", 4), (5, "random", 2), (2, "margin", 3)])]


@pytest.mark.parametrize("merge", [True, False])
def test_logits_on_another_device_are_refused_by_a_packed_sweep(merge):
    model = Elsewhere(adaln_patterns_model(), "meta")
    with pytest.raises(ValueError, match="logits on meta, but its run's tensors are on cpu"):
        sample_many(model, runs(), merge=merge)


@pytest.mark.parametrize("batch_size", [1, 3])
def test_logits_on_another_device_are_refused_by_sample(batch_size):
    model = Elsewhere(adaln_patterns_model(), "meta")
    with pytest.raises(ValueError, match="logits on meta, but its run's tensors are on cpu"):
        sample(model, SamplerConfig(steps=4), batch_size=batch_size)


def test_a_parameterless_model_that_names_its_device_samples_as_the_model_does():
    """What a stand-in must do: say where it computes (`device`); then its runs are the inner model's."""
    inner = adaln_patterns_model()
    model = Elsewhere(inner, "cpu", device=torch.device("cpu"))
    for got, want in zip(sample_many(model, runs()), sample_many(inner, runs())):
        assert_same_run(got, want)
