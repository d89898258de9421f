"""Bad input to the sampler through the Python API: a bad template or knob is one ValueError whose message
names the problem. The same cases from the CLI: tests/unit/cli/test_sample_errors.py; in the dashboard:
tests/unit/dashboard/test_input_notices.py."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.checkpoint import load_checkpoint
from explorer.sampling import SamplerConfig, sample_any
from explorer.sampling.plan import plan_blocks
from tests.support.dashboard import LENGTH

# (template, length) -> the phrase the ValueError must contain. The tiny models know A..O only.
BAD_TEMPLATES = {
    "unknown characters": (("ABé☃", None), "does not know: 'é', '☃'"),
    "empty template": (("", None), "the template is empty"),
    "nothing to generate": (("ABC", 3), "leaves nothing to generate"),
    "all fixed, whole context": (("A" * LENGTH, None), "leaves nothing to generate"),
    "longer than the context": (("A" * (LENGTH + 6), None), f"the model's context is {LENGTH}"),
    "gaps past the context": (("A█" * LENGTH, None), f"the model's context is {LENGTH}"),
}
BAD_KNOBS = {
    "steps 0": ({"steps": 0}, "steps must be an integer in [1, 4096], got 0"),
    "steps absurd": ({"steps": 10**9}, "steps must be an integer in [1, 4096]"),
    "steps not an integer": ({"steps": 2.5}, "steps must be an integer"),
    "negative temperature": ({"temperature": -1.0}, "temperature must be in [0, 100], got -1.0"),
    "NaN temperature": ({"temperature": float("nan")}, "temperature must be in [0, 100], got nan"),
    "top-p 0": ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0"),
    "top-p above 1": ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5"),
    "top-p NaN": ({"top_p": float("nan")}, "top_p must be in (0, 1]"),
    "negative top-k": ({"top_k": -1}, "top_k must be an integer >= 0"),
    "top-k True": ({"top_k": True}, "top_k must be an integer >= 0"),
    "negative block length": ({"block_length": -4}, "block_length must be an integer >= 0"),
    "block length past int64": ({"block_length": 2**63}, "block_length must be an integer below 2^63"),
    "top-k past int64": ({"top_k": 2**63}, "top_k must be an integer below 2^63"),
    "unknown strategy": ({"strategy": "best"}, "unknown strategy 'best'; valid: confidence, margin"),
    "unknown schedule": ({"schedule": "fast"}, "unknown schedule 'fast'; valid: remaining, linear, cosine"),
    "tiny temperature": ({"temperature": 1e-9}, "temperature must be 0 (greedy) or at least 1e-06"),
    "unknown knob": ({"temprature": 1.0}, "unknown sampler knob(s): temprature"),
}


# ---------------------------------------------------------------------------------- Python API

@pytest.mark.parametrize("kind", ["tiny", "tiny-ar"])
@pytest.mark.parametrize("case", list(BAD_TEMPLATES))
def test_api_bad_template_names_the_problem(ckpts, kind, case):
    (template, length), needle = BAD_TEMPLATES[case]
    model = load_checkpoint(kind)
    with pytest.raises(ValueError) as e:
        sample_any(model, SamplerConfig(steps=2), template=template, length=length)
    assert needle in str(e.value)


@pytest.mark.parametrize("case", list(BAD_KNOBS))
def test_api_bad_knob_names_the_problem(case):
    knobs, needle = BAD_KNOBS[case]
    with pytest.raises(ValueError) as e:
        SamplerConfig.from_dict(knobs)
    assert needle in str(e.value)


def test_api_block_length_need_not_divide_the_length(ckpts):
    """Accepted by design (SamplerConfig.block_length): the last block is shorter."""
    blocks = plan_blocks(np.zeros(LENGTH, dtype=bool), 5)
    assert np.bincount(blocks).tolist() == [5, 5, 5, 5, 4]
    traj = sample_any(load_checkpoint("tiny"), SamplerConfig(steps=10, block_length=5), length=LENGTH)
    assert (traj.final != traj.mask_id).all() and traj.n_steps == 10
