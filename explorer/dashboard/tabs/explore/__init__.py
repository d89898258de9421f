"""The Explore tab: the session's run live (heatmap, scrubber, text), per-position confidence and
quality vs steps beside it, several samples (seeds, prompts) at once, and the downloads.

state/ holds its state, one module per part (no Panel); the view modules draw it (view.py lays them out).
"""
from __future__ import annotations

from .. import TabSpec
from .state import ExploreState

SPEC = TabSpec("Explore", ExploreState, view="view:explore_view", view_arg=None)


def open_session(checkpoint: str | None = None, device: str = "auto", *, dispatch=None, fallback=None, **params):
    """A Session with its Explore state and no page (scripts, notebooks, tests): `params` that are
    session knobs go to the session, the rest to the Explore state (auto_run, sweep_auto ...).

    Returns the Session; its Explore state is `session.tabs["Explore"]`."""
    from ...runtime.dispatch import call_now
    from ...session import Session

    knobs = {k: params.pop(k) for k in list(params) if k in Session.param}
    session = Session(checkpoint, device, dispatch or call_now, fallback=fallback, **knobs)
    session.tabs["Explore"] = ExploreState(session, **params)
    return session
