"""The one trajectory heatmap, step (rows) x position (columns): live in Explore, per column in Compare,
standalone in the downloads (HeatmapFigure).

Drawn as one RGBA image whose rows are patched in as steps arrive: the browser repaints a single
bitmap per step (8k rect glyphs cost it ~40 ms a step; an invisible text glyph over all cells ~250
ms). The cells' data (character, state, scores) are patched into a second, undrawn source, sized
with the bitmap, that the hover and the zoomed-in character labels read in the browser. Only new
rows are ever sent.
"""
from __future__ import annotations

import numpy as np
from bokeh.models import (
    BoxAnnotation,
    ColumnDataSource,
    CustomJS,
    CustomJSHover,
    CustomJSTickFormatter,
    HoverTool,
    Legend,
    LegendItem,
    LinearAxis,
    Range1d,
)
from bokeh.plotting import figure

from ...names import PROCESS_NAMES
from ..frames import CODE, COMMITTED, STATES, Frames, glyph_table, state_labels
from .palette import DARK_CONF, EDGE, INK, PAPER, STATE_COLORS, STATE_MARK, confidence_alpha

CELL_COLUMNS = ("x", "y", "state", "token", "proposal", "committed_at", "conf", "score")
SHOWN_AS = {" ": "␣", "\n": "↵", "\t": "⇥"}  # whitespace made visible in cells and tooltips
_RGB = np.array([[int(STATE_COLORS[s][k:k + 2], 16) for k in (1, 3, 5)] for s in STATES], dtype=np.float32)
_JS_STATES = "const STATES = " + repr(list(STATES)) + ";\n"

# Hover: the image only knows pixels, so each line looks its cell up in the cells source (row-major:
# cell index = step * L + position; a row not drawn yet has y = -1 and shows nothing).
HOVER_LOOKUP = _JS_STATES + """
const L = grid.data.dw[0], R = grid.data.rows[0], x = Math.round(special_vars.x);
const y = Math.round((special_vars.y - grid.data.y[0]) * R / grid.data.dh[0] - 0.5), i = y * L + x;
const d = cells.data, g = vocab.data.glyph;
if (x < 0 || x >= L || y < 0 || y >= R || i >= d.x.length || d.y[i] !== y) return "";
const f = v => (v === null || Number.isNaN(v)) ? "–" : v.toFixed(3);
"""
TOOLTIPS = [("position", "$x{custom}"), ("step", "$y{custom}"), ("score, confidence", "$sx{custom}"),
            ("committed at, proposal", "$sy{custom}")]
# token ids beside the strings: a Hugging Face model's token is looked up by its id; an edited cell names the
# token it replaced (the row above's: i - L) and the one it holds
FORMATTERS = {"$x": "return `${x}: ${g[d.token[i]]} (id ${d.token[i]})`;",
              "$y": "return STATES[d.state[i]] === 'edited' && i >= L ? "
                    "`${y}: edited: ${g[d.token[i - L]]} -> ${g[d.token[i]]} at step ${y}` : `${y}: ${STATES[d.state[i]]}`;",
              "$sx": "return `${f(d.score[i])}, ${f(d.conf[i])}`;",
              "$sy": "return `${d.committed_at[i] >= 0 ? d.committed_at[i] : '–'}, ${g[d.proposal[i]]} (id ${d.proposal[i]})`;"}

# Characters in the cells once a cell is big enough to hold one: copied in the browser from the
# cells source for the visible window only, into a source that is never synced back to the server.
# White ink on dark cells (fixed, or committed with high confidence), black elsewhere. The type is the
# cell's size, up to 10 px: a 64-character canvas at 1024 px (cells 7 px wide) had no letters at 10 px.
FIT_LABELS = _JS_STATES + f"""
const xr = p.x_range, yr = p.y_range;
const w = p.inner_width / Math.abs(xr.end - xr.start), h = p.inner_height / Math.abs(yr.end - yr.start);
const out = {{x: [], y: [], glyph: [], ink: []}};
if (w >= 6 && h >= 8) {{
  const size = Math.floor(Math.min(10, w * 1.3, h * 0.9));
  if (glyph.text_font_size.value !== `${{size}}px`) glyph.text_font_size = {{value: `${{size}}px`}};
  const d = cells.data, g = vocab.data.glyph, x0 = Math.min(xr.start, xr.end), x1 = Math.max(xr.start, xr.end);
  const y0 = Math.min(yr.start, yr.end), y1 = Math.max(yr.start, yr.end);
  for (let i = 0; i < d.x.length; i++) {{
    const s = STATES[d.state[i]];
    if (d.y[i] < 0 || s === "masked" || s === "remasked") continue;  // (y < 0: a row not drawn yet)
    if (d.x[i] < x0 || d.x[i] > x1 || d.y[i] < y0 || d.y[i] > y1) continue;
    const dark = s === "fixed" || (d.conf[i] >= {DARK_CONF});
    out.x.push(d.x[i]); out.y.push(d.y[i]); out.glyph.push(g[d.token[i]]); out.ink.push(dark ? "#fff" : "#000");
  }}
}}
if (out.x.length || labels.data.x.length) labels.data = out;
"""


