"""The Inspect tab (seeds 002, 003, 004): the model's view of masked text, live; build() pairs its state and view.

- Forward process: a text masked at ratio t (a slider; the mask is drawn from `mask_seed`, so a shared
  link shows the same mask) and the mask-fraction check: the fraction masked vs t over many draws
  (expected: y = t). Both are cheap and drawn on the UI thread, so they follow the slider at once.
- Predictions at t: the model's top-k candidates at each masked position, coloured correct / wrong
  (Okabe-Ito blue / vermillion, and solid / dashed outline: not hue alone), probability as intensity.
- On validation data: accuracy and mean confidence vs t, and the mean per-position confidence at t.

Files: masking.py (the text shown and its mask), state.py (knobs and Tasks, no Panel), markup.py (the
text views' HTML), plots.py (HoloViews figures), view.py (the Panel layout).
"""
from __future__ import annotations

from .state import InspectState


def build(session):
    """(InspectState, its view) of one browser session (tabs.build_tab registers the state)."""
    state = new_state(session)
    return state, new_view(state)


def new_state(session):
    return InspectState(session)


def new_view(state):
    """The tab's view of `state`; apart from build() so that a page builds it only when the tab is shown."""
    # imported here, not above: importing the state (tests, scripts, the layering check) must not load
    # Panel and Bokeh, and Python runs this file before state.py whenever state.py is imported
    from .view import InspectView

    return InspectView(tab=state)
