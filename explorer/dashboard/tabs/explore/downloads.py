"""Download buttons of the Explore tab: the last run (trajectory JSON / CSV, heatmap PNG / HTML) and
the quality-vs-steps sweep (plot PNG / HTML, table CSV).

Files are made from the finished results (state.trajectory, state.quality.result) only when a button
is clicked (downloads.py), never from the live views: a figure is rebuilt here from the Trajectory,
so making it on a worker thread never touches the session's document.
"""
from __future__ import annotations

import panel as pn
import param

from ....experiments import pick_metric
from ... import downloads
from ...ui.base import StateView
from ...ui.heatmap import heatmap_figure


class DownloadsView(StateView):
    """The last run's files ('run') or the sweep's ('sweep'); a button is greyed out until there is
    something to download, and a failed one says why on itself."""

    part = param.Selector(default="run", objects=["run", "sweep"])

    def __init__(self, **params):
        super().__init__(**params)
        make = self._run_files() if self.part == "run" else self._sweep_files()
        # no fixed width: at projector type the labels grow past 150 px
        self.buttons = [downloads.download_button(label, filename, fn, session=self.state.session, margin=(2, 4))
                        for label, filename, fn in make]
        self._names = [filename for _, filename, _ in make]  # prefixed with the checkpoint and seed
        self._available()
        self.on(self.state.quality, "result", self._available)

    def _stem(self) -> str:
        traj = self.state.trajectory
        s = self.state.session
        return f"{s.checkpoint or 'run'}-seed{s.seed if traj is None else traj.seed}"

    def _run_files(self):
        return [("Trajectory JSON", "trajectory.json", lambda: downloads.trajectory_json(*self._run())),
                ("Trajectory CSV", "trajectory.csv", lambda: downloads.trajectory_csv(*self._run())),
                ("Heatmap PNG", "heatmap.png", lambda: downloads.plot_png(heatmap_figure(*self._run(), toolbar=False))),
                ("Heatmap HTML", "heatmap.html",
                 lambda: downloads.plot_html(heatmap_figure(*self._run()), "trajectory heatmap"))]

    def _sweep_files(self):
        return [("Quality PNG", "quality.png", lambda: downloads.plot_png(self._quality_plot())),
                ("Quality HTML", "quality.html", lambda: downloads.plot_html(self._quality_plot(), "quality vs steps")),
                ("Sweep CSV", "sweep.csv", lambda: downloads.table_csv(self._sweep()[1]))]

    def _run(self):
        """The finished run and its tokenizer (read once, so a new run mid-export cannot mix in)."""
        traj = self.state.trajectory
        if traj is None:
            raise ValueError("no finished run yet: press Run")
        tok = traj.tokenizer or getattr(self.state.session.model, "tokenizer", None)
        return traj, tok

    def _sweep(self):
        result = self.state.quality.result
        if result is None:
            raise ValueError("no quality-vs-steps sweep yet: press Compute")
        return result

    def _quality_plot(self):
        from ....plots import quality_speed_plot
        from ...ui.legend import short_stars

        summary = self._sweep()[1]
        metric = pick_metric(summary, self.state.sweep_metric)
        if metric is None:
            raise ValueError("the sweep measured no quality metric")
        # the stars' short name: the rule in words made the legend at the right half the figure's width,
        # squeezing the curves into a third (below the plot, bokeh cut the legend's last row)
        return short_stars(quality_speed_plot(summary, metric, x=self.state.sweep_x, width=1000, height=480))

    @param.depends("state.trajectory", watch=True)
    def _available(self):
        ready = (self.state.trajectory if self.part == "run" else self.state.quality.result) is not None
        stem = self._stem() if self.part == "run" else f"{self.state.session.checkpoint or 'sweep'}-{self.state.sweep_x}"
        for button, name in zip(self.buttons, self._names):
            if button.label != button.handler.label:
                button.handler.show("")  # a new result: an old failure no longer applies
            wanted = {"disabled": not ready, "filename": f"{stem}-{name}"}
            # Only what changed: each widget update is restyled and sent to the page, and this runs
            # twice per run (start, end) for both button rows.
            changed = {k: v for k, v in wanted.items() if getattr(button, k) != v}
            if changed:
                button.param.update(**changed)

    def __panel__(self):
        title = "Download this run" if self.part == "run" else "Download the sweep"
        return pn.Column(pn.pane.HTML(f"<b>{title}</b>", margin=(0, 10)), pn.FlexBox(*self.buttons),
                         sizing_mode="stretch_width", css_classes=[f"downloads-{self.part}"])
