"""The Inspect tab (the figures of "Training with the ELBO", "The Forward Process" and the guide "Let's Build a
Diffusion LM"): the model's view of masked text, live; its spec pairs its state and view.

- Forward process: a text masked at ratio t (a slider; the mask is drawn from `mask_seed`, so a shared
  link shows the same mask) and the mask-fraction check: the fraction masked vs t over many draws
  (expected: y = t). Both are cheap and drawn on the UI thread, so they follow the slider at once.
- Predictions at t: the model's top-k candidates at each masked position, coloured correct / wrong
  (Okabe-Ito blue / vermillion, and solid / dashed outline: not hue alone), probability as intensity.
- On validation data: accuracy and mean confidence vs t, and the mean per-position confidence at t.

Files: masking.py (the text shown and its mask), state/ (knobs, and one sub-state per background Task;
no Panel), markup.py (the text views' HTML), plots.py (HoloViews figures), view.py (the Panel layout).
"""
from __future__ import annotations

from .. import TabSpec
from .state import InspectState

SPEC = TabSpec("Inspect", InspectState, view="view:InspectView")
