"""The Model tab's view: the checkpoint page (metadata tables, stored curves, LR schedule) and the live training panel.

Every Bokeh source and figure of the tab lives here, filled from ModelState's metadata, numpy columns and
record lists. After a figure is made, every change to its Bokeh models goes through one path,
`ModelView.later`: the session's dispatch, which runs it on the document's event loop holding the
document lock. Param watchers fire wherever the change came from, and Panel processes some button
clicks (the Start button's, when a text input's change is still pending) without that lock: a raw
Bokeh change there raised "_pending_writes should be non-None" and the live curve never drew. Panel
widgets and panes lock themselves and are set directly. Colours are Okabe-Ito; train, val and LR
also differ by dash and width.
"""
from __future__ import annotations

import numpy as np
import panel as pn
import param
from bokeh.models import ColorBar, ColumnDataSource, CustomJSTickFormatter, HoverTool, LinearColorMapper, Range1d
from bokeh.palettes import RdBu11, interp_palette
from bokeh.plotting import figure

from ....names import LR_SCHEDULES
from ...downloads import download_button, table_csv
from ...ui.base import apply_fonts, figure_pane, flex_item, notice, rule, show_notice, side_by_side, watch_presentation
from ...ui.palette import EARLIER_COLORS, LR_COLOR, PLAN_COLOR, TRAIN_COLOR, VAL_COLOR
from ...ui.safe import literal
from ....hf import is_hf_meta
from .meta import (
    pattern_examples,
    time_embedding,
    curves_frame,
    ema,
    schedule_columns,
    smallest_period,
    stored_config,
    stored_curves,
    summary_sections,
)
from ... import checkpoints
from .state import OFF_TEXT, PRESETS, ModelState

def command_html(command: str) -> str:
    """A training command as HTML that wraps between its arguments: each argument kept whole (the browser
    broke '--max-minutes' after its hyphens, and '--resume' between them), but one longer than a line."""
    return " ".join(literal(arg) if len(arg) > 40 else f'<span class="arg">{literal(arg)}</span>'
                    for arg in command.split(" "))


PRESET_LABELS = {"patterns": "patterns (tiny model, ~1-2 min)", "shakespeare": "Shakespeare (small model, ~3 min)"}
PAGE_CSS = """
.meta-table { border-collapse: collapse; width: 100%; font-size: 0.92em; }
.meta-table th { text-align: left; font-weight: 600; padding: 2px 16px 2px 0; white-space: nowrap; width: 1%;
                 vertical-align: top; color: #333; }
.meta-table td { padding: 2px 0; overflow-wrap: anywhere; }  /* the vocabulary is one 65-character word */
.meta-commands code { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.85em; }
.meta-commands .arg { white-space: nowrap; }  /* a flag or value whole (command_html) */
h3 { font-size: 1.05em; font-weight: bold; margin: 12px 0 4px 0; }  /* as every heading (ui.base.HEADING_CSS) */
"""


def empty_loss() -> dict:
    """Columns of an empty loss source (new lists each time: stream() extends a source's lists in place)."""
    return {"step": [], "loss": [], "smooth": []}


def empty_lr() -> dict:
    return {"step": [], "lr": []}


def _table(rows) -> str:
    body = "".join(f"<tr><th>{literal(k)}</th><td>{literal(v)}</td></tr>" for k, v in rows)
    return f"<table class='meta-table'>{body}</table>"


