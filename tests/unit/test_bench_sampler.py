"""benchmarks/bench_sampler.py's model wrappers compute where the model they wrap does: the sampler
makes a run's tensors on the wrapper's device (devices.model_device), so a wrapper that looked like a
CPU model around a model on a GPU made a `--device cuda` run meet GPU logits with CPU tensors. The
meta device stands in for the GPU, as in tests/unit/sampling/test_devices.py."""
from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from explorer.devices import model_device
from explorer.sampling import SamplerConfig, sample, sample_many
from tests.support import ROOT
from tests.support.models import adaln_patterns_model, assert_same_run, gen

_spec = importlib.util.spec_from_file_location("bench_sampler", ROOT / "benchmarks" / "bench_sampler.py")
bench = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


class OnMeta(torch.nn.Module):
    """A stand-in computing on another device than its parameters' (a model/buffer split): it says so."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.config = inner, inner.config
        self.device = torch.device("meta")

    def forward(self, x, t=None):
        return self.inner(x, t).to("meta")


@pytest.mark.parametrize("wrap", ["TimedModel", "CountingModel"])
def test_a_wrapper_is_on_the_device_of_the_model_it_wraps(wrap):
    inner = adaln_patterns_model()
    assert model_device(getattr(bench, wrap)(OnMeta(inner))).type == "meta"
    stub = bench.LaunchBoundModel(inner, ops=3)  # no parameter of its own: its buffers say where it computes
    stub.to("meta")
    assert model_device(getattr(bench, wrap)(stub)).type == "meta"


def test_wrapped_models_sample_as_the_model_does():
    model = adaln_patterns_model()
    timed = bench.TimedModel(bench.CountingModel(model))
    assert_same_run(sample(timed, SamplerConfig(steps=4), batch_size=3, generator=[gen(1), gen(2), gen(3)]),
                    sample(model, SamplerConfig(steps=4), batch_size=3, generator=[gen(1), gen(2), gen(3)]))
    runs = lambda: [dict(config=SamplerConfig(steps=s), batch_size=2, generator=gen(s), record=False) for s in (2, 3)]
    for got, want in zip(sample_many(timed, runs()), sample_many(model, runs())):
        assert_same_run(got, want)
    assert timed.seconds > 0 and timed.inner.calls > 0
