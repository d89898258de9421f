"""One pn.viewable.Viewer per panel of the dashboard; each draws an ExplorerState."""
from .confidence import ConfidenceView
from .controls import ControlsView
from .header import HeaderView
from .heatmap import HeatmapView
from .quality import QualityView
from .scrubber import ScrubberView
from .text import TextView

__all__ = ["ConfidenceView", "ControlsView", "HeaderView", "HeatmapView", "QualityView", "ScrubberView",
           "TextView"]
