"""The knob schema (sampling/knobs.py): each knob's "off" means the same on every side (the config's None
is the UI's 0, both ways), the config's checks are the schema's, and a declaration's mistakes fail when
it is made. That a knob added to the schema shows everywhere: tests/integration/test_new_knob.py."""
from __future__ import annotations

import pytest

from explorer.dashboard.session import Session
from explorer.dashboard.tabs.compare.state import column_config, parse_overrides
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.urlstate import UrlState
from explorer.sampling import SamplerConfig
from explorer.sampling.knobs import KNOBS, NO_OFF, Knob, registry, sidebar_knobs
from tests.support.models import make_model

NONE_IS_OFF = [k for k in KNOBS.values() if k.off is None and k.label is not None]  # threshold, factor, EB, stop


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))  # none: nothing loads
    s = open_session(device="cpu", auto_run=False, sweep_auto=False)
    yield s
    s.close()


def test_threshold_factor_entropy_bound_and_stop_entropy_are_the_knobs_whose_off_the_ui_shows_as_0():
    assert sorted(k.name for k in NONE_IS_OFF) == ["entropy_bound", "factor", "stop_entropy", "threshold"]
    for knob in NONE_IS_OFF:
        assert knob.to_ui(None) == 0.0 and knob.from_ui(0.0) is None  # off, both ways
        assert knob.from_ui(knob.to_ui(0.5)) == 0.5 and knob.to_ui(knob.from_ui(0.5)) == 0.5  # a value stays


@pytest.mark.parametrize("knob", sidebar_knobs(), ids=lambda k: k.name)
def test_every_sidebar_knob_starts_at_the_configs_default(knob):
    shown = Session.param[knob.name].default
    assert shown == knob.to_ui(knob.default) and knob.from_ui(shown) == getattr(SamplerConfig(), knob.name)
    if knob.off is not NO_OFF:
        assert knob.from_ui(knob.to_ui(knob.off)) == knob.off  # off survives the trip through the widget


def test_off_from_the_sidebar_a_link_and_a_compare_column_is_the_configs_none(session):
    session.param.update(threshold=0.0, factor=0.0)
    assert session.sampler_config().threshold is None and session.sampler_config().factor is None
    url = UrlState(session)
    url.apply({"factor": "1.5"})
    assert url.notice == "" and session.sampler_config().factor == 1.5
    url.apply({"factor": "0"})
    assert url.notice == "" and session.sampler_config().factor is None
    assert "factor" not in url.query()  # off is the default: the link leaves it out
    # A column's factor=0 is off as the slider's is (it was refused: "factor must be in (0, 100]")
    config = column_config(SamplerConfig(factor=2.0), parse_overrides("factor=0, threshold=0"))
    assert config.factor is None and config.threshold is None
    assert column_config(SamplerConfig(), parse_overrides("factor=1.5")).factor == 1.5


def test_a_checkpoints_recommended_none_is_the_sliders_0(session):
    model = make_model(block_size=24)
    model.meta = {"sampler_defaults": {"threshold": None, "factor": 2.5, "steps": 8}}
    knobs = session.recommended_knobs(model)
    assert knobs["threshold"] == 0.0 and knobs["factor"] == 2.5 and knobs["steps"] == 8
    session.param.update(**knobs)
    assert session.sampler_config().threshold is None and session.sampler_config().factor == 2.5


@pytest.mark.parametrize("knob", [k for k in KNOBS.values() if k.type in (int, float)], ids=lambda k: k.name)
def test_the_configs_range_checks_are_the_schemas(knob):
    """A value past each knob's range is refused by SamplerConfig with the schema's one-line message."""
    bad = knob.hi + 1 if knob.hi is not None else knob.lo - 1
    with pytest.raises(ValueError) as refused:
        knob.check(bad)
    assert str(refused.value).startswith(f"{knob.name} must be ") and repr(bad) in str(refused.value)
    with pytest.raises(ValueError) as from_config:
        SamplerConfig(**{knob.name: bad})
    assert str(from_config.value) == str(refused.value)


def test_the_ui_bounds_lie_inside_the_configs_range():
    """What a slider, a link or a column may ask for, the config takes (0 = off aside)."""
    for knob in sidebar_knobs():
        if knob.choices:
            continue
        for end in knob.ui_bounds:
            knob.check(knob.from_ui(end))  # raises if the UI could ask for what the config refuses


def test_a_declaration_mistake_fails_when_the_knob_is_made():
    with pytest.raises(ValueError, match="merge='off' needs an off value"):
        Knob("nudge", float, 0.0, "a knob the merged step cannot run, and no off", lo=0, hi=1)
    with pytest.raises(ValueError, match=r"nudge must be in \[0, 1\], got 2.0"):
        Knob("nudge", float, 2.0, "a default outside its own range", lo=0, hi=1, off=0.0)
    with pytest.raises(ValueError, match="ui_off stands in for a None off only"):
        Knob("nudge", float, 0.0, "ui_off without a None off", lo=0, hi=1, off=0.0, ui_off=0.0)
    with pytest.raises(TypeError, match="str with choices and widget='select'"):
        Knob("mode", str, "a", "names without a list of them", off="a", widget="select")
    with pytest.raises(TypeError, match="str with choices and widget='select'"):
        Knob("mode", str, "a", "names on a slider", choices=("a", "b"), off="a")
    with pytest.raises(ValueError, match="knob steps is declared twice"):
        registry(KNOBS["steps"], KNOBS["steps"])
