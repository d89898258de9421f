"""Step scrubber with play / pause: replays a run (or follows a live one) through `state.step`."""
from __future__ import annotations

import panel as pn
import param

from ...ui.base import StateView


class ScrubberView(StateView):
    """A Player widget on `state.step`; its range grows with the rows received."""

    def __init__(self, **params):
        super().__init__(**params)
        self.player = pn.widgets.Player.from_param(
            self.state.param.step, start=0, end=1, interval=250, loop_policy="once", show_loop_controls=False,
            show_value=False, sizing_mode="stretch_width", height=60, scale_buttons=0.8, margin=(0, 10))
        # Panel's Player view sets its slider's range only when its value changes (panel/models/player.ts,
        # update_value): a run that ended before its planned steps kept its value and shrank the range, and
        # the handle of its last step stayed a third of the way along a slider to the planned steps
        self.player.jscallback(end="const view = Bokeh.index.find_one(cb_obj); if (view != null) view.update_value()")
        self._resize()
        self._buttons()
        self.on(self.state.session, "presentation", self._buttons)

    def _buttons(self):
        """Play / step buttons a class can see from the back in presentation mode (0.8 is laptop size)."""
        big = self.state.session.presentation
        self.player.param.update(scale_buttons=1.5 if big else 0.8, height=90 if big else 60)

    @param.depends("state.run_id", "state.n_rows", "state.running", watch=True)
    def _resize(self):
        """Sized once per run from the rows it will produce (a widget update costs ~3 ms, too much to
        repeat every step); corrected when the run ends or outgrows the estimate."""
        frames = self.state.frames
        if frames is None:
            return
        rows = frames.planned_rows if self.state.running else frames.n_rows
        end = max(rows - 1, 1)
        if end != self.player.end or not self.state.running:
            # Set together: a value beyond the old end would be clamped by the browser widget.
            self.player.param.update(end=end, value=min(self.state.step, end))

    def __panel__(self):
        return self.player
