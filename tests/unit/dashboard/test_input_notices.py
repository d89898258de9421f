"""Bad input through the dashboard, the Session driven without a browser: every bad value ends as a readable
notice in `state.error` (the red alert under the template), the last good result stays, and nothing raises
into Panel (a traceback in the server log and a page that stops updating). A served app that keeps serving:
tests/integration/test_served_input_notices.py; the API and CLI side: tests/unit/sampling/test_input_errors.py,
tests/unit/test_checkpoint_refusals.py and tests/unit/cli/test_sample_errors.py."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from explorer.dashboard import checkpoints as cards
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs.explore.controls import ControlsView
from tests.support.dashboard import BAD_FILES, LENGTH, explore, save_tiny_checkpoints, write_bad_checkpoints


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    torch.set_num_threads(1)  # tiny models; and the machine's cores are shared
    return write_bad_checkpoints(save_tiny_checkpoints(tmp_path))


@pytest.fixture
def good_checkpoints(tmp_path, monkeypatch):
    """Only the good ones (with broken files present, the default would be the first name, "empty")."""
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    torch.set_num_threads(1)
    return save_tiny_checkpoints(tmp_path)


@pytest.fixture
def state(checkpoints):
    """A loaded state with one good run, which every bad input below must leave in place."""
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    s.steps = 4
    assert explore(s).start_run(wait=True) and s.error == ""
    return s


def refused(state, needle: str) -> None:
    """The run was refused with a notice naming the problem, and the last good run is still shown."""
    good = explore(state).trajectory
    assert not explore(state).start_run(wait=True)
    assert needle in state.error and explore(state).trajectory is good and not explore(state).running


@pytest.mark.parametrize("template, needle", [
    ("ABé☃", "does not know: 'é', '☃'"),
    ("A" * LENGTH, "leaves nothing to generate"),
    ("A" * (LENGTH + 6), f"the model's context is {LENGTH}"),
    ("[___]" * LENGTH, f"the model's context is {LENGTH}"),
])
def test_bad_template_is_a_notice(state, template, needle):
    state.template = template
    refused(state, needle)
    state.template = "AB█C"  # fixed again: the notice goes with the next good run
    assert explore(state).start_run(wait=True) and state.error == ""


def test_empty_template_means_generate_everything(state):
    """The one case the UI reads differently from the API (where "" is an error): the template box
    starts empty, and its help says empty = generate everything."""
    state.template = "   "
    assert explore(state).start_run(wait=True) and state.error == ""
    assert not explore(state).frames.fixed.any() and explore(state).frames.length == LENGTH


@pytest.mark.parametrize("knob, value", [
    ("steps", 0), ("steps", 10**9), ("temperature", -0.1), ("temperature", float("nan")), ("top_p", 0.0),
    ("top_p", 1.5), ("top_k", -1), ("strategy", "best"), ("schedule", "fast"), ("block_length", -1),
    ("length", LENGTH + 1), ("seed", -1),
])
def test_knob_out_of_range_is_never_applied(state, knob, value):
    """The widgets are made from these parameters, so they cannot send such a value; set anyway (a
    script, a notebook), the parameter refuses it and the knob keeps its good value."""
    before = getattr(state, knob)
    with pytest.raises(ValueError, match=knob):
        setattr(state, knob, value)
    assert getattr(state, knob) == before and explore(state).start_run(wait=True)


def test_knobs_the_sampler_refuses_together_are_a_notice(state):
    state.param.update(threshold=0.8, remask=0.3)  # each in range; together not (no step budget)
    refused(state, "remask must be 0 when threshold is set")


def test_the_cache_without_blocks_is_a_notice(state):
    state.cache = "dual"  # the cache is refreshed at each block's start: with one block it has nothing to reuse
    refused(state, "cache 'dual' needs block_length > 0")
    state.block_length = 4
    assert explore(state).start_run(wait=True) and state.error == ""


def test_the_sidebar_disables_the_cache_for_a_model_that_cannot_take_it(state):
    controls = ControlsView(state=explore(state))
    assert not controls.widgets["cache"].disabled  # the project's own model takes it
    state.model_info = {**state.model_info, "kv_cache": False}  # what the card says of a model that takes no cache (a masked LM)
    assert controls.widgets["cache"].disabled and not controls.widgets["block_length"].disabled


def test_a_linked_cache_the_model_cannot_take_is_switched_off_with_a_notice(good_checkpoints, monkeypatch):
    """The sidebar disables the knob for such a model, so a run refusing it would leave the page stuck."""
    monkeypatch.setattr(cards, "takes_cache", lambda model: False)  # what the card says of a model that takes no cache (a masked LM)
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, cache="dual",
                     block_length=4, steps=4)
    s.load(wait=True)
    assert s.cache == "none" and "cannot take it: cache=dual" in s.error and s.block_length == 4
    assert explore(s).start_run(wait=True) and s.error == ""


def test_eos_suppression_on_a_character_model_is_disabled_and_a_link_s_switched_off(state, good_checkpoints):
    """A character tokenizer has no end-of-sequence token: the sidebar disables Suppress EOS, and a link
    asking for it gets it switched off with a notice instead of runs that would ignore it."""
    controls = ControlsView(state=explore(state))
    assert state.model_info["eos"] is False and controls.widgets["suppress_eos"].disabled
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, suppress_eos="both", steps=4)
    s.load(wait=True)
    assert s.suppress_eos == "off" and "cannot take it: suppress_eos=both" in s.error
    assert explore(s).start_run(wait=True) and s.error == ""
    s.close()


def test_block_length_that_does_not_divide_the_length_works(state):
    """Accepted by design; the knob's help says the last block may be shorter."""
    state.param.update(block_length=5, steps=10)
    assert explore(state).start_run(wait=True) and state.error == ""
    assert explore(state).frames.n_rows == 10 + 1 and "last block may be shorter" in state.param.block_length.doc
    assert (explore(state).trajectory.final != explore(state).trajectory.mask_id).all()


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_bad_checkpoint_file_is_a_notice_and_the_model_stays(state, name):
    model = state.model
    state.checkpoint = name  # listed (it is a file in checkpoints/), so the selector offers it
    state._loads.current.done.wait(30)
    assert state.error.startswith(f"could not load {name}: ") and BAD_FILES[name] in state.error
    assert state.model is model and state.checkpoint == "tiny"  # the selector shows what is in use


