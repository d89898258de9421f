"""Knob changes that arrive together: a server started with --num-threads runs each widget change's
watchers on a thread of Panel's pool, so Explore's start_run runs on several threads at once, beside
the callbacks its runs hand to the session's UI thread. Whatever the interleaving, the run shown at
the end is the one of the knobs as the last change left them (RunState.start_run)."""
from __future__ import annotations

import threading
import time

import pytest

from explorer.dashboard.tabs.explore import open_session
from tests.support.dashboard import SlowModel, UiThread, explore, wait_for


@pytest.fixture
def served(checkpoints):
    ui = UiThread()
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, dispatch=ui)
    s.load()
    wait_for(lambda: s.model is not None and ui.idle(), message="the model did not load")
    s.model = SlowModel(s.model, 0.02)
    explore(s).auto_run = True
    yield s
    s.close()
    ui.stop()


def settled(s) -> bool:
    e = explore(s)
    job = e._runs.current
    return job is not None and job.done.is_set() and not e.running and s.dispatch.idle()


@pytest.mark.slow  # a loaded session and four rounds of runs: about a second
def test_the_last_of_changes_made_together_while_a_run_is_in_flight_is_the_run_shown(served, monkeypatch):
    """Each round: a change (the seed) reads the knobs, and before it makes its run the current one a
    second change (the steps) is made and runs its own watcher; the second's run must win. Before the
    knobs were read and the run made current under one lock, the first change's run, made last with
    the knobs it read before the second change, superseded the second's: the header kept showing a
    run without the new step count."""
    s, e = served, explore(served)
    e.start_run()  # a run in flight when the changes come
    admit, pause = type(e)._admit_run, threading.local()
    steps_wanted = {"value": None}

    def admit_slowly(self, model, config, canvas):
        # the first change waits, its knobs read, until the second change's value is set
        if getattr(pause, "on", False):
            pause.on = False
            wait_for(lambda: s.steps == steps_wanted["value"], timeout=10, message="the second change never came")
            time.sleep(0.05)  # and let that change's own watcher run
        return admit(self, model, config, canvas)

    monkeypatch.setattr(type(e), "_admit_run", admit_slowly)
    for seed, steps in ((11, 5), (12, 7), (13, 3), (14, 9)):
        steps_wanted["value"] = steps

        def first():
            pause.on = True
            s.seed = seed

        one = threading.Thread(target=first)
        two = threading.Thread(target=lambda: wait_for(lambda: s.seed == seed) or setattr(s, "steps", steps))
        one.start(), two.start()
        one.join(20), two.join(20)
        assert e.running or e._runs.current is not None
    wait_for(lambda: settled(s), timeout=60, message="the last run did not finish")
    shown = e.trajectory
    assert (s.seed, s.steps) == (14, 9)
    assert shown is not None and (shown.config.seed, shown.config.steps) == (14, 9), shown and shown.config
    assert s.status.startswith("9 steps, ") and s.error == ""
