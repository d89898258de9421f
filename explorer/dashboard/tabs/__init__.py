"""The dashboard's tabs: Explore, Compare, Inspect, Sweep, Model, one package each.

Each package's `build(session) -> (TabState, viewable)` pairs its state.py (param, no Panel) with
its view.py; `new_state(session)` and `new_view(state)` are the two halves, so that a page can build a
hidden tab's view only when it is first shown (build_tab(lazy=True)). The TabState holds the tab's
own knobs and results, registered in `session.tabs[name]`,
so the URL can carry them (`URL_PARAMS`) and tests can drive a tab without a browser.
"""
from __future__ import annotations

import importlib

MAIN_TAB = "Explore"  # always first, always in the page
TAB_NAMES = ("Compare", "Inspect", "Sweep", "Model")  # after it, each in the page only while shown


def build_tab(name: str, session, *, lazy: bool = False):
    """(TabState, viewable) of one tab, its state registered in session.tabs[name]. lazy: the view is
    a LaterView, built when first asked for (a page's hidden tabs: building all five views took 1 s
    of server time for every page opened, 0.3 s of it Compare's five heatmaps)."""
    module = importlib.import_module(f"{__name__}.{name.lower()}")
    if lazy:
        tab_state = module.new_state(session)
        view = LaterView(module.new_view, tab_state)
    else:
        tab_state, view = module.build(session)
    session.tabs[name] = tab_state
    return tab_state, view


class LaterView:
    """A tab's view not built yet: `build()` builds it (once) from the tab's state as it is then."""

    def __init__(self, make, tab_state):
        self._make, self._state, self._view = make, tab_state, None

    def build(self):
        if self._view is None:
            self._view = self._make(self._state)
        return self._view
