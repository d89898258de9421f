"""A tab whose view is a computed result shows it as soon as it is on screen (TabState.on_shown):
on a click, and when a link opens on it and the model arrives later, so a shared link reproduces it."""
from __future__ import annotations

import pytest

from explorer.dashboard.app import create_app
from tests.support.dashboard import explore, wait_for


def find_tabs(app):
    import panel as pn

    return [o for o in app.main.objects if isinstance(o, pn.Tabs)][0]


@pytest.mark.slow
def test_clicking_compare_runs_the_comparison_once(checkpoints):
    app = create_app("tiny", "cpu", autoload=False)
    state = app.explorer_state
    explore(state).param.update(auto_run=False, sweep_auto=False)
    state.steps = 4
    state.load(wait=True)
    compare = state.tabs["Compare"]
    assert compare.results == []  # nothing runs while the tab is not shown
    tabs = find_tabs(app)
    tabs.active = list(state.tabs).index("Compare")
    wait_for(lambda: compare.results and all(compare.results) and not compare.running, timeout=60)
    first = compare.run_id
    tabs.active = 0
    tabs.active = list(state.tabs).index("Compare")
    assert compare.run_id == first  # shown again: the results are still there, nothing re-runs


@pytest.mark.slow
def test_a_link_that_opens_on_sweep_shows_the_sweep_once_the_model_loads(checkpoints, monkeypatch):
    # A sweep estimated over the auto-start limit waits for Run, and the estimate is the measured speed
    # times the calls: on a busy machine the tiny sweep's could pass the default limit. The limit is not
    # what this test is about (test_limits is), so it is set out of reach.
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_START_SECONDS", "3600")
    app = create_app("tiny", "cpu", autoload=False)
    state = app.explorer_state
    explore(state).param.update(auto_run=False, sweep_auto=False)
    find_tabs(app).active = list(state.tabs).index("Sweep")  # as a ?tab=Sweep link does
    sweep = state.tabs["Sweep"]
    assert sweep.main.result is None  # no model yet: nothing to sweep
    state.load(wait=True)
    wait_for(lambda: sweep.main.result is not None, timeout=120)
    table, summary = sweep.main.result
    grid = {(strategy, int(n)) for strategy in sweep.strategies for n in sweep.steps_grid.split(",")}
    cells = table[table["sampler"] == "diffusion"].groupby(["strategy", "steps"]).size()
    assert set(cells.index) == grid and set(cells) == {sweep.samples}  # the tab's own knobs, every cell


@pytest.mark.slow
def test_only_the_shown_tab_is_in_the_page_and_a_hidden_one_keeps_its_results(checkpoints):
    app = create_app("tiny", "cpu", autoload=False)
    state = app.explorer_state
    explore(state).param.update(auto_run=False, sweep_auto=False)
    state.steps = 4
    state.load(wait=True)
    tabs, titles = find_tabs(app), list(state.tabs)
    compare, other = titles.index("Compare"), titles.index("Model")  # Model computes nothing when shown
    assert all(len(tabs[i]) == 0 for i in range(1, len(tabs)))  # nothing shown yet but Explore
    explore_views = list(tabs[0])
    tabs.active = compare
    view = tabs[compare][0]
    wait_for(lambda: state.tabs["Compare"].results and not state.tabs["Compare"].running, timeout=60)
    tabs.active = other
    assert len(tabs[compare]) == 0 and len(tabs[other]) == 1  # out of the page (and its document)
    assert len(explore_views) > 0 and all(a is b for a, b in zip(tabs[0], explore_views, strict=True))  # Explore stays
    tabs.active = compare
    assert tabs[compare][0] is view and len(tabs[other]) == 0  # the same view, back with its results
    assert all(state.tabs["Compare"].results)
    state.close()


@pytest.mark.slow
def test_a_tab_can_bring_another_to_the_front(checkpoints):
    """Model's "Sample from it" loads the new checkpoint and shows Explore, where its samples appear;
    the request is reset once served, and an unknown title changes nothing."""
    app = create_app("tiny", "cpu", autoload=False)
    state = app.explorer_state
    explore(state).param.update(auto_run=False, sweep_auto=False)
    tabs, titles = find_tabs(app), list(state.tabs)
    tabs.active = titles.index("Model")
    state.show_tab = "Explore"
    assert tabs.active == titles.index("Explore") and state.show_tab == ""
    state.show_tab = "Nowhere"
    assert tabs.active == titles.index("Explore")


@pytest.mark.slow
def test_a_hidden_tab_view_is_built_when_first_shown_from_its_state_then(checkpoints):
    """A page builds only Explore's view; a hidden tab's view is built on its first showing (building all
    five cost 1 s of server time per page opened), from its state as it is then, and kept afterwards."""
    from explorer.dashboard.tabs import LaterView
    from explorer.dashboard.tabs.compare.view import CompareView

    app = create_app("tiny", "cpu", autoload=False)
    state = app.explorer_state
    explore(state).param.update(auto_run=False, sweep_auto=False)
    tabs, titles = find_tabs(app), list(state.tabs)
    compare = titles.index("Compare")
    later = tabs.lazy_views[compare]
    assert isinstance(later, LaterView) and later._view is None and len(tabs[compare]) == 0
    columns = state.tabs["Compare"].columns
    state.tabs["Compare"].add_column()  # the state works before any view exists (a link sets it)
    assert state.tabs["Compare"].columns != columns
    tabs.active = compare
    view, shown_object = later._view, tabs[compare][0]
    assert isinstance(view, CompareView) and len(tabs[compare]) == 1
    shown = [c for c in view.columns if c.layout.visible]
    assert len(shown) == len(state.tabs["Compare"].columns.split("|"))  # drawn from the state as it was then
    tabs.active = 0
    tabs.active = compare
    assert tabs[compare][0] is shown_object and later._view is view  # built once
    state.close()


def test_a_dashboard_built_outside_a_session_takes_no_other_pages_link(checkpoints):
    """create_app() in a script or notebook of a process that also serves: Bokeh's process-wide
    current document may be a served session's (Panel's session_args falls back to it), and that
    page's query is not this dashboard's link (seen as this file's flake beside served tests)."""
    import weakref

    import panel as pn
    from bokeh.document import Document
    from bokeh.io.doc import curdoc, set_curdoc

    class Request:
        arguments = {"tab": [b"Compare"], "seed": [b"77"]}

    class Context:  # what a served document's session_context offers
        request, destroyed = Request(), False

    served, context, before = Document(), Context(), curdoc()
    served._session_context = weakref.ref(context)
    set_curdoc(served)
    # no session document of this thread's context (an earlier test in this process may have left one):
    # this test is about the process-wide fallback
    own = pn.state._curdoc.set(None)
    try:
        # what Panel would have applied: this page's query, or another served page's where a server thread of
        # this process runs a callback now (Bokeh's patched-curdoc stack is process-wide; seen in a full run)
        assert pn.state.session_args
        app = create_app("tiny", "cpu", autoload=False)
    finally:
        pn.state._curdoc.reset(own)
        set_curdoc(before)
    assert app.explorer_state.seed != 77 and find_tabs(app).active == 0
