"""The dashboard's tabs after Explore (issue 6): Compare, Inspect, Sweep, Model.

Each module here defines `build(state) -> (TabState, viewable)`. Its TabState holds the tab's own
knobs (a param.Parameterized owned by the session's ExplorerState, in `state.tabs[name]`), so the
URL can carry them (`URL_PARAMS`) and tests can drive a tab without a browser.
"""
from __future__ import annotations

import importlib

TAB_NAMES = ("Compare", "Inspect", "Sweep", "Model")


def build_tab(name: str, state):
    """(TabState, viewable) of one tab, its state registered in state.tabs[name]."""
    module = importlib.import_module(f"{__name__}.{name.lower()}")
    tab_state, view = module.build(state)
    state.tabs[name] = tab_state
    return tab_state, view
