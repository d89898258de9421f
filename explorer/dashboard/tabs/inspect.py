"""Inspect: the model's view of masked text (seeds 002, 003, 004), live.

- Forward process: a text masked at ratio t (a slider; the mask is drawn from `mask_seed`, so a shared
  link shows the same mask) and the mask-fraction check: the fraction masked vs t over many draws
  (expected: y = t). Both are cheap and drawn on the UI thread, so they follow the slider at once.
- Predictions at t: the model's top-k candidates at each masked position, coloured correct / wrong
  (Okabe-Ito blue / vermillion, and solid / dashed outline: not hue alone), probability as intensity.
- On validation data: accuracy and mean confidence vs t, and the mean per-position confidence at t.

The numbers come from explorer.metrics (topk_predictions, masked_fraction_vs_t, accuracy_vs_t,
per_position_confidence); model calls run on Workers with process-wide caches per (model, t, ...).
Nothing is computed until the tab is first shown (on_shown sets `active`): most sessions never open it.
"""
from __future__ import annotations

import html
import logging
import random

import numpy as np
import panel as pn
import param

from ..runtime import checkpoints
from ..runtime.cache import INSPECT as _RESULTS
from ..runtime.tasks import Worker
from ..ui.palette import FONT, MIN_ALPHA
from .base import TabState

log = logging.getLogger(__name__)

CORRECT, WRONG = "#0072B2", "#D55E00"  # Okabe-Ito blue / vermillion (palette.py's colour family)
MASKED_BG = "#4D4D4D"
SHOWN_AS = {" ": "␣", "\n": "↵", "\t": "⇥"}  # whitespace made visible where a candidate is shown
VAL_ROWS = 16  # validation rows for the curves: ~1 s per t for the Shakespeare model on a busy CPU
ACC_TS = tuple(round(0.1 * i, 1) for i in range(1, 10))
FRACTION_TS = tuple(round(0.05 * i, 2) for i in range(21))
FRACTION_DRAWS = 256  # rows per t of the mask-fraction check
cache_get, cache_put = _RESULTS.get, _RESULTS.put


def model_key(model) -> tuple:
    """Identifies a loaded model: a re-saved checkpoint is a new object (checkpoints.load keys on mtime)."""
    return (str(getattr(model, "path", "")), id(model))


# ----------------------------------------------------------------------------- pure helpers

def prepare_text(tokenizer, text: str, context: int) -> tuple[str, list[str]]:
    """The text the model is shown and what was changed: characters the tokenizer does not know are
    left out (named in the notice), and the text is cut to the model's context."""
    notices = []
    unknown = tokenizer.unknown_chars(text)
    if unknown:
        drop = set(unknown)
        text = "".join(c for c in text if c not in drop)
        names = ", ".join(repr(c) for c in unknown[:12]) + (" …" if len(unknown) > 12 else "")
        notices.append(f"left out {len(unknown)} character(s) this model does not know: {names}")
    if len(text) > context:
        notices.append(f"the text has {len(text)} characters but the model sees at most {context}: "
                       f"only the first {context} are used")
        text = text[:context]
    return text, notices


def draw_mask(length: int, t: float, seed: int) -> np.ndarray:
    """(length,) bool: which positions are masked at ratio t, drawn exactly as the forward process does
    (explorer.diffusion.forward_mask, as metrics.topk_predictions draws it). One uniform per position
    from `seed`, masked where u < t: the masks of one seed are nested as t grows."""
    import torch

    from ...diffusion import forward_mask

    g = torch.Generator().manual_seed(int(seed))
    return forward_mask(torch.zeros(1, length, dtype=torch.long), float(t), mask_id=1, generator=g)[1][0].numpy()


def fraction_check(length: int, seed: int):
    """metrics.masked_fraction_vs_t over FRACTION_DRAWS rows per t (cached: it depends on no model)."""
    from ...metrics import masked_fraction_vs_t

    key = ("fraction", length, seed)
    table = cache_get(key)
    if table is None:
        table = masked_fraction_vs_t(FRACTION_TS, length=length, n=FRACTION_DRAWS, seed=seed)
        cache_put(key, table)
    return table


