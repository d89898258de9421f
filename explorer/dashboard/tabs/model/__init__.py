"""The Model tab: the loaded checkpoint's metadata as a page, and training a small model live from the browser.

state.py holds the knobs, the training Task and its records (no Panel); view.py draws them; meta.py
reads a checkpoint's metadata into tables and curves.
"""
from __future__ import annotations

from ...runtime.owners import session_owner
from .. import TabSpec
from .state import ModelState


def _owner() -> dict:
    # asked for as the page is built: its user's served session is the current one then
    return {"owner": session_owner()}


SPEC = TabSpec("Model", ModelState, view="view:ModelTab", view_arg="state", state_args=_owner)
