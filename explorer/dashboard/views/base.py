"""What every view shares: the state it draws, pushing raw Bokeh changes in a notebook, throttling."""
from __future__ import annotations

import time

import panel as pn
import param

from ..state import ExplorerState


class StateView(pn.viewable.Viewer):
    """A view of one ExplorerState; subclasses build their layout once in __init__."""

    state = param.ClassSelector(class_=ExplorerState, doc="The dashboard state this view draws")

    def push(self, *panes) -> None:
        """Raw Bokeh model changes reach a notebook only when pushed; a server session syncs them
        itself (this runs inside a document callback there)."""
        doc = pn.state.curdoc
        if doc is None or doc.session_context is None:
            pn.io.push_notebook(*panes)



class Throttle:
    """Lets a view redraw at most every `interval` seconds while a run streams in.

    The heatmap takes every step; the text and the bars are redrawn at most ~7 times a second during
    a run (each redraw costs the browser a layout and a repaint, which on a busy CPU slows the
    sampler itself), and always once more when the run ends."""

    def __init__(self, interval: float = 0.15):
        self.interval = interval
        self._last = 0.0

    def due(self, running: bool) -> bool:
        now = time.monotonic()
        if running and now - self._last < self.interval:
            return False
        self._last = now
        return True