def summary_html(meta: dict, name: str, preview: tuple | None = None) -> str:
    """The metadata page: one table per section (with the corpus's size, split and first characters when
    its text is on this server: `preview`, see checkpoints.corpus_preview; a patterns model's examples),
    then the commands that made the checkpoint."""
    parts = [f"<h3>{literal(title)}</h3>{_table(rows)}" for title, rows in summary_sections(meta, name).items()]
    if preview is not None:
        total, head, n_train, n_val = preview
        parts.append(f"<p class='caption'>The corpus: {total:,} characters, split into {n_train:,} for training "
                     f"and the last {n_val:,} held out for validation; the first {len(head)}:</p>"
                     f"<pre class='corpus-head'>{literal(head)}</pre>")
    examples = pattern_examples(meta)
    if examples:
        # the period each row shows: a pattern draws its 2-6 symbols with repeats, so one may be a single symbol
        rows = "\n".join(f"{row}  period {smallest_period(row)}" for row in examples)
        parts.append("<p class='caption'>Five training sequences (each step draws fresh ones; these with seed 0), "
                     "each a pattern of 2–6 random symbols, tiled. The symbols are drawn with repeats, so a row's "
                     "period, shown after it, can be shorter:</p>"
                     f"<pre class='corpus-head pattern-examples'>{literal(rows)}</pre>")
    commands = meta.get("commands") or []
    if commands:
        items = "".join(f"<li><code>{command_html(c)}</code></li>" for c in commands)
        parts.append(f"<h3>Commands</h3><ol class='meta-commands'>{items}</ol><p class='caption'>As run. "
                     "<code>--data FILE</code> is the training text: a shipped checkpoint names the file alone "
                     "(run from the folder that holds it), or leave it out (Tiny Shakespeare is downloaded once, "
                     "hash-checked). "
                     "Validation is the NELBO of held-out full-length windows with fixed noise; the training "
                     "loss is one batch's, short canvases included, so the two curves need not meet.</p>")
    return "".join(parts)


def curves_csv(meta: dict) -> str:
    """The stored curves download (step, split, loss)."""
    return table_csv(curves_frame(meta))


def loss_figure(title: str, height: int = 300, prefix: str = "live"):
    """(figure, train source, val source): raw train loss faint, its EMA bold, val dashed with dots.
    The sources are named <prefix>-train / <prefix>-val (what browser tests read)."""
    fig = figure(title=title, height=height, sizing_mode="stretch_width", x_axis_label="step",
                 y_axis_label="loss (nats/char)", tools="pan,box_zoom,wheel_zoom,reset,save", toolbar_location="above")
    train = ColumnDataSource(empty_loss(), name=f"{prefix}-train")
    val = ColumnDataSource({"step": [], "loss": []}, name=f"{prefix}-val")
    fig.line("step", "loss", source=train, color=TRAIN_COLOR, alpha=0.25, line_width=1)
    smooth = fig.line("step", "smooth", source=train, color=TRAIN_COLOR, line_width=2.5, legend_label="train (smoothed)")
    line = fig.line("step", "loss", source=val, color=VAL_COLOR, line_width=2, line_dash="dashed", legend_label="validation")
    fig.scatter("step", "loss", source=val, color=VAL_COLOR, size=6, marker="circle", legend_label="validation")
    fig.add_tools(HoverTool(renderers=[smooth, line], tooltips=[("step", "@step"), ("loss", "@loss{0.000}")]))
    fig.legend.location = "top_right"
    return fig, train, val


def empty_lines() -> dict:
    return {"xs": [], "ys": [], "label": [], "color": []}


def earlier_lines(fig, name: str, dash: str):
    """A source of several curves (one per earlier run, each in its colour and named in the legend)."""
    src = ColumnDataSource(empty_lines(), name=name)
    fig.multi_line("xs", "ys", source=src, color="color", line_width=2, line_dash=dash, alpha=0.9,
                   legend_field="label")
    return src


def earlier_columns(runs: list[dict], key: str, smooth: bool) -> dict:
    """multi_line columns of the earlier runs' `key` points (train losses smoothed as the live curve is)."""
    cols = empty_lines()
    for i, run in enumerate(runs):
        if not run[key]:
            continue
        steps, values = (list(c) for c in zip(*run[key]))
        cols["xs"].append(steps)
        cols["ys"].append(list(ema(values)) if smooth else values)
        cols["label"].append(f"earlier: {run['label']}")
        cols["color"].append(EARLIER_COLORS[i % len(EARLIER_COLORS)])
    return cols


# A learning-rate tick as its leading digits and power of ten: 5e-4, 2.5e-4, 0
LR_TICK = """
if (tick === 0) return "0";
const e = Math.floor(Math.log10(Math.abs(tick)) + 1e-9);
const m = Math.round(tick / Math.pow(10, e) * 10) / 10;
return `${m}e${e}`;
"""


