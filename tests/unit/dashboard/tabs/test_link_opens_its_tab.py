"""A link that names a tab starts only that tab's work: Explore's run waits until Explore is first
shown (ExploreState.hold_runs, app.link_url), so an Inspect link does not wait behind a sample nobody
looks at; a page that opens on Explore runs at once, as before."""
from __future__ import annotations

import pytest

from explorer.dashboard.app import create_app
from explorer.dashboard.runtime.queue import device_queue
from tests.support.dashboard import explore, wait_for


def find_tabs(app):
    import panel as pn

    return [o for o in app.main.objects if isinstance(o, pn.Tabs)][0]


def linked_app(monkeypatch, query: dict[str, str]):
    """The app as a served page with this query builds it (its model not loaded yet)."""
    args = {key: [value.encode()] for key, value in query.items()}
    monkeypatch.setattr("explorer.dashboard.app.page_args", lambda: args)
    app = create_app("tiny", "cpu", autoload=False)
    explore(app.explorer_state).sweep_auto = False
    return app


def count_runs(monkeypatch) -> list:
    """Every sampler run submitted to the CPU's device queue, from now on."""
    queue, runs = device_queue("cpu"), []
    submit = queue.submit
    monkeypatch.setattr(queue, "submit", lambda request: (runs.append(request), submit(request))[1])
    return runs


@pytest.mark.slow
def test_an_inspect_link_runs_no_sample_until_explore_is_shown(checkpoints, monkeypatch):
    runs = count_runs(monkeypatch)
    app = linked_app(monkeypatch, {"tab": "Inspect", "steps": "4", "inspect.t": "0.3"})
    state, tabs = app.explorer_state, find_tabs(app)
    titles, ex, inspect = list(state.tabs), explore(app.explorer_state), state.tabs["Inspect"]
    assert titles[tabs.active] == "Inspect" and state.steps == 4  # the link's tab and knobs, before loading
    state.load(wait=True)
    wait_for(lambda: inspect.predictions is not None, timeout=60)  # the link's tab did its work...
    state.seed = 7  # ...and a knob changed meanwhile starts no run either
    assert runs == [] and ex.run_id == 0 and ex.trajectory is None and not ex.running
    tabs.active = titles.index("Explore")  # shown: the run starts, at the knobs as they are now
    wait_for(lambda: ex.trajectory is not None and not ex.running, timeout=60)
    assert len(runs) == 1 and ex.trajectory.config.steps == 4
    tabs.active = titles.index("Inspect")
    tabs.active = titles.index("Explore")  # shown again: nothing held back, nothing re-runs
    assert len(runs) == 1
    state.close()


@pytest.mark.slow
def test_a_page_that_opens_on_explore_runs_once_the_model_loads(checkpoints, monkeypatch):
    runs = count_runs(monkeypatch)
    app = linked_app(monkeypatch, {"steps": "4"})
    ex = explore(app.explorer_state)
    app.explorer_state.load(wait=True)
    wait_for(lambda: ex.trajectory is not None and not ex.running, timeout=60)
    assert len(runs) == 1 and not ex.held
    app.explorer_state.close()
