"""Bad input through the Python API and the CLI (issue 7): each case gives one readable message that
names the problem — a ValueError / CheckpointError from the API, one `error: ...` line and exit 2
from the CLI — and nothing else happens (no file outside checkpoints/ is opened by a name-only loader).
The same cases in the dashboard are in test_bad_input_ui.py."""
from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors import safe_open

import explorer.checkpoint as checkpoint_module
from explorer.checkpoint import CheckpointError, load_checkpoint
from explorer.cli import main
from explorer.sampling import SamplerConfig, sample_any
from explorer.sampling.sampler import plan_blocks
from tests.dashboard_support import BAD_FILES, LENGTH, save_tiny_checkpoints, write_bad_checkpoints

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
    "unknown strategy": ({"strategy": "best"}, "unknown strategy 'best'; valid: confidence, margin"),
    "unknown schedule": ({"schedule": "fast"}, "unknown schedule 'fast'; valid: remaining, linear, cosine"),
    "tiny temperature": ({"temperature": 1e-9}, "temperature must be 0 (greedy) or at least 1e-06"),
    "unknown knob": ({"temprature": 1.0}, "unknown sampler knob(s): temprature"),
}



@pytest.fixture
def ckpts(tmp_path, monkeypatch):
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    return write_bad_checkpoints(save_tiny_checkpoints(d))




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


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_api_bad_checkpoint_file_names_the_problem(ckpts, name):
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(name, allow_paths=False)
    assert BAD_FILES[name] in str(e.value) and name in str(e.value)


@pytest.mark.parametrize("name", ["../outside", "{outside}", "{outside_file}", "/etc/passwd", "..", ".hidden",
                                  "sub\\..\\..\\outside", ""])
def test_api_names_with_paths_are_refused_before_any_file_is_opened(ckpts, monkeypatch, name):
    outside = ckpts.parent / "outside.safetensors"
    outside.write_bytes((ckpts / "tiny.safetensors").read_bytes())  # a real checkpoint, outside the dir
    name = name.format(outside=ckpts.parent / "outside", outside_file=outside)
    opened = []
    monkeypatch.setattr(checkpoint_module, "safe_open", lambda *a, **k: opened.append(a) or safe_open(*a, **k))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(name, allow_paths=False)
    assert "is not a plain name; choose one of ['" in str(e.value) and opened == []


# ---------------------------------------------------------------------------------- CLI

@pytest.mark.parametrize("argv, needle", [
    (["--template", "ABé"], "does not know: 'é'"),
    (["--template", ""], "the template is empty"),
    (["--template", "ABC", "--length", "3"], "leaves nothing to generate"),
    (["--template", "A" * 40], f"the model's context is {LENGTH}"),
    (["--steps", "0"], "steps must be an integer in [1, 4096], got 0"),
    (["--steps", "99999999"], "steps must be an integer in [1, 4096]"),
    (["--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["--temperature", "-0.5"], "temperature must be in [0, 100], got -0.5"),
    (["--temperature", "nan"], "argument --temperature: expected a finite number, got 'nan'"),
    (["--top-p", "0"], "top_p must be in (0, 1], got 0.0"),
    (["--top-p", "1.01"], "top_p must be in (0, 1], got 1.01"),
    (["--top-k", "-3"], "top_k must be an integer >= 0 (0 = off), got -3"),
    (["--strategy", "best"], "unknown strategy 'best'; valid: confidence, margin"),
    (["--checkpoint", "truncated"], "truncated.safetensors is not a readable safetensors checkpoint"),
    (["--checkpoint", "notes"], "notes.safetensors is not a readable safetensors checkpoint"),
    (["--checkpoint", "foreign"], "has no mdlm-explorer metadata"),
    (["--checkpoint", "future"], "has format version '2'"),
    (["--checkpoint", "other-version"], "unknown model config keys: ['rotary_base']"),
    (["--checkpoint", "../nope"], "no checkpoint '../nope'"),
])
def test_cli_bad_input_is_one_error_line(ckpts, capsys, argv, needle):
    argv = ["--checkpoint", "tiny", *argv] if "--checkpoint" not in argv else argv
    assert cli("--steps", "2", *argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


def test_cli_uneven_blocks_work(ckpts, capsys):
    assert cli("--checkpoint", "tiny", "--steps", "10", "--block-length", "5", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)["texts"][0]) == LENGTH


def cli(*argv) -> int:
    """`python run.py sample ...`'s exit status (argparse's own errors exit rather than return)."""
    try:
        return main(["sample", *argv])
    except SystemExit as e:
        return e.code
