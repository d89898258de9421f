"""The Compare tab: 2-4 sampler configurations side by side on one seed and template (issue 6).

state.py holds the columns and their run (no Panel); view.py draws them; build() pairs the two.
"""
from __future__ import annotations

from .state import CompareState


def build(session):
    """(CompareState, its view) of one browser session (tabs.build_tab registers the state)."""
    state = new_state(session)
    return state, new_view(state)


def new_state(session):
    return CompareState(session)


def new_view(state):
    """The tab's view of `state`; apart from build() so that a page builds it only when the tab is shown."""
    # imported here, not above: importing the state (tests, scripts, the layering check) must not load
    # Panel and Bokeh, and Python runs this file before state.py whenever state.py is imported
    from .view import CompareView

    return CompareView(tab=state)