def sync_glyphs(vocab: ColumnDataSource, glyphs, sent):
    """Send a model's glyph table to the browser (`vocab`) when it is not the one `sent` last, compared by
    identity: a tokenizer hands out one table, and redoing LLaDA's 126,464 display strings took 0.1 s per
    run and per tick. Returns the table now sent (the caller keeps it for the next call)."""
    if glyphs is not sent:
        vocab.data = {"glyph": display_glyphs(glyphs)}
    return glyphs


def display_glyphs(glyphs) -> list[str]:
    """The glyph table with whitespace made visible, for tooltips and cell labels (inside a subword
    token too: ' the' shows as '␣the')."""
    return [SHOWN_AS.get(c, c) if len(c) == 1 else "".join(SHOWN_AS.get(ch, ch) for ch in c) for c in glyphs]


def cell_rgba(state: np.ndarray, conf: np.ndarray) -> np.ndarray:
    """(n,) uint32 RGBA pixels: each state's colour, committed cells blended toward white by confidence."""
    committed = np.isin(state, [CODE[s] for s in COMMITTED])
    alpha = np.where(committed, confidence_alpha(conf), 1.0)[:, None]  # (n, 1)
    rgb = 255.0 * (1 - alpha) + _RGB[state] * alpha  # (n, 3) over a white background
    rgba = np.concatenate([rgb, np.full((len(state), 1), 255.0)], axis=1).round().astype(np.uint8)
    return rgba.view(np.uint32).reshape(-1)


def cell_columns(frames, start: int, stop: int | None = None) -> dict:
    """Cells source columns for rows [start, stop): what hover and labels read, all binary arrays."""
    cells = frames.cells(start, stop)
    return {c: cells[c] for c in CELL_COLUMNS}


def blank_cells(rows: int, length: int) -> dict:
    """Cells source columns for a bitmap of `rows` rows, none drawn yet (x = y = -1)."""
    n = rows * length
    out = {c: np.full(n, -1, np.int32) for c in CELL_COLUMNS if c not in ("conf", "score")}
    out.update(conf=np.full(n, np.nan, np.float32), score=np.full(n, np.nan, np.float32))
    return out


def image_rows(frames, start: int, stop: int) -> np.ndarray:
    """(stop - start, L) uint32 pixels of heatmap rows [start, stop)."""
    state = np.stack(frames.state[start:stop])  # (R, L) int8 codes
    conf = np.stack(frames.conf[start:stop])  # (R, L)
    return cell_rgba(state.reshape(-1), conf.reshape(-1)).reshape(state.shape)


def legend_html(process: str = "masked", paler: bool = True) -> str:
    """The colour key of a `process` run's states, drawn as HTML (cheaper than a Bokeh legend, and
    readable at any size); `paler`: with the tint's meaning at its end."""
    items = []
    for s, label in state_labels(process).items():
        mark = STATE_MARK.get(s, "")
        items.append(f'<span class="key"><span class="swatch" style="background:{STATE_COLORS[s]}">{mark}</span>'
                     f'{label}</span>')
    if paler:
        items.append('<span class="key">paler = less confident</span>')
    return " ".join(items)




def legends_html(processes) -> str:
    """The colour key of runs of `processes` (in the order shown) side by side: one key when they share a
    process; else one line per process, each named, the tint's meaning once at the end. A masked and a
    uniform-state column share no colour but the settled ones: one key left the other's cells unexplained."""
    distinct = list(dict.fromkeys(processes)) or ["masked"]
    if len(distinct) == 1:
        return legend_html(distinct[0])
    lines = [f"<b>{PROCESS_NAMES.get(p, p)}:</b> {legend_html(p, paler=i == len(distinct) - 1)}"
             for i, p in enumerate(distinct)]
    return "<br>".join(lines)