def lr_figure(title: str, height: int = 220, prefix: str = "live"):
    """(figure, planned source, actual source): the schedule's curve (grey dashed) and the LR used so far."""
    fig = figure(title=title, height=height, sizing_mode="stretch_width", x_axis_label="step",
                 y_axis_label="learning rate", tools="pan,box_zoom,reset,save", toolbar_location="above")
    plan = ColumnDataSource(empty_lr(), name=f"{prefix}-lr-plan")
    used = ColumnDataSource(empty_lr(), name=f"{prefix}-lr-used")
    fig.line("step", "lr", source=plan, color=PLAN_COLOR, line_width=2, line_dash="dashed", legend_label="schedule")
    used_line = fig.line("step", "lr", source=used, color=LR_COLOR, line_width=3, legend_label="used so far")
    fig.add_tools(HoverTool(renderers=[used_line], tooltips=[("step", "@step"), ("lr", "@lr{0.00e0}")]))
    # "5e-4", not Bokeh's "5.000e-4": learning rates read as their leading digit and power
    fig.yaxis.formatter = CustomJSTickFormatter(code=LR_TICK)
    fig.legend.location = "top_right"
    return fig, plan, used


class ModelView(pn.viewable.Viewer):
    """A part of the Model tab: its figures follow the session's type size, and `later` is the one way
    it changes a Bokeh model once the figure exists (module docstring)."""

    state = param.ClassSelector(class_=ModelState)

    def later(self, draw) -> None:
        """Run `draw` (which changes Bokeh models) on the UI thread holding the document: at once
        outside a server, on the session's event loop in one (ModelState.dispatch)."""
        self.state.dispatch(draw)

    def follow_fonts(self, figures, panes) -> None:
        """Presentation mode: the panes (Panel, safe anywhere) now and on change; the figures via `later`."""
        session = self.state.session
        watch_presentation(session, (), panes)

        def fonts():
            for fig in figures:
                apply_fonts(fig, session.presentation)

        fonts()  # made just now, in no document yet: safe to style here
        session.param.watch(lambda event: self.later(fonts), "presentation")


def time_embedding_title(dim: int, used: bool, presentation: bool = False) -> str:
    """The time embedding figure's title: its width `dim` and whether this model feeds it to its blocks
    (`used`), short at projector type (the whole title ran past the figure)."""
    if presentation:
        return f"Time embedding, {dim} dims ({'adaLN' if used else 'unused'})"
    # short enough for the figure's half of a 1366-pixel page (the longer one ran past its edge)
    return f"Sinusoidal time embedding, {dim} dims: {'fed to every block (adaLN)' if used else 'not used by this model'}"


class TimeEmbeddingFigure:
    """The heatmap of the sinusoidal time embedding in the guide "Let's Build a Diffusion LM" (t down, embedding
    dimension across), at this model's width: a Bokeh figure made once, a new model drawn into it (new
    image, ranges and title), as the page's other figures are."""

    def __init__(self):
        self.source = ColumnDataSource({"image": [], "dw": [], "dh": []})
        self.figure = p = figure(height=240, sizing_mode="stretch_width", toolbar_location=None, tools="",
                                 x_range=Range1d(0, 1), y_range=Range1d(1, 0),  # t = 0 at the top
                                 x_axis_label="embedding dimension", y_axis_label="time t")
        mapper = LinearColorMapper(palette=interp_palette(RdBu11[::-1], 255), low=-1, high=1)  # -1 red, +1 blue
        image = p.image(image="image", x=0, y=0, dw="dw", dh="dh", source=self.source, color_mapper=mapper)
        p.add_layout(ColorBar(color_mapper=mapper, width=10), "right")
        p.add_tools(HoverTool(renderers=[image], tooltips=[("dimension", "$x{0}"), ("t", "$y{0.00}"),
                                                           ("value", "@image{0.000}")]))
        p.grid.visible = False
        self._meta, self._title_args = None, (0, False)  # the model drawn, and its (width, time conditioned)

    def draw(self, meta: dict, presentation: bool = False) -> TimeEmbeddingFigure:
        """`meta`: the checkpoint's metadata (its width and time conditioning); the image again only for
        another model."""
        if meta is not self._meta:
            _, emb, dim, used = time_embedding(meta)
            self.source.data = {"image": [emb.astype(np.float32)], "dw": [dim], "dh": [1.0]}
            self.figure.x_range.update(start=0, end=dim)
            self._meta, self._title_args = meta, (dim, used)
        self.figure.title.text = time_embedding_title(*self._title_args, presentation)
        apply_fonts(self.figure, presentation)
        return self


