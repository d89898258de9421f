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
    """(InspectState, its view) for the browser session."""
    # Imported here, not at the top: importing the package (and so .state) must not load Panel.
    from .view import InspectView

    tab = InspectState(session)
    return tab, InspectView(tab=tab)
