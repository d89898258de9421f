"""The Sweep tab: its state (state.py, no Panel) paired with its view (view.py).

Quality and speed vs steps for any set of strategies / schedules / temperatures / thresholds with the AR
baseline, the quality grid of "Sampling Strategies & Speed Tradeoffs" and the temperature comparison of
"Generation: Iterative Unmasking"; on the server's Dask cluster
when it was started with `serve --scheduler`.
"""
from __future__ import annotations

from .. import TabSpec
from .state import SweepTabState

SPEC = TabSpec("Sweep", SweepTabState, view="view:SweepTabView")