LEGEND_CSS = """
.key { margin-right: 1em; white-space: nowrap; }
.swatch { display: inline-block; width: 1em; height: 1em; margin-right: 0.3em; vertical-align: -0.15em;
          border: 1px solid #888; color: #fff; font-size: 0.8em; line-height: 1.2em; text-align: center; }
"""


# The t axis's title per process: what t is there (a uniform-state run has no [MASK]: its t is the share of
# positions holding random tokens, the noise the model is told it sees)
T_LABELS = {"masked": "t (masked fraction)", "uniform": "t (share of random tokens)"}
# The t axis's label of a step tick (row_t's masked fraction), '' where the tick above reads the same
T_TICK = """const t = src.data.t;
const label = k => Number.isInteger(k) && k >= 0 && k < t.length ? t[k].toFixed(2) : '';
const text = label(tick);
return index > 0 && label(ticks[index - 1]) === text ? '' : text;"""


class HeatmapFigure:
    """A step x position heatmap and its sources; what every heatmap of the dashboard is drawn with.

    `progress=True` puts row k of R at height k / R (Compare: runs of different step counts side by
    side at one height); otherwise one unit per row (Explore, downloads). Rows are sent as they come
    (`start` sizes a blank bitmap, `append` sends the rows the browser has not seen) or all at once
    (`show`). `labels` draws the characters in cells once zoomed in; `marker` outlines one row.
    `names`: a prefix naming the sources (`<names>-cells`, `-image`, `-marks`, `-vocab`), for the page's
    scripts (tests, benchmarks) to find them; Bokeh refuses a lookup by a name two models share, so
    each figure of a page needs its own (None: unnamed)."""

    def __init__(self, *, progress: bool = False, labels: bool = True, marker: bool = False, x_range=None,
                 names: str | None = None, **figure_args):
        self.progress = progress
        self.t_axis = None  # the right-hand t axis (not on a progress heatmap)
        named = (lambda part: {"name": f"{names}-{part}"}) if names else (lambda part: {})
        self.cells = ColumnDataSource({c: [] for c in CELL_COLUMNS}, **named("cells"))
        self.grid = ColumnDataSource(self._placement(np.zeros((1, 1), np.uint32)), **named("image"))
        self.marks = ColumnDataSource({"x": [], "y": []}, **named("marks"))
        self.vocab = ColumnDataSource({"glyph": []}, **named("vocab"))  # token id -> shown character
        self._glyphs_of = None  # the glyph table `vocab` was made from
        self.labels = ColumnDataSource({"x": [], "y": [], "glyph": [], "ink": []}, syncable=False)
        self.row_t = ColumnDataSource({"t": []})  # each drawn row's masked fraction, for the t axis
        self.figure = self._make_figure(x_range or Range1d(-0.5, 255.5), labels, figure_args)
        self.marker = None
        if marker:
            self.marker = BoxAnnotation(top=-0.5, bottom=0.5, fill_alpha=0.0, line_color=INK,
                                        line_width=2, line_alpha=0.9)
            self.figure.add_layout(self.marker)
        self._image = np.zeros((1, 1), np.uint32)  # the full bitmap, kept to regrow it if needed
        self.shown = 0  # rows the browser has
        self._start_sent = 0  # the Frames.start_revision of the row 0 it has

    def _placement(self, image: np.ndarray) -> dict:
        rows, length = image.shape
        if self.progress:
            return {"image": [image], "x": [-0.5], "y": [0.0], "dw": [length], "dh": [1.0], "rows": [rows]}
        return {"image": [image], "x": [-0.5], "y": [-0.5], "dw": [length], "dh": [rows], "rows": [rows]}

    def _make_figure(self, x_range, labels: bool, args: dict):
        args = {"height": 400, "sizing_mode": "stretch_width", "tools": "xpan,xwheel_zoom,box_zoom,reset,save",
                "active_scroll": "xwheel_zoom", "toolbar_location": "above", "x_axis_label": "position",
                "y_axis_label": "progress (step / steps)" if self.progress else "step", **args}
        p = figure(x_range=x_range, y_range=Range1d(1, 0) if self.progress else Range1d(32.5, -0.5), **args)
        image = p.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.grid)
        p.scatter("x", "y", source=self.marks, marker="x", size=7, line_color=PAPER, line_width=1.5)
        args = dict(cells=self.cells, grid=self.grid, vocab=self.vocab)
        formatters = {k: CustomJSHover(args=args, code=HOVER_LOOKUP + v) for k, v in FORMATTERS.items()}
        p.add_tools(HoverTool(renderers=[image], tooltips=TOOLTIPS, formatters=formatters))
        p.grid.visible = False
        p.xaxis.ticker.min_interval = 1  # positions and steps are whole: no tick at -0.5 on a short run
        if not self.progress:
            p.yaxis.ticker.min_interval = 1
            p.add_layout(self._t_axis(), "right")
        p.toolbar.logo = None
        if labels and not self.progress:  # (progress rows are too thin to hold a character)
            text = p.text("x", "y", text="glyph", source=self.labels, text_align="center", text_baseline="middle",
                          text_color="ink", text_font_size="10px")
            text.glyph.syncable = False  # its type is set in the browser (FIT_LABELS), not sent back
            fit = CustomJS(args=dict(p=p, cells=self.cells, labels=self.labels, vocab=self.vocab, glyph=text.glyph),
                           code=FIT_LABELS)
            for model, attr in ((p.x_range, "start"), (p.x_range, "end"), (p.y_range, "start"),
                                (p.y_range, "end"), (p, "inner_width"), (p, "inner_height"),
                                (self.cells, "patching"), (self.cells, "data")):
                model.js_on_change(attr, fit)
        return p

    def _t_axis(self) -> LinearAxis:
        """The reverse process labelled by t as well as by step (the teaching notebooks write it t = 1 -> 0): each
        row's masked fraction beside its step, from `row_t`. A label the tick above already reads is left
        out: the rows after the canvas is filled (a run's post steps) all read 0.00, and the axis repeated it."""
        code = T_TICK
        axis = LinearAxis(axis_label=T_LABELS["masked"],
                          formatter=CustomJSTickFormatter(args=dict(src=self.row_t), code=code))
        axis.ticker.min_interval = 1
        self.t_axis = axis
        return axis

    def _row_t(self, frames, start: int, stop: int) -> None:
        """The masked fraction of rows [start, stop) added to the t axis's list (earlier rows are kept)."""
        if not self.progress:
            masked = (CODE["masked"], CODE["remasked"], CODE["noise"])  # (noise: a uniform-state run's)
            new = [float(np.isin(frames.state[r], masked).mean()) for r in range(start, stop)]
            self.row_t.data = {"t": list(self.row_t.data["t"])[:start] + new}

    def start(self, frames, rows: int | None = None) -> None:
        """A blank bitmap sized for `rows` rows (default: the rows the run is expected to make), no cells."""
        self.shown = 0
        self._start_sent = frames.start_revision if frames is not None else 0
        self.marks.data = {"x": [], "y": []}
        self.row_t.data = {"t": []}
        if frames is None:
            self.cells.data = {c: [] for c in CELL_COLUMNS}
            self._set_image(np.zeros((1, 1), np.uint32))
            return
        self._glyphs_of = sync_glyphs(self.vocab, frames.glyphs, self._glyphs_of)  # a new model's, once
        if self.t_axis is not None:
            self.t_axis.axis_label = T_LABELS.get(frames.process, T_LABELS["masked"])
        rows = rows or max(frames.expected_rows, frames.n_rows)
        self._set_image(np.zeros((rows, frames.length), np.uint32))  # transparent until drawn
        self.cells.data = blank_cells(rows, frames.length)
        if not self.progress:  # (Compare's columns share one x range, set by the tab)
            self.figure.x_range.update(start=-0.5, end=frames.length - 0.5)
            self.figure.y_range.update(start=rows - 0.5, end=-0.5)

    def _set_image(self, image: np.ndarray) -> None:
        self._image = image
        self.grid.data = self._placement(image)

    def append(self, frames) -> None:
        """Send the rows the browser has not seen (pixels, cells for hover and labels, revision marks),
        as one message (the caller decides how often: Explore's state ticks a live run a few times a
        second). Only new rows are ever sent."""
        if frames is None:
            return
        # row 0 rewritten since it was sent (a uniform-state run's start canvas came after the first
        # draw): send again from row 0, or it stays "block not started" for good
        if self.shown and frames.start_revision != self._start_sent:
            self.shown = 0
        self._start_sent = frames.start_revision
        if frames.n_rows <= self.shown:
            return
        start, stop = self.shown, frames.n_rows
        self._draw(frames, start, stop)
        self._row_t(frames, start, stop)
        re_y, re_x = np.nonzero(np.stack(frames.state[start:stop]) == CODE["remasked"])
        if len(re_x):
            y = re_y + start
            self.marks.stream({"x": re_x, "y": (y + 0.5) / stop if self.progress else y})
        self.shown = stop

    def _draw(self, frames, start: int, stop: int) -> None:
        """Patch the pixels of rows [start, stop) into the bitmap (regrown if the run outgrew it)."""
        pixels, L = image_rows(frames, start, stop), frames.length  # (R, L)
        cells = cell_columns(frames, start, stop)
        if stop > self._image.shape[0]:  # threshold decoding outgrew the estimate: regrow the bitmap
            grown = np.zeros((stop, L), np.uint32)
            grown[:start] = self._image[:start]
            grown[start:stop] = pixels
            self._set_image(grown)
            self.cells.data = {c: np.concatenate([np.asarray(self.cells.data[c])[:start * L], cells[c]])
                               for c in CELL_COLUMNS}
            if not self.progress:
                self.figure.y_range.start = stop - 0.5
        else:
            # Patches, never streams: a patch applied twice is harmless, while a stream sent in the
            # moment a page first syncs its document reached the browser twice (row 0 doubled, and
            # every hover one step behind the drawn cells).
            self._image[start:stop] = pixels
            self.grid.patch({"image": [((0, slice(start, stop), slice(0, L)), pixels.ravel())]})
            self.cells.patch({c: [(slice(start * L, stop * L), cells[c])] for c in CELL_COLUMNS})

    def fit(self, frames) -> None:
        """A finished run that made fewer rows than its bitmap holds (a uniform-state run's stop rule, a
        threshold run under its estimate): the y range ends at its last row instead of leaving the planned
        rows blank below it."""
        if frames is None or self.progress or frames.n_rows >= self._image.shape[0]:
            return
        self.figure.y_range.update(start=frames.n_rows - 0.5, end=-0.5)

    def show(self, frames) -> None:
        """A whole run at once (a finished run: Compare's columns, the downloads)."""
        self.start(frames, frames.n_rows if frames is not None else None)
        self.append(frames)

    def mark(self, row: int | None) -> None:
        """Outline `row` (None: no outline; a moving outline repaints the figure every step)."""
        if self.marker is not None:
            if row is None:
                self.marker.visible = False
            else:
                self.marker.update(top=row - 0.5, bottom=row + 0.5, visible=True)


