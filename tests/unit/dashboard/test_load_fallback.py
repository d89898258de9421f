"""A page whose first model will not load (session._load_failed): it opens the default checkpoint
instead, with a notice naming what failed, and its header says what is loaded; when nothing at all
loads, the header says no model is loaded instead of "loading model …" for ever."""
from __future__ import annotations

import html

import pytest
import torch

from explorer.dashboard import checkpoints as lookup
from explorer.dashboard.runtime.cache import LISTED_MODELS
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs.explore.controls import ControlsView
from explorer.dashboard.ui.header import HeaderView
from tests.support.dashboard import explore, save_tiny_checkpoints, wait_for

MARKUP = "<img src=x onerror=alert(1)>"  # a directory name is anyone's text: it must show as typed


@pytest.fixture
def listed(tmp_path, monkeypatch):
    """tiny checkpoints, and a listed Hugging Face model (serve --models) whose directory holds no model."""
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    torch.set_num_threads(1)
    broken = tmp_path / MARKUP
    broken.mkdir()
    monkeypatch.setitem(LISTED_MODELS, "options", None)  # put back after the test: the listing is process-wide
    lookup.list_models([str(broken)])
    return save_tiny_checkpoints(d), str(broken)


def settled(session) -> None:
    """Wait until the session's loads are over: a model loaded, or none left to try."""
    wait_for(lambda: session.loaded > 0 or session.unloaded, timeout=60)
    assert session._loads.current.done.wait(30)  # and the load's own callback has ended (its notice set)


def test_a_listed_model_that_fails_opens_the_default_with_a_notice(listed):
    _, broken = listed
    s = open_session(checkpoint=broken, device="cpu", auto_run=False, sweep_auto=False)  # as `serve --checkpoint`
    header = HeaderView(state=s)
    try:
        assert broken in s.param.checkpoint.objects  # listed: the selector offers it
        s.load(wait=True)
        settled(s)
        assert s.model_info["name"] == "tiny" and s.checkpoint == "tiny" and not s.unloaded
        assert s.error.startswith(f"could not load {broken}: ") and "no config.json" in s.error
        assert s.error.endswith("; showing tiny instead")
        assert "<b>tiny</b>" in header.pane.object and "loading model" not in header.pane.object
        notice = ControlsView(state=explore(s)).notice
        shown = html.unescape(notice.get_root().text)  # the HTML the page's notice renders
        assert notice.visible and "could not load" in shown and "showing tiny instead" in shown
        assert MARKUP not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
        assert explore(s).start_run(wait=True) and explore(s).trajectory is not None  # the page works
    finally:
        s.close()


def test_a_failed_switch_keeps_the_model_in_use(listed):
    """Only a session with nothing loaded falls back: a later failure keeps the model it has."""
    _, broken = listed
    s = open_session(checkpoint="tiny-training", device="cpu", auto_run=False, sweep_auto=False)
    try:
        s.load(wait=True)
        model = s.model
        s.checkpoint = broken
        wait_for(lambda: s.error.startswith(f"could not load {broken}"))
        s._loads.current.done.wait(30)
        assert s.model is model and s.checkpoint == "tiny-training" and "instead" not in s.error
    finally:
        s.close()


def test_when_nothing_loads_the_header_says_so(tmp_path, monkeypatch):
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    (d / "notes.safetensors").write_text("lecture notes, not weights\n")
    (d / "empty.safetensors").write_bytes(b"")
    s = open_session(device="cpu", auto_run=False, sweep_auto=False)
    header = HeaderView(state=s)
    try:
        assert "loading model …" in header.pane.object  # before the first load starts
        s.load(wait=True)
        settled(s)
        assert s.unloaded and s.model is None and s.checkpoint is None
        # both files were tried, each named once, in the order tried
        first, second = ("empty", "notes") if s.error.startswith("could not load empty") else ("notes", "empty")
        assert s.error.count("could not load") == 2 and f"showing {second} instead" in s.error
        assert s.error.index(f"could not load {first}") < s.error.index(f"could not load {second}")
        assert "no model loaded" in header.pane.object and "loading" not in header.pane.object
    finally:
        s.close()
