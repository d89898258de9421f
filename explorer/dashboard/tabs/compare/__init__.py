"""The Compare tab: 2-4 sampler configurations side by side on one seed and template.

state.py holds the columns and their run (no Panel); view.py draws them; the spec below pairs the two.
"""
from __future__ import annotations

from .. import TabSpec
from .state import CompareState

SPEC = TabSpec("Compare", CompareState, view="view:CompareView")
