"""The Compare tab: 2-4 sampler configurations side by side on one seed and template (issue 6).

state.py holds the columns and their run (no Panel); view.py draws them; build() pairs the two.
"""
from __future__ import annotations

from .state import CompareState


def build(session):
    """(CompareState, CompareView) of one browser session."""
    # imported here, not above: importing the state (tests, scripts, the layering check) must not
    # load Panel and Bokeh, and Python runs this file before state.py whenever state.py is imported
    from .view import CompareView

    tab = CompareState(session)
    return tab, CompareView(tab=tab)