def heatmap_figure(traj, tokenizer, toolbar: bool = True, title: str = "Trajectory: step × position"):
    """A standalone heatmap of a finished run (batch row 0) for the downloads: the same figure as the
    live one, sized to the run, with the colour key as a Bokeh legend so a PNG explains itself."""
    frames = Frames.from_trajectory(traj, glyph_table(tokenizer))
    rows, length = frames.n_rows, frames.length
    heat = HeatmapFigure(labels=False, title=f"{title} (paler = less confident)", sizing_mode="fixed",
                         width=int(np.clip(length * 4, 500, 1200)) + 190, height=int(np.clip(rows * 10, 300, 800)),
                         toolbar_location="above" if toolbar else None)
    heat.show(frames)
    _state_key(heat.figure, frames.process)
    return heat.figure


def _state_key(p, process: str = "masked") -> None:
    """The colour key as a Bokeh legend (one glyph each, far outside the fixed ranges: Bokeh draws
    no legend swatch for an empty renderer)."""
    items = []
    for s, label in state_labels(process).items():
        marker = "square_x" if s in STATE_MARK else "square"
        r = p.scatter([-1e6], [-1e6], marker=marker, size=12, fill_color=STATE_COLORS[s], line_color=EDGE)
        items.append(LegendItem(label=label, renderers=[r]))
    p.add_layout(Legend(items=items, location="top_left", title="cell"), "right")
