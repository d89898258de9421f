"""A checkpoint's recommended sampler knobs (metadata `sampler_defaults`): validated,
written without touching the weights, and applied by the CLI and the dashboard unless the user (a flag,
a link, a script) set the knob."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from explorer.checkpoint import load_checkpoint, read_metadata, update_metadata
from explorer.cli import main
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.urlstate import UrlState
from explorer.sampling.config import SamplerConfig, config_for, recommended
from tests.support.dashboard import LENGTH

WANTED = {"strategy": "random", "temperature": 0.5, "steps": 3, "top_p": 0.9, "length": 10}


@pytest.fixture
def recommending(checkpoints):
    """The tiny checkpoint, recommending WANTED."""
    update_metadata(checkpoints / "tiny.safetensors", {"sampler_defaults": WANTED})
    return checkpoints / "tiny.safetensors"


def test_update_metadata_keeps_the_weights_bit_for_bit_and_merges_dicts(checkpoints):
    path = checkpoints / "tiny.safetensors"
    before = read_metadata(path)
    with safe_open(str(path), framework="pt") as f:
        weights = {k: f.get_tensor(k) for k in f.keys()}
    update_metadata(path, {"metrics": {"extra": 1.5}, "sampler_defaults": {"steps": 4}})
    after = read_metadata(path)
    assert after["metrics"] == {**before["metrics"], "extra": 1.5}  # merged, the old ones kept
    assert after["sampler_defaults"] == {"steps": 4}
    with safe_open(str(path), framework="pt") as f:
        assert set(f.keys()) == set(weights)
        assert all(torch.equal(f.get_tensor(k), v) for k, v in weights.items())


def test_recommended_knobs_are_checked(recommending):
    model = load_checkpoint(recommending)
    assert recommended(model) == WANTED
    assert config_for(model) == SamplerConfig(strategy="random", temperature=0.5, steps=3, top_p=0.9)
    assert config_for(model, steps=7).steps == 7  # a knob given wins
    model.meta = {**model.meta, "sampler_defaults": {"strategy": "telepathy"}}
    with pytest.raises(ValueError, match="unknown strategy 'telepathy'; valid: confidence"):
        recommended(model)
    model.meta = {**model.meta, "sampler_defaults": {"length": LENGTH + 1}}
    with pytest.raises(ValueError, match=f"length must be in \\[1, {LENGTH}\\]"):
        recommended(model)
    model.meta = {k: v for k, v in model.meta.items() if k != "sampler_defaults"}
    assert recommended(model) == {} and config_for(model) == SamplerConfig()


def test_cli_sample_uses_the_recommendation_unless_a_flag_is_given(recommending, capsys):
    assert main(["sample", "--checkpoint", str(recommending), "--json", "-n", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {k: out["config"][k] for k in ("strategy", "temperature", "steps", "top_p")} == \
        {"strategy": "random", "temperature": 0.5, "steps": 3, "top_p": 0.9}
    assert all(len(row) == 10 for row in out["tokens"])  # the recommended length
    assert main(["sample", "--checkpoint", str(recommending), "--json", "--steps", "5", "--length", "12"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["steps"] == 5 and out["config"]["strategy"] == "random" and len(out["tokens"][0]) == 12


@pytest.mark.parametrize("bad, needle", [
    ({"temperature": -1}, "temperature must be in [0, 100]"),
    # JSON of another shape, written by hand: once a TypeError's traceback
    (["steps", 4], "sampler_defaults must be a JSON object of knobs, got list"),
])
def test_cli_sample_refuses_a_bad_recommendation_in_one_line(recommending, capsys, bad, needle):
    update_metadata(recommending, {"sampler_defaults": bad})
    assert main(["sample", "--checkpoint", str(recommending)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_the_dashboard_opens_a_checkpoint_at_its_recommendation(recommending):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    try:
        s.param.update(steps=9, temperature=1.7)  # set before the load: the checkpoint's own knobs replace them
        s.load(wait=True)
        assert (s.strategy, s.temperature, s.steps, s.top_p, s.length) == ("random", 0.5, 3, 0.9, 10)
        s.load("tiny-training", wait=True)  # no recommendation: every knob back at its default, length at context
        assert (s.strategy, s.temperature, s.steps, s.top_p, s.length) == ("confidence", 1.0, 32, 1.0, LENGTH)
    finally:
        s.close()


def test_a_script_or_a_link_wins_over_the_recommendation(recommending):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, steps=6)
    try:
        url = UrlState(s, list(s.tabs))
        s.load_hooks.append(url.hook)
        url.apply({"temperature": "0.25", "strategy": "margin"})
        s.load(wait=True)
        assert (s.steps, s.temperature, s.strategy, s.top_p, s.length) == (6, 0.25, "margin", 0.9, 10)
        assert url.notice == ""
        # the link carries what differs from this checkpoint's recommendation, not from the sampler's
        assert url.query() == {"checkpoint": "tiny", "seed": "0", "steps": "6", "temperature": "0.25",
                               "strategy": "margin"}
    finally:
        s.close()
