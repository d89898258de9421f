"""The Explore tab: the session's run live (heatmap, scrubber, text), per-position confidence and
quality vs steps beside it, and the downloads; `build` pairs its state with its view."""
from __future__ import annotations

from .state import ExploreState


def build(session):
    """(ExploreState, viewable) of the Explore tab of `session`."""
    state = new_state(session)
    return state, new_view(state)


def new_state(session):
    return ExploreState(session)


def new_view(state):
    """The tab's view of `state` (Panel is imported only when a page is built: tests drive the state alone)."""
    from .view import explore_view

    return explore_view(state)


def open_session(checkpoint: str | None = None, device: str = "auto", *, dispatch=None, fallback=None, **params):
    """A Session with its Explore state and no page (scripts, notebooks, tests): `params` that are
    session knobs go to the session, the rest to the Explore state (auto_run, sweep_auto ...)."""
    from ...runtime.dispatch import call_now
    from ...session import Session

    knobs = {k: params.pop(k) for k in list(params) if k in Session.param}
    session = Session(checkpoint, device, dispatch or call_now, fallback=fallback, **knobs)
    session.tabs["Explore"] = ExploreState(session, **params)
    return session
