"""The dashboard's tabs: Explore, Compare, Inspect, Sweep, Model, one package each.

Each package's `build(session) -> (TabState, viewable)` pairs its state.py (param, no Panel) with
its view.py. The TabState holds the tab's own knobs and results, registered in `session.tabs[name]`,
so the URL can carry them (`URL_PARAMS`) and tests can drive a tab without a browser.
"""
from __future__ import annotations

import importlib

MAIN_TAB = "Explore"  # always first, always in the page
TAB_NAMES = ("Compare", "Inspect", "Sweep", "Model")  # after it, each in the page only while shown


def build_tab(name: str, session):
    """(TabState, viewable) of one tab, its state registered in session.tabs[name]."""
    module = importlib.import_module(f"{__name__}.{name.lower()}")
    tab_state, view = module.build(session)
    session.tabs[name] = tab_state
    return tab_state, view
