"""The Sweep tab (issue 6): its state (state.py, no Panel) paired with its view (view.py).

Quality and speed vs steps for any set of strategies / schedules / temperatures / thresholds with the AR
baseline, seed 000's quality grid and seed 001's temperature comparison; on the server's Dask cluster
when it was started with `serve --scheduler`.
"""
from __future__ import annotations

from .state import SweepTabState


def build(session):
    """(SweepTabState, its view) of one browser session (tabs.build_tab registers the state)."""
    state = new_state(session)
    return state, new_view(state)


def new_state(session):
    return SweepTabState(session)


def new_view(state):
    """The tab's view of `state`; apart from build() so that a page builds it only when the tab is shown."""
    # imported here, not above: importing the state (tests, scripts, the layering check) must not load
    # Panel and Bokeh, and Python runs this file before state.py whenever state.py is imported
    from .view import SweepTabView

    return SweepTabView(tab=state)