class CheckpointPage(ModelView):
    """The session model's metadata: tables on the left, its stored curves and LR schedule on the right."""

    def __init__(self, **params):
        super().__init__(**params)
        self.summary = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[PAGE_CSS],
                                    css_classes=["model-summary"])
        # Figures made once; a new model only changes their data and titles (a new Bokeh model per
        # checkpoint would be heavier, and Panel links its loading.css from the CDN for one).
        self.curves_fig, self.train_src, self.val_src = loss_figure("Loss during training", prefix="stored")
        self.lr_fig, self.plan_src, self.used_src = lr_figure("Learning-rate schedule", height=200, prefix="stored")
        self.curves = figure_pane(self.curves_fig, "model-curves")
        self.schedule = pn.pane.Bokeh(self.lr_fig, sizing_mode="stretch_width")
        self.csv = download_button("Curves (CSV)", "curves.csv", lambda: curves_csv(self.state.meta),
                                   session=self.state.session)
        self.time_figure = TimeEmbeddingFigure()
        # shown once there is a model; hidden is the column's: a Bokeh pane's own `visible` makes Panel
        # sync the figure's stylesheets back into the pane, which refuses Bokeh's stylesheet objects
        self.time_emb = pn.Column(figure_pane(self.time_figure.figure, "model-time-embedding"),
                                  sizing_mode="stretch_width", visible=False)
        # a Hugging Face model was trained elsewhere: no curves, schedule or time embedding to draw
        self.trained = pn.Column(self.curves, self.schedule, self.csv, self.time_emb, sizing_mode="stretch_width",
                                 styles=flex_item(3, 420))
        self._describe()
        self._draw()  # the figures are in no document yet: drawn here directly
        self.follow_fonts((self.curves_fig, self.lr_fig), (self.summary,))
        # the time embedding's title is shorter at projector type
        self.state.session.param.watch(lambda event: self.later(self._draw_time_embedding), "presentation")

    @param.depends("state.meta", watch=True)
    def _meta_changed(self):
        self._describe()
        self.later(self._draw)

    def _describe(self) -> None:
        """The Panel parts: the tables and the download's file name."""
        meta, name = self.state.meta, self.state.session.model_info.get("name", "")
        if not meta:
            self.summary.object = "<i>loading a model …</i>"
            return
        model = self.state.session.model
        preview = checkpoints.corpus_preview(model) if model is not None else None
        self.summary.object = f"<div class='meta-page'>{summary_html(meta, name, preview)}</div>"
        self.csv.filename = f"{name}-curves.csv"

    def _draw_time_embedding(self) -> None:
        """The time embedding of the model's metadata (Bokeh models: on the UI thread, as _draw)."""
        self.time_emb.visible = bool(self.state.meta) and not is_hf_meta(self.state.meta)
        if self.time_emb.visible:
            self.time_figure.draw(self.state.meta, self.state.session.presentation)

    def _draw(self) -> None:
        """The Bokeh parts: stored curves, the stored schedule and the part of it used, titles."""
        meta, name = self.state.meta, self.state.session.model_info.get("name", "")
        self._draw_time_embedding()
        self.trained.visible = not (meta and is_hf_meta(meta))
        if not meta:
            return
        self.train_src.data, self.val_src.data = stored_curves(meta)
        cfg = stored_config(meta)
        self.plan_src.data, self.used_src.data = schedule_columns(cfg, (meta.get("training_state") or {}).get("step"),
                                                                  meta)
        self.curves_fig.title.text = f"{name}: loss during training"
        self.lr_fig.title.text = (f"{name}: learning-rate schedule ({cfg.lr_schedule})" if cfg is not None
                                  else f"{name}: no learning-rate schedule stored")

    def __panel__(self):
        left = pn.Column(self.summary, styles=flex_item(2, 360))
        projector_layout(self.state.session, figures=self.trained, tables=left)
        return side_by_side(left, self.trained, css_classes=["model-page"])  # at 1024 px the plots go under the summary


