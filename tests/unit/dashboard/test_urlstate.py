"""Shareable links, without a browser: a query is parsed and validated by each parameter's
type, applied before the first run, checked against the model once loaded; bad values are named in
one notice and never applied; the query written back holds only non-default values."""
from __future__ import annotations

import param
import pytest

from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs.base import TabState
from explorer.dashboard.urlstate import UrlState, format_value, parse_value, query_args
from explorer.sampling import SamplerConfig, sample
from tests.support.dashboard import LENGTH, explore


class DummyState(TabState):
    """A tab with one knob of each kind the URL must handle, and one it must not carry."""

    URL_PARAMS = ("level", "ratio", "mode", "picks", "flag", "label", "missing")

    level = param.Integer(3, bounds=(1, 10))
    ratio = param.Number(0.5, bounds=(0.0, 1.0))
    mode = param.Selector(default="a", objects=["a", "b"])
    picks = param.ListSelector(default=["x"], objects=["x", "y", "z"])
    flag = param.Boolean(False)
    label = param.String("")
    secret = param.Integer(0)  # not in URL_PARAMS


@pytest.fixture
def session(checkpoints):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    s.tabs["Dummy"] = DummyState(s)
    yield s
    s.close()


def url_for(state) -> UrlState:
    url = UrlState(state, list(state.tabs))
    state.load_hooks.append(url.hook)
    return url


def test_query_args_take_the_last_value_and_survive_bad_bytes():
    assert query_args({"steps": [b"4", b"8"], "template": [b"\xff"]}) == {"steps": "8", "template": "\ufffd"}
    assert query_args(None) == {}


@pytest.mark.parametrize("p, text, value", [
    (param.Integer(0, bounds=(0, 9)), "7", 7), (param.Number(0.0, bounds=(0, 1)), "0.25", 0.25),
    (param.Boolean(False), "TRUE", True), (param.Boolean(True), "0", False),
    (param.Selector(default="a", objects=["a", "b"]), "b", "b"), (param.Selector(default=1, objects=[1, 2]), "2", 2),
    (param.ListSelector(default=[], objects=["x", "y"]), "y,x", ["y", "x"]), (param.String(""), "A█B", "A█B")])
def test_parse_and_format_round_trip(p, text, value):
    assert parse_value(p, text) == value
    assert parse_value(p, format_value(p, value)) == value


@pytest.mark.parametrize("p, text, reason", [
    (param.Integer(0, bounds=(0, 9)), "12", "outside the range 0 to 9"), (param.Integer(0), "2.5", "not a whole"),
    (param.Number(0.0, bounds=(0, 1)), "nan", "not a finite"), (param.Number(0.0), "abc", "not a number"),
    (param.Boolean(False), "maybe", "true or false"), (param.Selector(default="a", objects=["a"]), "z", "not one of"),
    (param.ListSelector(default=[], objects=["x"]), "x,q", "not one of"), (param.Dict({}), "{}", "cannot be set"),
    (param.String(""), "x" * 3000, "longer than")])
