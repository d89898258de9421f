"""The Explore tab's page: heatmap, scrubber and text on the left; per-position confidence and quality
vs steps on the right; each side's downloads below it. The sidebar (controls.py) drives it."""
from __future__ import annotations

import panel as pn

from ...ui.base import flex_item, side_by_side
from .confidence import ConfidenceView
from .controls import ControlsView
from .downloads import DownloadsView
from .heatmap import HeatmapView
from .quality import QualityView
from .samples import SamplesView
from .scrubber import ScrubberView
from .text import TextView

__all__ = ["ConfidenceView", "ControlsView", "DownloadsView", "HeatmapView", "QualityView", "SamplesView",
           "ScrubberView", "TextView", "explore_view"]


def explore_view(state):
    """The tab's layout for an ExploreState (the sidebar is built by the app: ControlsView)."""
    # the several samples (seeds, prompts) right under the run's text: the one view of the showcases
    left = pn.Column(HeatmapView(state=state), ScrubberView(state=state), TextView(state=state),
                     SamplesView(state=state), DownloadsView(state=state, part="run"), sizing_mode="stretch_width",
                     styles=flex_item(3, 480))
    right = pn.Column(pn.pane.HTML("<b>Per-position confidence</b>", margin=(0, 10)), ConfidenceView(state=state),
                      QualityView(state=state), DownloadsView(state=state, part="sweep"),
                      sizing_mode="stretch_width", styles=flex_item(2, 380))
    # where the two columns' minimum widths do not fit (a 1024-pixel projector, the sidebar open) the
    # right column moves under the left one instead of being cut off past the window's edge
    return side_by_side(left, right)