def _shown(c: str) -> str:
    return html.escape(SHOWN_AS.get(c, c))


def _plain(c: str) -> str:
    """A character of running text: spaces kept (non-breaking so a column keeps its width)."""
    return "&nbsp;" if c == " " else "↵" if c == "\n" else html.escape(c)


def forward_html(text: str, mask: np.ndarray) -> str:
    """The text as the model sees it at t: masked characters as █ on a dark cell."""
    parts = []
    for c, m in zip(text, mask):
        parts.append('<span class="mk">█</span>' if m else html.escape(c))
        if c == "\n" and not m:
            parts[-1] = "↵\n"
    return '<div class="fwd">' + "".join(parts) + "</div>"


def _candidate(ch: str, p: float, ok: bool, top: bool) -> str:
    alpha = MIN_ALPHA + (1 - MIN_ALPHA) * float(np.clip(p, 0, 1))
    rgb = (0, 114, 178) if ok else (213, 94, 0)
    ink = "#fff" if alpha > 0.55 else "#000"
    cls = "cd ok" if ok else "cd no"
    return (f'<span class="{cls}{" t1" if top else ""}" style="background:rgba({rgb[0]},{rgb[1]},{rgb[2]},'
            f'{alpha:.2f});color:{ink}">{_shown(ch)}</span>')


def _column(row, k: int) -> str:
    """One masked position: █, then its k candidates (top first) with probability as intensity."""
    cands = [(row[f"top{r}"], row[f"p{r}"]) for r in range(1, k + 1) if f"top{r}" in row]
    tip = (f"position {row['position']}: true {SHOWN_AS.get(row['true'], row['true'])!r}, "
           f"p(true) = {row['p_true']:.2f}; " + ", ".join(f"{SHOWN_AS.get(c, c)!r} {p:.2f}" for c, p in cands))
    body = "".join(_candidate(c, p, c == row["true"], r == 0) for r, (c, p) in enumerate(cands))
    return f'<span class="col" title="{html.escape(tip)}"><span class="mk">█</span>{body}</span>'


def predictions_html(text: str, result: dict, k: int) -> str:
    """Seed 003's figure for text: each position a column, masked ones with their top-k candidates.
    Columns are grouped into words (a word never breaks across lines); a newline is a column of its own
    (↵), not a line break: Shakespeare's short lines would otherwise make the grid very tall."""
    rows = {int(r["position"]): r for r in result["table"].to_dict("records")}
    words, word = [], []
    for i, c in enumerate(text):
        word.append(_column(rows[i], k) if i in rows else f'<span class="col"><span class="ch">{_plain(c)}</span></span>')
        if c in " \n":
            words.append('<span class="w">' + "".join(word) + "</span>")
            word = []
    if word:
        words.append('<span class="w">' + "".join(word) + "</span>")
    return '<div class="grid">' + "".join(words) + "</div>"


def predictions_table(result: dict, k: int):
    """The candidates as a table for the page and the CSV: whitespace made visible, ✓ / ✗ spelled out."""
    table = result["table"].copy()
    for col in ["true"] + [f"top{r}" for r in range(1, k + 1)]:
        if col in table:
            table[col] = table[col].map(lambda c: SHOWN_AS.get(c, c))
    if "correct" in table:
        table["correct"] = table["correct"].map({True: "✓ yes", False: "✗ no"})
    cols = ["position", "true"] + [c for r in range(1, k + 1) for c in (f"top{r}", f"p{r}")] + ["p_true", "correct"]
    return table[[c for c in cols if c in table]]


