"""The Sweep tab (issue 6): its state (state.py, no Panel) paired with its view (view.py).

Quality and speed vs steps for any set of strategies / schedules / temperatures / thresholds with the AR
baseline, seed 000's quality grid and seed 001's temperature comparison; on the server's Dask cluster
when it was started with `serve --scheduler`.
"""
from __future__ import annotations

from .. import TabSpec
from .state import SweepTabState

SPEC = TabSpec("Sweep", SweepTabState, view="view:SweepTabView")