def test_parse_rejects_with_a_reason(p, text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_value(p, text)


def test_valid_values_are_applied_before_the_load(session):
    url = url_for(session)
    url.apply({"steps": "5", "strategy": "margin", "seed": "11", "temperature": "0.7", "sweep_strategies": "random",
               "tab": "dummy", "dummy.level": "7", "dummy.picks": "y,z", "dummy.flag": "yes", "dummy.ratio": "0.25"})
    assert url.notice == "" and session.model is None  # applied before the model loads
    assert (session.steps, session.strategy, session.seed, session.temperature) == (5, "margin", 11, 0.7)
    assert explore(session).sweep_strategies == ["random"] and url.tab == "Dummy"
    dummy = session.tabs["Dummy"]
    assert (dummy.level, dummy.picks, dummy.flag, dummy.ratio) == (7, ["y", "z"], True, 0.25)


def test_a_link_with_the_schedules_older_name_opens_its_current_one(session):
    url = url_for(session)
    url.apply({"schedule": "seed"})
    assert url.notice == "" and session.schedule == "remaining"
    from explorer.dashboard.tabs.sweep.state import SweepTabState
    assert parse_value(SweepTabState.param.schedules, "seed,cosine") == ["remaining", "cosine"]


def test_bad_values_are_named_in_one_notice_and_not_applied(session):
    url = url_for(session)
    url.apply({"steps": "999", "strategy": "magic", "bogus": "1", "tab": "Nowhere", "dummy.level": "0",
               "dummy.secret": "5", "dummy.missing": "1", "other.level": "2", "temperature": "warm",
               "threshold": "0.8", "remask": "0.3", "seed": "4", "running": "true"})
    for bad in ("steps=999", "strategy=magic", "bogus=1 (unknown setting)", "tab=Nowhere", "dummy.level=0",
                "dummy.secret=5 (not a setting a link can carry)", "dummy.missing=1", "other.level=2 (no tab 'other'",
                "temperature=warm", "remask=0.3", "running=true (not a setting"):
        assert bad in url.notice, bad
    assert "outside the range 1 to 256" in url.notice and "'magic' is not one of" in url.notice
    assert (session.steps, session.strategy, session.temperature, session.remask) == (32, "confidence", 1.0, 0.0)
    assert session.tabs["Dummy"].level == 3 and session.tabs["Dummy"].secret == 0 and url.tab == "Explore"
    assert session.threshold == 0.8 and session.seed == 4  # valid ones still apply (threshold came first)


def test_model_dependent_values_are_checked_against_the_checkpoint(session):
    """At once against the checkpoint's file (its context and vocabulary, read before the load), and
    again once the model is loaded (the template's alphabet)."""
    url = url_for(session)
    url.apply({"length": "100", "top_k": "100", "block_length": "8", "template": "AB█"})
    assert "length=100" in url.notice and "top_k=100" in url.notice and "outside the range 1 to 24" in url.notice
    assert session.model is None and session.length == LENGTH and session.top_k == 0
    session.load(wait=True)
    assert session.model is not None
    assert session.length == LENGTH and session.top_k == 0 and session.block_length == 8
    assert session.template == "AB█"
    assert "length=100" in url.notice and "top_k=100" in url.notice
    assert not session.load_hooks  # one-shot: switching checkpoints later resets length as usual


def test_a_template_in_another_alphabet_is_not_applied(session):
    url = url_for(session)
    url.apply({"template": "hello █"})
    session.load(wait=True)
    assert session.template == "" and "template=hello █" in url.notice


def test_the_first_run_uses_the_link(session):
    """Same checkpoint, seed and knobs as the Python API => the same text."""
    explore(session).auto_run = True
    url = url_for(session)
    url.apply({"steps": "6", "seed": "9", "strategy": "entropy", "length": "16", "template": "AB█"})
    session.load(wait=True)
    from tests.support.dashboard import wait_for

    wait_for(lambda: explore(session).trajectory is not None)
    config = SamplerConfig(steps=6, seed=9, strategy="entropy")
    expected = sample(session.model, config, length=16, template="AB█").texts()[0]
    assert explore(session).trajectory.texts()[0] == expected


def test_query_holds_only_non_defaults(session):
    url = url_for(session)
    session.load(wait=True)
    assert url.query() == {"checkpoint": "tiny", "seed": "0"}  # length = the model's context: a default
    session.param.update(steps=8, temperature=0.7, template="A B")
    explore(session).sweep_strategies = ["random"]
    session.tabs["Dummy"].param.update(picks=["x", "z"], flag=True)
    url.tab = "Dummy"
    q = url.query()
    assert q == {"checkpoint": "tiny", "tab": "Dummy", "steps": "8", "temperature": "0.7", "seed": "0",
                 "template": "A B", "sweep_strategies": "random", "dummy.picks": "x,z", "dummy.flag": "true"}
    assert url.search().startswith("?checkpoint=tiny&tab=Dummy&steps=8") and "template=A+B" in url.search()
    fresh = open_session(device="cpu", auto_run=False)  # the link reproduces the knobs (checkpoint: app.py)
    fresh.tabs["Dummy"] = DummyState(fresh)
    again = UrlState(fresh, ["Explore", "Dummy"])
    again.apply(q)
    assert again.notice == "" and again.query() == q  # the checkpoint too: known from the first paint
    fresh.close()


def test_a_sliders_floating_point_sum_reaches_the_link_as_the_number_shown(session):
    """A slider's arrow keys add its step in the browser's floating point (two steps down from 1.0 sent
    0.9000000000000001, and 1.0 - 0.05 - 0.05 is 0.8999999999999999): the knob keeps 0.9, so the link carries
    top_p=0.9; a value typed off the step stays."""
    url = url_for(session)
    session.top_p = 1.0 - 0.05 - 0.05
    assert 1.0 - 0.05 - 0.05 != 0.9 and session.top_p == 0.9 and url.query()["top_p"] == "0.9"
    session.temperature = 0.8125
    assert url.query()["temperature"] == "0.8125"


def test_watch_reports_every_change(session):
    url = url_for(session)
    seen = []
    url.watch(lambda: seen.append(url.search()))
    session.steps = 12
    session.tabs["Dummy"].level = 9
    url.tab = "Dummy"
    assert len(seen) == 3 and "dummy.level=9" in seen[-1] and "tab=Dummy" in seen[-1]


@pytest.mark.slow
def test_a_burst_of_changes_rewrites_the_url_once_when_the_knobs_rest(checkpoints):
    """The URL is rewritten URL_QUIET after the last change (a slider drag: once), so the
    write, which costs the page a message and a style-and-layout pass, stays out of the run a change
    starts; the write carries the last values."""
    import time

    from explorer.dashboard.app import URL_QUIET, rewrite_when_quiet
    from tests.support.dashboard import wait_for

    queued, writes = [], []
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, dispatch=queued.append)
    url = url_for(s)

    class Location:  # pn.state.location's one attribute that is written
        search = property(lambda self: writes[-1] if writes else "", lambda self, value: writes.append(value))

    rewrite_when_quiet(s, url, Location())
    started = time.monotonic()
    for seed in (1, 2, 3):
        s.seed = seed
    wait_for(lambda: len(queued) == 3, timeout=10 * URL_QUIET + 5)  # one timer per change...
    assert time.monotonic() - started >= URL_QUIET
    for callback in queued:
        callback()
    assert writes == [url.search()] and "seed=3" in writes[0]  # ...and only the last one writes
    s.close()