def _style(size: dict) -> str:
    """CSS of the two text views; sizes from palette.FONT (presentation mode: projector type)."""
    return f"""<style>
.fwd {{ font: calc(1.3 * {size['text']})/1.5 ui-monospace, 'DejaVu Sans Mono', monospace; white-space: pre-wrap;
        word-break: break-all; margin: 0; }}
.fwd .mk {{ color: {MASKED_BG}; }}
.grid {{ display: flex; flex-wrap: wrap; align-items: flex-start; row-gap: 0.5em;
         font: calc(1.3 * {size['text']})/1.25 ui-monospace, 'DejaVu Sans Mono', monospace; }}
.grid .w {{ display: inline-flex; align-items: flex-start; }}
.grid .col {{ display: inline-flex; flex-direction: column; align-items: center; min-width: 1.05ch; }}
.grid .mk {{ color: {MASKED_BG}; }}
.grid .cd {{ min-width: 1.2ch; text-align: center; margin-top: 2px; font-size: 0.85em; }}
.grid .cd.t1 {{ font-weight: bold; font-size: 1em; }}
.grid .cd.ok {{ outline: 2px solid {CORRECT}; }}
.grid .cd.no {{ outline: 1px dashed {WRONG}; }}
.cap {{ font-size: {size['base']}; margin: 0.2em 0; }}
.key {{ padding: 0 0.4em; margin: 0 0.2em; }}
</style>"""


def legend_html(size: dict) -> str:
    return (_style(size) + '<p class="cap">Under each masked character (█) '
            'the model\'s candidates, most likely first: '
            f'<span class="key" style="background:{CORRECT};color:#fff;outline:2px solid {CORRECT}">correct</span> '
            f'<span class="key" style="background:{WRONG};color:#fff;outline:1px dashed {WRONG}">wrong</span> '
            '— the paler, the less probable. Hover a column for the numbers.</p>')


# ----------------------------------------------------------------------------- state