def projector_layout(session, figures, tables) -> None:
    """In presentation mode the stored curves come first and the tables take the page's whole width under
    them: beside the figures, at projector type, a 1366-pixel page left the tables a third of its width and
    their values wrapped every two or three words (at 1024 px the tables came first and pushed the curves
    off the first screen). CSS only: the same Bokeh models either way."""
    def place(*events):
        whole = {"flex": "1 1 100%", "min-width": "0px"}
        figures.styles = {**figures.styles, **(whole if session.presentation else flex_item(3, 420)),
                          "order": "-1" if session.presentation else "0"}
        tables.styles = {**tables.styles, **(whole if session.presentation else flex_item(2, 360))}

    place()
    session.param.watch(place, "presentation")


class TrainingPanel(ModelView):
    """Preset, schedule, steps, name, Train / Stop; the live loss curve and the LR schedule (drawn as
    soon as it is chosen, then the LR actually used drawn over it). Only new points are streamed."""

    def __init__(self, **params):
        super().__init__(**params)
        p, task = self.state.param, self.state.task
        self.preset = pn.widgets.RadioButtonGroup.from_param(
            p.preset, options={PRESET_LABELS[k]: k for k in PRESETS}, css_classes=["train-preset"])
        self.schedule = pn.widgets.RadioButtonGroup.from_param(p.lr_schedule, css_classes=["train-schedule"])
        self.steps = pn.widgets.IntInput.from_param(p.train_steps, width=140, css_classes=["train-steps"])
        self.name_input = pn.widgets.TextInput.from_param(p.new_name, width=240, css_classes=["train-name"])
        self.start = pn.widgets.Button.from_param(p.train, color="primary", css_classes=["train-start"])
        self.stop = pn.widgets.Button.from_param(p.stop_training, color="warning", css_classes=["train-stop"])
        self.sample = pn.widgets.Button.from_param(p.sample_saved, color="success", css_classes=["train-sample"])
        self.status = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["train-status"])
        self.error = notice("danger")
        self.done = notice("success")
        fig, self.train_src, self.val_src = loss_figure("Live training loss", height=320)
        lr_fig, self.plan_src, self.used_src = lr_figure("Learning-rate schedule")
        self.clear = pn.widgets.Button.from_param(p.clear_earlier, css_classes=["train-clear"], visible=False)
        self.earlier_loss = earlier_lines(fig, "live-earlier-loss", "solid")
        self.earlier_lr = earlier_lines(lr_fig, "live-earlier-lr", "dotted")
        self.loss_pane = figure_pane(fig, "train-loss")
        self.lr_pane = figure_pane(lr_fig, "train-lr")
        self._run, self._drawn = None, (0, 0)  # the run drawn and its points drawn: (train, val)
        self._plan()  # the figures are in no document yet: drawn here directly
        self._sync()
        self._earlier()
        self._notices()
        task.param.watch(self._notices, ["status", "error", "running"])
        self.follow_fonts((fig, lr_fig), (self.status,))
        watch_presentation(self.state.session, widgets=(self.preset, self.schedule, self.steps, self.name_input,
                                                        self.start, self.stop, self.sample, self.clear))

    @param.depends("state.preset", "state.lr_schedule", "state.train_steps", watch=True)
    def _settings_changed(self):
        self.later(self._plan)

    @param.depends("state.run_id", "state.n_records", watch=True)
    def _records_changed(self):
        self.later(self._sync)

    @param.depends("state.earlier_id", watch=True)
    def _earlier_changed(self):
        self.clear.visible = bool(self.state.earlier)
        self.later(self._earlier)

    def _earlier(self) -> None:
        """The earlier runs beside the live one: smoothed train loss, and the learning rate they used."""
        runs = self.state.earlier
        self.earlier_loss.data = earlier_columns(runs, "train", smooth=True)
        self.earlier_lr.data = earlier_columns(runs, "lr", smooth=False)

    def _plan(self) -> None:
        self.plan_src.data = self.state.planned_schedule()

    def _sync(self) -> None:
        """Bring the live figures to the state's points: cleared for a new run, then only the points
        that arrived since the last draw streamed (one patch per UI update). Idempotent, so draws
        queued in any order or number end the same."""
        s = self.state
        if self._run != s.run_id:
            self.train_src.data, self.val_src.data = empty_loss(), {"step": [], "loss": []}
            self.used_src.data = empty_lr()
            self._run, self._drawn = s.run_id, (0, 0)
        n_train, n_val = self._drawn
        new, vals = s.train_points[n_train:], s.val_points[n_val:]
        if new:
            steps, losses, lrs = (list(c) for c in zip(*new))
            start = self.train_src.data["smooth"][-1] if n_train else None
            self.train_src.stream({"step": steps, "loss": losses, "smooth": list(ema(losses, start=start))})
            self.used_src.stream({"step": steps, "lr": lrs})
        if vals:
            self.val_src.stream({"step": [v[0] for v in vals], "loss": [v[1] for v in vals]})
        self._drawn = (n_train + len(new), n_val + len(vals))

    @param.depends("state.saved", watch=True)
    def _notices(self, *events):
        """Status, notices and which controls work (Panel objects only: set directly)."""
        s, task = self.state, self.state.task
        self.status.object = f"<span class='train-status-text'>{literal(task.status)}</span>"
        show_notice(self.error, task.error)
        text = (f"Saved {s.saved} in checkpoints/: it is in the sidebar's checkpoint list now, for every tab."
                if s.saved and not task.running else "")
        show_notice(self.done, text)
        self.sample.visible = bool(s.saved) and not task.running
        self.start.disabled, self.stop.disabled = task.running, not task.running
        for w in (self.preset, self.schedule, self.steps, self.name_input):
            w.disabled = task.running

    def __panel__(self):
        if not self.state.allowed:
            off = notice("info", css_classes=["train-disabled"])
            show_notice(off, f"{OFF_TEXT[0].upper()}{OFF_TEXT[1:]}. Train with `python run.py train` instead.")
            return off
        controls = pn.Column(
            pn.pane.HTML("<b>What to train</b>"), self.preset, pn.pane.HTML("<b>Learning-rate schedule</b>"),
            self.schedule, pn.FlexBox(self.steps, self.name_input), pn.FlexBox(self.start, self.stop, self.clear), self.status,
            self.error, self.done, self.sample, styles=flex_item(2, 360))
        plots = pn.Column(self.loss_pane, self.lr_pane, sizing_mode="stretch_width", styles=flex_item(3, 420))
        return side_by_side(controls, plots, css_classes=["train-panel"])


def _intro() -> str:
    schedules = ", ".join(LR_SCHEDULES[:-1]) + f" or {LR_SCHEDULES[-1]}"
    return ("<h2>Train a small model live</h2><p>As in <i>Training with the ELBO</i>: the masked-diffusion loss "
            f"(the ELBO's weighted masked-LM loss) falling as the model learns, under a {schedules} learning-rate "
            "schedule. Stop saves; the new checkpoint can then be sampled in every tab.</p>")


class ModelTab(ModelView):
    """The checkpoint page, then training live; both made once (the tab leaves and re-enters the page
    as it is hidden and shown, and must not grow new figures and watchers each time)."""

    def __init__(self, **params):
        super().__init__(**params)
        self.page, self.train_panel = CheckpointPage(state=self.state), TrainingPanel(state=self.state)
        self.layout = pn.Column(self.page, rule(), pn.pane.HTML(_intro()), self.train_panel,
                                sizing_mode="stretch_width", css_classes=["model-tab"])

    def __panel__(self):
        return self.layout
