"""A session shows the checkpoint it opens and that checkpoint's knobs from its first paint, before the
model is loaded (session._preview: the file's metadata, read without its weights), and a link's knobs
over them; the load then fits the same values from the model."""
from __future__ import annotations

import pytest
import torch

from explorer.checkpoint import update_metadata
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs.explore.controls import ControlsView
from explorer.dashboard.urlstate import UrlState
from tests.support.dashboard import LENGTH

RECOMMENDED = {"strategy": "margin", "schedule": "linear", "temperature": 0.7, "steps": 10}


@pytest.fixture
def recommending(checkpoints):
    """The tiny checkpoint, recommending knobs of its own (as the shipped patterns one does)."""
    update_metadata(checkpoints / "tiny.safetensors", {"sampler_defaults": RECOMMENDED})
    return checkpoints


def knobs(session) -> dict:
    return {k: getattr(session, k) for k in ("checkpoint", "length", *RECOMMENDED)}


def test_the_checkpoint_and_its_knobs_are_shown_before_the_load(recommending):
    session = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    try:
        assert session.model is None  # nothing loaded yet: the page's first paint
        before = knobs(session)
        assert before == {"checkpoint": "tiny", "length": LENGTH, **RECOMMENDED}
        sidebar = ControlsView(state=session.tabs["Explore"]).widgets
        assert (sidebar["checkpoint"].value, sidebar["length"].value, sidebar["steps"].value) == ("tiny", LENGTH, 10)
        assert session.param.length.bounds == (1, LENGTH)
        session.load(wait=True)
        assert session.model is not None and knobs(session) == before  # the load changes nothing shown
    finally:
        session.close()


def test_a_links_knobs_are_shown_over_them_and_checked_at_once(recommending):
    session = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    try:
        url = UrlState(session, list(session.tabs))
        session.load_hooks.append(url.hook)
        url.apply({"steps": "12", "temperature": "1.0", "length": "100"})
        assert (session.steps, session.temperature, session.strategy) == (12, 1.0, "margin")
        assert session.length == LENGTH and "length=100" in url.notice  # this checkpoint's context is 24
        session.load(wait=True)
        assert (session.steps, session.temperature, session.strategy, session.length) == (12, 1.0, "margin", LENGTH)
    finally:
        session.close()


def test_the_knobs_follow_the_loaded_model_even_one_whose_truth_value_is_false(checkpoints):
    session = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    try:
        assert session.model is None and session.knobs_model() is session.fitted_to  # the metadata, before the load
        session.load(wait=True)
        assert session.knobs_model() is session.model
        empty = torch.nn.ModuleList()  # a container module: its truth value is its length, 0
        empty.config = session.model.config
        session.model = empty
        assert not empty and session.knobs_model() is empty
    finally:
        session.close()