@pytest.mark.parametrize("name", ["../tiny", "/etc/passwd", "{dir}/tiny.safetensors", ".."])
def test_checkpoint_names_with_paths_are_never_opened(good_checkpoints, monkeypatch, name):
    import explorer.checkpoint as checkpoint_module

    opened = []
    real_open = checkpoint_module.safe_open
    monkeypatch.setattr(checkpoint_module, "safe_open", lambda path, *a, **k: opened.append(path) or
                        real_open(path, *a, **k))
    checkpoints = good_checkpoints
    name = name.format(dir=checkpoints)
    s = open_session(checkpoint=name, device="cpu", auto_run=False, sweep_auto=False)  # as from ?checkpoint=
    assert s.error == (f"checkpoint {name!r} is not one of the checkpoints in checkpoints/ "
                       "(tiny, tiny-ar, tiny-training); showing tiny instead")
    s.load(wait=True)
    assert s.model_info["name"] == "tiny" and "showing tiny instead" in s.error
    s.checkpoint = name  # a script setting the selector to something it does not offer
    s._loads.current.done.wait(30)
    assert "is not a plain name" in s.error and s.checkpoint == "tiny"
    assert str(checkpoints / "tiny.safetensors") in opened  # and nothing outside checkpoints/:
    assert {Path(p).parent for p in opened} == {checkpoints}  # (tiny-ar: its metadata, by the sweep's judge)


def test_notice_is_text_not_html(checkpoints):
    """A notice can quote the URL; it shows it as text (tests/unit/dashboard/test_markup_safety.py: every notice)."""
    from tests.support.markup import plain

    s = open_session(checkpoint="<img src=x onerror=alert(1)>", device="cpu", auto_run=False)
    notice = ControlsView(state=explore(s)).notice
    assert notice.visible and "'<img src=x onerror=alert(1)>' is not one of the checkpoints" in plain(notice)