class InspectState(TabState):
    """The Inspect tab's knobs (t, mask seed, k, the text) and its results."""

    URL_PARAMS = ("t", "mask_seed", "k", "default_text", "text")  # in this order: see url_carries

    text = param.String("", label="Text", doc="The clean text to mask (default: a validation excerpt)")
    default_text = param.Boolean(True, label="Validation text",
                                 doc="Use an excerpt of the checkpoint's validation split as the text")
    t = param.Number(0.5, bounds=(0.0, 1.0), step=0.01, label="Masking ratio t",
                     doc="Each character is masked with probability t (t = 1: all [MASK])")
    mask_seed = param.Integer(0, bounds=(0, 2**31 - 1), label="Mask seed",
                              doc="Seed of the random mask: the same seed and t give the same mask")
    k = param.Integer(3, bounds=(1, 10), label="Candidates (k)", doc="Candidates shown per masked position")
    redraw = param.Event(label="Re-draw mask", doc="Draw a new random mask (a new mask seed)")
    use_default = param.Event(label="Use validation text", doc="Put the validation excerpt back")
    active = param.Boolean(False, doc="The tab has been shown: compute its results from now on")

    # Results, set on the UI thread only.
    notice = param.String("", doc="What is wrong with the model or the text ('' = nothing)")
    text_notice = param.String("", doc="What was changed in the text to show it to the model")
    predictions = param.Parameter(None, doc="metrics.topk_predictions for the current text, t, mask, k")
    accuracy = param.DataFrame(None, allow_None=True, doc="metrics.accuracy_vs_t rows computed so far")
    positions = param.DataFrame(None, allow_None=True, doc="metrics.per_position_confidence at t")
    validation_error = param.String("")
    busy = param.String("", doc="What is being computed ('' = nothing)")

    def __init__(self, explorer, **params):
        super().__init__(explorer, **params)
        # model calls take turns on the device with every session's sampler runs (jobs.DeviceTurns)
        device = explorer.device
        self._preds, self._acc, self._pos = (Worker(f"inspect-{n}", device=device) for n in ("preds", "acc", "pos"))
        self._val = Worker("inspect-val", device)
        self._default = None  # the validation excerpt of the loaded model
        self._tokens = None  # (VAL_ROWS, context) validation tokens of the loaded model
        self._quiet = False  # set while the state changes `text` itself (not the user's edit)

    def url_carries(self, name: str) -> bool:
        """An edited text travels in the link (so a shared link shows what was inspected); the
        validation excerpt does not (the link says default_text and the model supplies it). The text
        comes after default_text in the link, so applying it finds the default already switched off."""
        return name != "text" or not self.default_text

    # ---------------------------------------------------------------- what the model is shown

    @property
    def model(self):
        return self.session.model

    def usable(self) -> bool:
        """A diffusion model is loaded (else `notice` says why not)."""
        model = self.model
        if model is None:
            self.notice = ""
            return False
        if model.config.kind != "diffusion":
            name = self.session.model_info.get("name", "this checkpoint")
            self.notice = (f"Inspect shows what a masked-diffusion model predicts at masked positions; "
                           f"{name} is a causal (left-to-right) model, which never sees [MASK]. "
                           "Pick a diffusion checkpoint in the sidebar.")
            return False
        self.notice = ""
        return True

    def shown_text(self, update: bool = True) -> str:
        """The text after prepare_text; sets `text_notice` unless `update` is False (off the UI thread)."""
        model = self.model
        if model is None:
            return ""
        text, notices = prepare_text(model.tokenizer, self.text, model.config.block_size)
        if not self.text:
            notices.append("the validation text is loading …" if self.default_text and self._default is None
                           else "the text is empty: type some text, or press 'Use validation text'")
        elif not text:
            notices.append("nothing is left to show the model")
        if update:
            self.text_notice = "; ".join(notices)
        return text

    def mask(self, length: int) -> np.ndarray:
        return draw_mask(length, self.t, self.mask_seed)

    # ---------------------------------------------------------------- events

    def on_model_changed(self) -> None:
        for worker in (self._preds, self._val, self._acc, self._pos):
            worker.cancel()
        self._default = self._tokens = None
        self.param.update(predictions=None, accuracy=None, positions=None, validation_error="", busy="")
        if self.active and self.usable():
            self._fetch_validation()

    def on_shown(self) -> None:
        """The tab is on screen (app.watch_shown): compute from now on."""
        self.active = True

    @param.depends("active", watch=True)
    def _activated(self):
        if self.active and self._tokens is None and self.usable():
            self._fetch_validation()

    @param.depends("text", watch=True)
    def _text_edited(self):
        if not self._quiet and self.default_text and self.text != self._default:
            self.default_text = False  # the user typed: the URL must not claim the default any more
        self.refresh_predictions()

    @param.depends("default_text", watch=True)
    def _default_chosen(self):
        if self.default_text and self._default is not None:
            self._set_text(self._default)

    @param.depends("use_default", watch=True)
    def _use_default_clicked(self):
        if self.default_text:
            self._default_chosen()
        self.default_text = True

    @param.depends("redraw", watch=True)
    def _redraw_clicked(self):
        self.mask_seed = random.randrange(2**31 - 1)

    @param.depends("t", "mask_seed", "k", watch=True)
    def _knobs_changed(self):
        self.refresh_predictions()

    @param.depends("t", watch=True)
    def _t_changed(self):
        self.refresh_positions()

    def _set_text(self, text: str) -> None:
        self._quiet = True
        try:
            self.text = text
        finally:
            self._quiet = False

    # ---------------------------------------------------------------- validation data

    def _fetch_validation(self) -> None:
        model = self.model
        self.busy = "loading validation text …"
        self._val.submit(lambda job: self._validation_job(job, model))

    def _validation_job(self, job, model) -> None:
        try:
            tokens = checkpoints.validation_tokens(model, model.config.block_size, VAL_ROWS)
        except Exception as e:  # no corpus file: the text and predictions still work, with a notice
            log.warning("inspect: %s", e)
            message = str(e)  # made here: `e` is unbound once the except block ends
            return self.session.dispatch(lambda: self._validation_done(job, None, message))
        self.session.dispatch(lambda: self._validation_done(job, tokens, ""))

    def _validation_done(self, job, tokens, message: str) -> None:
        if not self._val.is_current(job):
            return
        self.busy = ""
        if tokens is None:
            self.validation_error = f"{message}; type a text to inspect"
            return self.refresh_predictions()
        self._tokens = tokens
        self._default = self.model.tokenizer.decode(tokens[0].tolist())
        if self.default_text:
            self._set_text(self._default)
        self.refresh_predictions()
        self.refresh_accuracy()
        self.refresh_positions()

    # ---------------------------------------------------------------- predictions at t

    def refresh_predictions(self, *, wait: bool = False) -> bool:
        """Show the cached predictions for (model, text, t, mask, k), or compute them in the background."""
        if not self.active or not self.usable():
            return False
        text = self.shown_text()
        if not text:
            self._preds.cancel()
            self.predictions = None
            return False
        model, t, k = self.model, float(self.t), self.k
        mask = self.mask(len(text))
        key = ("preds", model_key(model), text, t, self.mask_seed, k)
        cached = cache_get(key)
        if cached is not None:
            self._preds.cancel()
            self.predictions = cached
            return True
        self._preds.submit(lambda job: self._predict_job(job, model, text, t, mask, k, key), wait=wait)
        return True

    def _predict_job(self, job, model, text, t, mask, k, key) -> None:
        from ...metrics import topk_predictions

        try:
            result = topk_predictions(model, text, t, mask=mask, k=k)  # the mask drawn on the UI thread
        except Exception as e:  # a readable notice; the tab keeps working
            log.exception("inspect: predictions failed")
            message = f"predictions failed: {e}"
            return self.session.dispatch(lambda: self._job_failed(job, self._preds, message))
        result["text"], result["t"], result["k"] = text, t, k
        cache_put(key, result)
        self.session.dispatch(lambda: self._predicted(job, result))

    def _predicted(self, job, result) -> None:
        if self._preds.is_current(job):
            self.predictions = result

    def _job_failed(self, job, worker, message: str) -> None:
        if worker.is_current(job):
            self.param.update(validation_error=message, busy="")

    # ---------------------------------------------------------------- validation curves

    def refresh_accuracy(self, *, wait: bool = False) -> None:
        """Accuracy and mean confidence vs t on validation text: cached, else one t at a time in the
        background, each point shown as it arrives."""
        if self._tokens is None or not self.usable():
            return
        model, tokens = self.model, self._tokens
        key = ("accuracy", model_key(model), tuple(tokens.shape))
        cached = cache_get(key)
        if cached is not None:
            self.accuracy = cached
            return
        self._acc.submit(lambda job: self._accuracy_job(job, model, tokens, key), wait=wait)

    def _accuracy_job(self, job, model, tokens, key) -> None:
        import pandas as pd

        from ...metrics import accuracy_vs_t

        parts = []
        for t in ACC_TS:
            if job.cancelled:
                return
            try:
                parts.append(accuracy_vs_t(model, tokens, ts=[t], seed=0))
            except Exception as e:
                log.exception("inspect: accuracy vs t failed")
                message = f"accuracy vs t failed: {e}"
                return self.session.dispatch(lambda: self._job_failed(job, self._acc, message))
            table = pd.concat(parts, ignore_index=True)
            done = len(parts) == len(ACC_TS)
            if done:
                cache_put(key, table)
            self.session.dispatch(lambda table=table, done=done: self._accuracy_done(job, table, done))

    def _accuracy_done(self, job, table, done: bool) -> None:
        if self._acc.is_current(job):
            self.accuracy = table

    def refresh_positions(self, *, wait: bool = False) -> None:
        """The mean per-position confidence at t on validation text (cached per model and t)."""
        if not self.active or self._tokens is None or not self.usable():
            return
        model, tokens, t = self.model, self._tokens, round(float(self.t), 2)
        key = ("positions", model_key(model), tuple(tokens.shape), t)
        cached = cache_get(key)
        if cached is not None:
            self._pos.cancel()
            self.positions = cached
            return
        self._pos.submit(lambda job: self._positions_job(job, model, tokens, t, key), wait=wait)

    def _positions_job(self, job, model, tokens, t, key) -> None:
        from ...metrics import per_position_confidence

        try:
            table = per_position_confidence(model, tokens, t=max(t, 0.01), seed=0)
        except Exception as e:
            log.exception("inspect: per-position confidence failed")
            message = f"per-position confidence failed: {e}"
            return self.session.dispatch(lambda: self._job_failed(job, self._pos, message))
        table.attrs["t"] = t
        cache_put(key, table)
        self.session.dispatch(lambda: self._positions_done(job, table))

    def _positions_done(self, job, table) -> None:
        if self._pos.is_current(job):
            self.positions = table

    def close(self) -> None:
        for worker in (self._preds, self._val, self._acc, self._pos):
            worker.cancel()


