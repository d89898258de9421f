"""The tabs' registry (tabs/__init__.py): each tab package declares one TabSpec, and one generic
build_tab / new_state / new_view makes every tab from it."""
from __future__ import annotations

import pytest

from explorer.dashboard.tabs import MAIN_TAB, TAB_NAMES, LaterView, build_tab, new_state, new_view, spec, specs
from explorer.dashboard.tabs.base import TabState
from explorer.dashboard.tabs.explore import open_session


def test_every_tab_of_the_page_has_a_spec_named_as_its_package():
    for name in (MAIN_TAB, *TAB_NAMES):
        tab = spec(name)
        assert tab.name == name and issubclass(tab.state_cls, TabState)
        assert tab.state_cls.__module__.startswith(f"explorer.dashboard.tabs.{name.lower()}.")
        assert tab.url_params == tab.state_cls.URL_PARAMS
    assert [tab.name for tab in specs()] == [MAIN_TAB, *TAB_NAMES]  # the page's order


def test_an_unknown_tab_or_state_is_refused():
    with pytest.raises(ModuleNotFoundError):
        spec("Nowhere")

    class Stray(TabState):
        pass

    with pytest.raises(ValueError, match="no tab is registered for Stray"):
        new_view(Stray.__new__(Stray))


@pytest.mark.slow
def test_build_tab_makes_each_tab_from_its_spec_and_registers_its_state(checkpoints):
    session = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    for name in TAB_NAMES:
        state, view = build_tab(name, session, lazy=True)
        assert type(state) is spec(name).state_cls and session.tabs[name] is state
        assert isinstance(view, LaterView) and view.build() is view.build()  # built once, when asked
    model = session.tabs["Model"]
    assert model.owner is None  # the spec's state_args: outside a served session nobody owns checkpoints
    state, view = build_tab("Inspect", session)  # not lazy: the view at once, drawing that state
    assert view.tab is state and session.tabs["Inspect"] is state
    assert new_state("Inspect", session) is not state and session.tabs["Inspect"] is state  # new_state registers nothing
