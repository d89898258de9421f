"""Explore's views, each a pn.viewable.Viewer drawing the session's Explore state."""
from ...ui.controls import ControlsView
from ...ui.header import HeaderView
from .confidence import ConfidenceView
from .downloads import DownloadsView
from .heatmap import HeatmapView
from .quality import QualityView
from .scrubber import ScrubberView
from .text import TextView

__all__ = ["ConfidenceView", "ControlsView", "DownloadsView", "HeaderView", "HeatmapView", "QualityView",
           "ScrubberView", "TextView"]
