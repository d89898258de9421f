"""The Model tab: the loaded checkpoint's metadata as a page, and training a small model live from the browser.

state.py holds the knobs, the training Task and its records (no Panel); view.py draws them; meta.py
reads a checkpoint's metadata into tables and curves.
"""
from __future__ import annotations


def build(session):
    """(ModelState, its view) for the app's tab list."""
    # Imported here, not at the top: Python runs this file before any submodule, so a top-level import
    # of the view would load Panel and Bokeh for everything that imports only .state or .meta.
    from .state import ModelState
    from .view import ModelTab

    state = ModelState(session)
    return state, ModelTab(state=state)
