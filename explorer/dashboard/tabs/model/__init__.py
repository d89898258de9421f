"""The Model tab: the loaded checkpoint's metadata as a page, and training a small model live from the browser.

state.py holds the knobs, the training Task and its records (no Panel); view.py draws them; meta.py
reads a checkpoint's metadata into tables and curves.
"""
from __future__ import annotations


def build(session):
    """(ModelState, its view) for the app's tab list."""
    state = new_state(session)
    return state, new_view(state)


def new_state(session):
    # Imported here, not at the top: Python runs this file before any submodule, so a top-level import
    # of the view would load Panel and Bokeh for everything that imports only .state or .meta.
    from ...runtime.owners import session_owner
    from .state import ModelState

    return ModelState(session, owner=session_owner())  # built with the page: its user's session is current


def new_view(state):
    """The tab's view of `state`; apart from build() so that a page builds it only when the tab is shown."""
    from .view import ModelTab

    return ModelTab(state=state)