# ----------------------------------------------------------------------------- plots (HoloViews)

def _fontsize(presentation: bool) -> dict:
    f = FONT[presentation]
    return {"title": f["title"], "labels": f["plot"], "xticks": f["plot"], "yticks": f["plot"], "legend": f["plot"]}


def fraction_plot(table, t: float, actual: float | None, presentation: bool = False):
    """Seed 003's masking statistics: the fraction masked vs t (mean ± std over draws), y = t, and
    this text's own fraction at the current t."""
    from ...plots import _hv

    hv = _hv()
    kd, vd = hv.Dimension("t", label="masking ratio t"), hv.Dimension("fraction", label="fraction masked", range=(0, 1))
    spread = hv.ErrorBars((table["t"], table["masked_fraction"], table["std"]), kd, [vd, "std"]).opts(
        line_color=CORRECT)
    actual_pts = hv.Scatter(([t], [actual if actual is not None else np.nan]), kd, vd, label="this text").opts(
        color=WRONG, marker="diamond", size=14)
    return (hv.Curve(([0, 1], [0, 1]), kd, vd, label="expected (y = t)").opts(color="#777", line_dash="dashed")
            * hv.Curve((table["t"], table["masked_fraction"]), kd, vd, label=f"mean of {FRACTION_DRAWS} draws").opts(
                color=CORRECT, line_width=2) * spread * actual_pts
            * hv.VLine(t).opts(color="#999", line_width=1)).opts(
        title="Forward process: fraction masked vs t", legend_position="top_left", height=300, responsive=True,
        fontsize=_fontsize(presentation), show_grid=True, toolbar=None)