def test_a_lesson_bar_says_what_changed_since_its_figures_link_and_links_back(session, monkeypatch):
    """After another checkpoint or a knob changed, the bar's notice (of the figure) no longer describes the
    page: a line under it names what changed and links back to the figure; undone, the line goes."""
    from explorer.dashboard import lessons
    from explorer.dashboard.ui.lesson import lesson_bar

    fig = lessons.Figure("x", 1, "§1", "a figure", "a view", "checkpoint=tiny&steps=8&temperature=0.5",
                         "notice this")
    monkeypatch.setattr(lessons, "LESSONS", (lessons.Lesson("x", "A lesson", "", "", (fig,)),))
    monkeypatch.setattr("explorer.dashboard.ui.lesson.LESSONS", lessons.LESSONS)
    monkeypatch.setattr("explorer.dashboard.urlstate.LESSONS", lessons.LESSONS)
    url = url_for(session)
    url.apply({"checkpoint": "tiny", "steps": "8", "temperature": "0.5", "lesson": "x", "figure": "1"})
    assert url.notice == "" and url.departed(fig.query) == []
    bar = lesson_bar(url, session)
    changed = bar.objects[1]
    assert bar.visible and not changed.visible
    session.steps = 12
    session.temperature = 0.7
    assert url.departed(fig.query) == ["steps", "temperature"] and changed.visible
    assert "Changed since this figure's link: steps, temperature" in changed.object
    assert 'href="?checkpoint=tiny&amp;steps=8&amp;temperature=0.5&amp;lesson=x&amp;figure=1"' in changed.object
    session.param.update(steps=8, temperature=0.5)
    assert not changed.visible
    assert "tiny-ar" in session.param.checkpoint.objects
    session.checkpoint = "tiny-ar"  # another model: its notice is of the figure's
    assert url.departed(fig.query) == ["checkpoint"] and "checkpoint" in changed.object


def test_values_a_tab_chose_for_the_model_stay_out_of_the_link(checkpoints):
    """A uniform-state model's page wrote compare.preset, compare.columns and sweep.temperatures into its
    link though nobody set them: the tabs chose them for the model, and choose them again when the link is
    opened. A value someone picks is written."""
    from explorer.dashboard.tabs import build_tab
    from tests.support.dashboard import save_twins

    save_twins(checkpoints)
    state = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    compare, _ = build_tab("Compare", state)
    sweep, _ = build_tab("Sweep", state)
    url = url_for(state)
    state.load(wait=True)
    assert compare.preset == "temperature"  # chosen for the model
    assert not {"compare.preset", "compare.columns", "sweep.temperatures"} & set(url.query())
    reopened = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    compare2, _ = build_tab("Compare", reopened)
    sweep2, _ = build_tab("Sweep", reopened)
    UrlState(reopened, list(reopened.tabs)).apply(url.query())
    reopened.load(wait=True)  # the link without those keys opens the same page
    assert (compare2.preset, compare2.columns, sweep2.temperatures) == (compare.preset, compare.columns,
                                                                         sweep.temperatures)
    sweep.temperatures = "0.5"
    assert compare.apply_preset("steps", start=False)
    q = url.query()
    assert q["sweep.temperatures"] == "0.5" and q["compare.preset"] == "steps"
    for s in (state, reopened):
        s.close()
