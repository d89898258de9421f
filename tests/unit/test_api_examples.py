"""The public API's docstring examples run as written (against the shipped checkpoints), so what the
docs show a user is what the code does."""
from __future__ import annotations

import doctest

import pytest

import explorer.checkpoint
import explorer.dashboard
import explorer.sampling.config
import explorer.sampling.packing
import explorer.sampling.sampler

PUBLIC = [explorer.checkpoint.load_checkpoint, explorer.sampling.config.SamplerConfig,
          explorer.sampling.sampler.sample, explorer.sampling.packing.sample_many, explorer.dashboard.create_app]


@pytest.mark.slow
@pytest.mark.parametrize("obj", PUBLIC, ids=lambda o: o.__name__)
def test_public_api_example_runs_as_documented(obj):
    examples = doctest.DocTestFinder(recurse=False).find(obj, obj.__name__, globs={})
    assert examples and examples[0].examples, f"{obj.__name__} has no example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in examples:
        runner.run(test)
    assert runner.failures == 0, f"{obj.__name__}'s example does not run as documented (see the output above)"