def accuracy_plot(table, t: float, presentation: bool = False):
    """Seeds 002/003: argmax accuracy at masked positions vs t, with the mean top-1 probability."""
    from ...plots import _hv

    hv = _hv()
    empty = table is None or not len(table)
    xs = [] if empty else table["t"]
    kd, vd = hv.Dimension("t", label="masking ratio t", range=(0, 1)), hv.Dimension("value", label="accuracy, confidence", range=(0, 1))
    acc = [] if empty else table["accuracy"]
    conf = [] if empty else table["mean_confidence"]
    return (hv.Curve((xs, acc), kd, vd, label="accuracy (top-1)").opts(color=CORRECT, line_width=3)
            * hv.Scatter((xs, acc), kd, vd).opts(color=CORRECT, size=8, tools=["hover"])
            * hv.Curve((xs, conf), kd, vd, label="mean confidence").opts(color=WRONG, line_width=2, line_dash="dashed")
            * hv.Scatter((xs, conf), kd, vd).opts(color=WRONG, size=7, marker="square", tools=["hover"])
            * hv.VLine(t).opts(color="#999", line_width=1)).opts(
        title="Accuracy vs masking ratio (validation)", legend_position="top_right", height=300, responsive=True,
        fontsize=_fontsize(presentation), show_grid=True, toolbar=None)


def positions_plot(table, t: float, presentation: bool = False):
    """Seed 002: the mean max-probability at each position when it is masked, at ratio t."""
    from ...plots import _hv

    hv = _hv()
    conf = np.zeros(0) if table is None else table["confidence"].to_numpy(dtype=float)
    edges = np.arange(len(conf) + 1) - 0.5
    shown = t if table is None else table.attrs.get("t", t)
    title = (f"Mean confidence by position, t = {shown:.2f} (validation)" if table is not None
             else "Mean confidence by position (computing …)")
    return hv.Histogram((edges, np.nan_to_num(conf)), kdims=[hv.Dimension("position")],
                        vdims=[hv.Dimension("confidence", label="mean max-probability", range=(0, 1))]).opts(
        color=CORRECT, line_color=None, alpha=0.8, title=title, height=260, responsive=True,
        xlim=(-0.5, max(len(conf), 1) - 0.5),
        fontsize=_fontsize(presentation), show_grid=True, toolbar=None, tools=["hover"])


# ----------------------------------------------------------------------------- the view

