"""The dashboard's tabs: Explore, Compare, Inspect, Sweep, Model, one package each.

Each package's __init__.py declares its TabSpec as `SPEC`: the tab's title, its state class (state.py
or a state/ package: param, no Panel) and where its view is (view.py, imported only when a page draws
the tab). The registry is the page's list of titles below, each read from its package (`spec`), so
nothing is registered at import time. `build_tab` makes state and view from the spec; `new_state(name, session)` and `new_view(state)` are the two
halves, so that a page can build a hidden tab's view only when it is first shown (build_tab(lazy=True)).
The state holds the tab's own knobs and results, registered in `session.tabs[name]`, so the URL can
carry them (the state's URL_PARAMS) and tests can drive a tab without a browser.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

MAIN_TAB = "Explore"  # always first, always in the page
TAB_NAMES = ("Compare", "Inspect", "Sweep", "Model")  # after it, each in the page only while shown


@dataclass(frozen=True)
class TabSpec:
    """One tab: `name` is its title (its package is tabs/<name.lower()>/); `state_cls` its TabState;
    `view` where its view is, "<module>:<callable>" in the tab's package, called with the state as the
    keyword `view_arg` (positionally when None); `state_args()` any further arguments of the state,
    asked for when a state is made (Model's: the user whose checkpoints it shows)."""

    name: str
    state_cls: type
    view: str
    view_arg: str | None = "tab"
    state_args: Callable[[], dict] | None = None

    @property
    def url_params(self) -> tuple[str, ...]:
        """The knobs a link carries for this tab, as `<tab>.<param>=value`."""
        return self.state_cls.URL_PARAMS

    def make_view(self, state):
        """The view of `state`; its module is imported here, not with the spec: importing a state
        (tests, scripts, the layering check) must not load Panel and Bokeh."""
        module, attr = self.view.split(":")
        make = getattr(importlib.import_module(f"{__name__}.{self.name.lower()}.{module}"), attr)
        return make(**{self.view_arg: state}) if self.view_arg else make(state)


def spec(name: str) -> TabSpec:
    """The spec of tab `name`: its package's SPEC (ModuleNotFoundError for a tab that does not exist)."""
    tab = importlib.import_module(f"{__name__}.{name.lower()}").SPEC
    if tab.name != name:
        raise ValueError(f"tabs/{name.lower()}/ declares the tab {tab.name!r}, not {name!r}")
    return tab


def specs() -> list[TabSpec]:
    """Every tab's spec, in the page's order."""
    return [spec(name) for name in (MAIN_TAB, *TAB_NAMES)]


def new_state(name: str, session, **params):
    """A new state of tab `name` for `session` (not registered in session.tabs: build_tab does that)."""
    tab = spec(name)
    return tab.state_cls(session, **(tab.state_args() if tab.state_args else {}), **params)


def new_view(state):
    """The view of a tab's `state`, found by the state's class."""
    for tab in specs():
        if type(state) is tab.state_cls:
            return tab.make_view(state)
    raise ValueError(f"no tab is registered for {type(state).__name__}")


def build(name: str, session):
    """(state, view) of tab `name` for `session`."""
    state = new_state(name, session)
    return state, spec(name).make_view(state)


def build_tab(name: str, session, *, lazy: bool = False):
    """(TabState, viewable) of one tab, its state registered in session.tabs[name]. lazy: the view is
    a LaterView, built when first asked for (a page's hidden tabs: building all five views took 1 s
    of server time for every page opened, 0.3 s of it Compare's five heatmaps)."""
    if lazy:
        tab_state = new_state(name, session)
        view = LaterView(spec(name).make_view, tab_state)  # by its name: the page's tabs need not be TAB_NAMES
    else:
        tab_state, view = build(name, session)
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
