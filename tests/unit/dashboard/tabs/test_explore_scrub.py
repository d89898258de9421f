"""Scrubbing (tabs/explore/state/run.py, SCRUB_ENV): while a slider is dragged every move is a knob change;
a change made while a run is on its way waits for that run to finish, then the newest knobs run. So a drag
shows finished runs one after another instead of superseding each before it ends. Without scrubbing (the
default on a CPU) a change supersedes the run on its way, as before."""
from __future__ import annotations

import threading

import pytest

from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs.explore.controls import ControlsView
from tests.support.dashboard import SlowModel, UiThread, explore, wait_for


def session(monkeypatch, scrub: str):
    monkeypatch.setenv("MDLM_EXPLORER_SCRUB", scrub)
    ui = UiThread()
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, dispatch=ui)
    s.load()
    wait_for(lambda: s.loaded, message="the model did not load")
    # and the load's callback has returned: its watchers (Explore's first run once auto_run is on) ran
    # on the UI thread, where they could still supersede the test's run
    done = threading.Event()
    ui(done.set)
    assert done.wait(10)
    s.model = SlowModel(s.model, 0.03)  # a run of a few steps takes a few tenths of a second
    s.steps = 6
    explore(s).auto_run = True
    return s, ui


def settled(s) -> bool:
    e = explore(s)
    job = e._runs.current
    return job is not None and job.done.is_set() and not e.running and s.dispatch.idle()


@pytest.fixture
def finished(monkeypatch):
    """Every finished run's temperature, in the order the page was shown them; and the session."""
    made = []

    def make(scrub: str):
        s, ui = session(monkeypatch, scrub)
        shown = []
        explore(s).param.watch(lambda e: e.new is not None and shown.append(e.new.config.temperature), "trajectory")
        made.append((s, ui))
        return s, shown

    yield make
    for s, ui in made:
        s.close()
        ui.stop()


def drag(s, values) -> None:
    """A drag's moves, each a knob change, faster than a run."""
    for value in values:
        s.temperature = value


@pytest.mark.slow  # a loaded session and a few slow runs: about a second
def test_a_drag_shows_the_run_on_its_way_then_the_newest_knobs(finished):
    s, shown = finished("on")
    e = explore(s)
    assert e.scrub
    s.temperature = 0.5
    wait_for(lambda: e._runs.current is not None, message="no run started")
    drag(s, [0.6, 0.7, 0.8, 0.9])
    wait_for(lambda: settled(s) and e.trajectory is not None and e.trajectory.config.temperature == 0.9,
             timeout=30, message="the newest knobs never ran")
    # the run on its way finished and was shown; the changes meanwhile made one run, of the last value
    assert shown == [0.5, 0.9]
    assert s.status.endswith(" ms") and s.error == ""


@pytest.mark.slow
def test_without_scrubbing_a_change_supersedes_the_run_on_its_way(finished):
    s, shown = finished("auto")  # on a CPU: off
    e = explore(s)
    assert not e.scrub
    s.temperature = 0.5
    wait_for(lambda: e._runs.current is not None, message="no run started")
    drag(s, [0.6, 0.7, 0.8, 0.9])
    wait_for(lambda: settled(s), timeout=30, message="the last run did not finish")
    assert shown == [0.9]


@pytest.mark.slow
def test_stop_during_a_drag_runs_nothing_more(finished):
    s, shown = finished("on")
    e = explore(s)
    s.temperature = 0.5
    wait_for(lambda: e._runs.current is not None, message="no run started")
    drag(s, [0.6, 0.7])
    e.stop_run()
    wait_for(lambda: settled(s), timeout=30, message="the stopped run did not end")
    assert shown == [] and s.status == "stopped"


def test_sliders_send_their_value_while_dragged_only_when_scrubbing(finished):
    for scrub, throttled in (("on", False), ("off", True)):
        s, _ = finished(scrub)
        slider = ControlsView(state=explore(s)).widgets["temperature"]
        s.quiet = True
        try:  # a drag's move: the slider's value, not its value on release
            slider.value = 0.65
        finally:
            s.quiet = False
        assert (s.temperature == 0.65) is not throttled