class InspectView(pn.viewable.Viewer):
    """The Inspect tab: controls, forward process, predictions at t, validation curves."""

    tab = param.ClassSelector(class_=InspectState)

    def __init__(self, **params):
        super().__init__(**params)
        p = self.tab.param
        self.text = pn.widgets.TextAreaInput.from_param(p.text, height=110, sizing_mode="stretch_width",
                                                        css_classes=["inspect-text-input"])
        self.t = pn.widgets.FloatSlider.from_param(p.t, sizing_mode="stretch_width", css_classes=["inspect-t"])
        self.seed = pn.widgets.IntInput.from_param(p.mask_seed, width=150)
        self.k = pn.widgets.IntSlider.from_param(p.k, width=200)
        self.redraw = pn.widgets.Button.from_param(p.redraw, width=140, css_classes=["inspect-redraw"])
        self.reset = pn.widgets.Button.from_param(p.use_default, width=170)
        self.notice = pn.pane.Alert("", alert_type="warning", visible=False, sizing_mode="stretch_width")
        self.text_notice = pn.pane.Alert("", alert_type="info", visible=False, sizing_mode="stretch_width")
        self.forward = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["inspect-forward"])
        self.grid = pn.pane.HTML("", sizing_mode="stretch_width", css_classes=["inspect-predictions"])
        self.legend = pn.pane.HTML("", sizing_mode="stretch_width")
        self.table = pn.pane.DataFrame(None, index=False, float_format="{:.3f}".format, max_height=320,
                                       sizing_mode="stretch_width", css_classes=["inspect-table"],
                                       styles={"overflow-y": "auto"})
        self.busy = pn.pane.HTML("", sizing_mode="stretch_width")
        self.plots = pn.Row(sizing_mode="stretch_width")
        self.positions = pn.pane.HoloViews(None, sizing_mode="stretch_width", css_classes=["inspect-positions"])
        self._make_plots()
        self._notices()
        self._forward()
        self._predictions()

    # ---------------------------------------------------------------- drawing

    @param.depends("tab.notice", "tab.text_notice", "tab.validation_error", "tab.busy", watch=True)
    def _notices(self):
        tab = self.tab
        warn = "; ".join(m for m in (tab.notice, tab.validation_error) if m)
        self.notice.object, self.notice.visible = warn, bool(warn)
        self.text_notice.object, self.text_notice.visible = tab.text_notice, bool(tab.text_notice and not tab.notice)
        self.busy.object = f"<i>{html.escape(tab.busy)}</i>" if tab.busy else ""

    def _size(self) -> dict:
        return FONT[self.tab.session.presentation]

    @param.depends("tab.text", "tab.t", "tab.mask_seed", "tab.active", "tab.session.model_info",
                   "tab.session.presentation", watch=True)
    def _forward(self):
        """The masked text: no model involved, so it follows the slider at once."""
        tab = self.tab
        text = tab.shown_text() if tab.usable() else ""  # usable(): it may run before the tab's own watcher
        if not text:
            self.forward.object = ""
            return
        mask = tab.mask(len(text))
        n = int(mask.sum())
        caption = (f'<p class="cap"><b>t = {tab.t:.2f}</b>: {n} of {len(text)} characters masked '
                   f"({100 * n / len(text):.1f}%; expected {100 * tab.t:.0f}%), mask seed {tab.mask_seed}</p>")
        self.forward.object = _style(self._size()) + caption + forward_html(text, mask)

    @param.depends("tab.predictions", "tab.session.presentation", watch=True)
    def _predictions(self):
        result, size = self.tab.predictions, self._size()
        if result is None:
            self.grid.object, self.table.object, self.legend.object = "", None, ""
            return
        table = result["table"]
        n, hits = len(table), int(table["correct"].sum()) if len(table) else 0
        mean_conf = float(table["p1"].mean()) if n else float("nan")
        caption = (f'<p class="cap"><b>Predictions at t = {result["t"]:.2f}</b>: {hits} of {n} masked characters '
                   f"right ({100 * hits / max(n, 1):.0f}%), mean top-1 probability {mean_conf:.2f}</p>")
        self.grid.object = _style(size) + caption + predictions_html(result["text"], result, result["k"])
        self.legend.object = legend_html(size)
        self.table.object = predictions_table(result, result["k"])
        self.table.styles = {"overflow-y": "auto", "font-size": size["base"]}

    @param.depends("tab.session.presentation", watch=True)
    def _make_plots(self):
        """DynamicMaps: moving t or a new result updates the drawn plots in place (no re-render)."""
        import holoviews as hv

        tab, pres = self.tab, self.tab.session.presentation
        self._fraction = hv.DynamicMap(lambda t, mask_seed, text: self.fraction_figure(pres),
                                       streams=[hv.streams.Params(tab, ["t", "mask_seed", "text"])])
        self._accuracy = hv.DynamicMap(lambda t, accuracy: accuracy_plot(accuracy, t, pres),
                                       streams=[hv.streams.Params(tab, ["t", "accuracy"])])
        self.plots[:] = [pn.pane.HoloViews(self._fraction, sizing_mode="stretch_width", css_classes=["inspect-fraction"]),
                         pn.pane.HoloViews(self._accuracy, sizing_mode="stretch_width", css_classes=["inspect-accuracy"])]
        self._draw_positions()

    @param.depends("tab.positions", watch=True)
    def _draw_positions(self):
        self.positions.object = positions_plot(self.tab.positions, self.tab.t, self.tab.session.presentation)

    def fraction_figure(self, presentation: bool = False):
        """The mask-fraction figure for the current knobs (read-only: the PNG download calls it on a
        worker thread)."""
        tab = self.tab
        text = tab.shown_text(update=False) if tab.model is not None else ""
        length = len(text) or (tab.model.config.block_size if tab.model is not None else 256)
        actual = float(tab.mask(len(text)).mean()) if text else None
        return fraction_plot(fraction_check(length, tab.mask_seed), tab.t, actual, presentation)

    # ---------------------------------------------------------------- downloads

    def _downloads(self):
        from ..downloads import download_button, plot_html, plot_png, table_csv

        tab = self.tab

        def preds_csv():
            return None if tab.predictions is None else table_csv(predictions_table(tab.predictions, tab.predictions["k"]))

        def acc_figure():
            return accuracy_plot(tab.accuracy, tab.t)

        return pn.Row(
            download_button("Predictions CSV", "inspect-predictions.csv", preds_csv),
            download_button("Accuracy CSV", "inspect-accuracy.csv",
                            lambda: None if tab.accuracy is None else table_csv(tab.accuracy)),
            download_button("Accuracy plot PNG", "inspect-accuracy.png", lambda: plot_png(acc_figure())),
            download_button("Accuracy plot HTML", "inspect-accuracy.html", lambda: plot_html(acc_figure())),
            download_button("Mask-fraction plot PNG", "inspect-fraction.png", lambda: plot_png(self.fraction_figure())),
            sizing_mode="stretch_width", css_classes=["inspect-downloads"])

    # ---------------------------------------------------------------- layout

    def __panel__(self):
        """Built with the page; nothing is computed until the tab is shown (InspectState.on_shown)."""
        h = lambda s: pn.pane.HTML(f"<h3 style='margin:0.3em 0'>{s}</h3>", sizing_mode="stretch_width")  # noqa: E731
        controls = pn.Column(
            pn.Row(self.t, self.k, sizing_mode="stretch_width"),
            pn.Row(self.seed, self.redraw, self.reset, sizing_mode="stretch_width"),
            self.text, sizing_mode="stretch_width")
        return pn.Column(
            self.notice, controls, self.text_notice, self.busy,
            h("Forward process: the text the model sees at t"), self.forward,
            h("Predictions at t: the model's candidates for each █"), self.legend, self.grid,
            pn.Accordion(("Candidates as a table", self.table), sizing_mode="stretch_width"),
            h("Masking statistics and accuracy on validation data"), self.plots, self.positions,
            self._downloads(), sizing_mode="stretch_width", css_classes=["inspect-tab"])


def build(state):
    """(InspectState, its view) for the session's ExplorerState."""
    tab = InspectState(state)
    return tab, InspectView(tab=tab)
