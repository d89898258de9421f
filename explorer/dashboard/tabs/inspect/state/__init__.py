"""Inspect's state: its knobs (t, mask seed, k, the text, several texts and t) and its five kinds of
background work, one sub-state each, each with its runtime Task: validation.py (the validation text),
predictions.py (predictions at t), several.py (several texts and t in one figure), accuracy.py (accuracy
vs t) and positions.py (mean per-position confidence).

The knobs are the tab's (the URL carries them, and more than one part reads t); each part reads them
from here. Nothing is computed until the tab is first shown (on_shown sets `active`): most sessions
never open it. Results are cached process-wide per (model, t, ...): predictions and the accuracy curve
in runtime.cache.INSPECT, the per-position confidence through mean_confidence.py (shared with Explore).
"""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import param

from .....sampling.uniform import model_process
from ...base import TabState
from ..masking import draw_mask, prepare_text
from .accuracy import ACC_TS, AccuracyCurve
from .positions import PositionConfidence
from .predictions import Predictions
from .several import MAX_TEXTS, MAX_TS, TEXT_SEP, SeveralPredictions, parse_texts, parse_ts
from .validation import VAL_ROWS, ValidationText


def ratios_table(length: int, n_tokens: int | None = None) -> pd.DataFrame:
    """metrics.training_ratios at `length` (and `n_tokens`: a uniform-state model's noise), drawn once per
    server: the draws are seeded, so every session's figure is the same, and each model a session loaded
    drew its 2 x 2000 rows again. Read-only: the table is shared."""
    from .....metrics import training_ratios
    from ....runtime.cache import INSPECT

    return INSPECT.get_or_make(("training_ratios", int(length), n_tokens),
                               lambda: training_ratios(length, n_tokens=n_tokens))

__all__ = ["ACC_TS", "MAX_TEXTS", "MAX_TS", "VAL_ROWS", "InspectState"]


class InspectState(TabState):
    """The Inspect tab's knobs and its Tasks; the results are the Tasks' (`predictions`, `accuracy`,
    `positions`), set on the UI thread by them."""

    URL_PARAMS = ("t", "mask_seed", "k", "nucleus_p", "nucleus_at", "default_text", "text",  # in this order: see url_carries
                  "ts", "texts", "first")

    text = param.String("", label="Text", doc="The clean text to mask (default: a validation excerpt)")
    default_text = param.Boolean(True, label="Validation text",
                                 doc="Use an excerpt of the checkpoint's validation split as the text")
    t = param.Number(0.5, bounds=(0.0, 1.0), step=0.01, label="Masking ratio t",
                     doc="Each character is masked with probability t (t = 1: all [MASK])")
    mask_seed = param.Integer(0, bounds=(0, 2**31 - 1), label="Mask seed",
                              doc="Seed of the random mask: the same seed and t give the same mask")
    k = param.Integer(3, bounds=(1, 10), label="Candidates (k)", doc="Candidates shown per masked position")
    nucleus_p = param.Number(0.9, bounds=(0.05, 1.0), step=0.05, label="Top-p (nucleus)",
                             doc="Top-p: which candidates survive at one masked position, with "
                                 "their probabilities renormalised")
    nucleus_at = param.Integer(-1, bounds=(-1, 100_000), label="Top-p position",
                               doc="The masked position the top-p figure shows (-1 = the first masked one)")
    ts = param.String("", label="Several t (comma-separated)",
                      doc=f"Masking ratios shown one under another, e.g. 0, 0.2, 0.4, 0.6, 0.8, 1: each text "
                          f"masked at each (the same mask seed: nested masks) with the model's predictions; "
                          f"empty: the slider's t; at most {MAX_TS}")
    texts = param.String("", label=f"Several texts (separated by {TEXT_SEP})",
                         doc=f"Texts shown one under another, separated by {TEXT_SEP}, each masked at each t "
                             f"above with the model's predictions; empty: the text below; at most {MAX_TEXTS}")
    first = param.Selector(default="statistics", objects=["statistics", "predictions", "top-p"],
                           label="On a projector first",
                           doc="Which figure presentation mode puts at the top: the masking statistics on "
                               "validation data, this text's predictions (its masked text, candidates and loss), "
                               "or the top-p figure")
    redraw = param.Event(label="Re-draw mask", doc="Draw a new random mask (a new mask seed)")
    use_default = param.Event(label="Use validation text", doc="Put the validation excerpt back")
    active = param.Boolean(False, doc="The tab has been shown: compute its results from now on")
    notice = param.String("", doc="What is wrong with the model or the text ('' = nothing)")
    several_notice = param.String("", doc="What is wrong with, or was changed in, the several texts and t")
    text_notice = param.String("", doc="What was changed in the text to show it to the model")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        dispatch = lambda callback: self.session.dispatch(callback)  # read when called: a dispatcher set later is used
        device = session.device  # model calls take turns there with every session's sampler runs
        self.validation = ValidationText(self, device, dispatch)
        self.prediction = Predictions(self, device, dispatch)
        self.accuracy_curve = AccuracyCurve(self, device, dispatch)
        self.position_confidence = PositionConfidence(self, device, dispatch)
        self.several_part = SeveralPredictions(self, device, dispatch)
        # each part's Task, by the names the view and the tests read
        self.validation_task, self.predictions_task = self.validation.task, self.prediction.task
        self.several_task = self.several_part.task
        self.accuracy_task, self.positions_task = self.accuracy_curve.task, self.position_confidence.task
        self._default = None  # the validation excerpt of the loaded model
        self._quiet = False  # set while the state changes `text` itself (not the user's edit)
        self.validation_task.param.watch(self._validation_arrived, "result")
        self.validation_task.param.watch(self._validation_failed, "error")

    def tasks(self) -> tuple:
        return self.validation_task, self.predictions_task, self.accuracy_task, self.positions_task, self.several_task

    def check_link_value(self, name: str, value) -> None:
        """A link's lists are read as the figure reads them (urlstate.UrlState refuses a bad one, or one
        over its cap, with the link's notice)."""
        if name == "ts":
            parse_ts(value)
        elif name == "texts":
            parse_texts(value)

    def url_carries(self, name: str) -> bool:
        """An edited text travels in the link (so a shared link shows what was inspected); the
        validation excerpt does not (the link says default_text and the model supplies it). The text
        comes after default_text in the link, so applying it finds the default already switched off."""
        return name != "text" or not self.default_text

    # ---------------------------------------------------------------- results (the Tasks')

    @property
    def predictions(self) -> dict | None:
        """metrics.topk_predictions for the current text, t, mask and k, with its text, t and k."""
        return self.predictions_task.result

    @property
    def accuracy(self) -> pd.DataFrame | None:
        """metrics.accuracy_vs_t rows computed so far (one per t of ACC_TS when complete)."""
        return self.accuracy_task.result

    @property
    def positions(self) -> pd.DataFrame | None:
        """mean_confidence.mean_confidence_table at t (attrs["t"]: the t it was measured at)."""
        return self.positions_task.result

    @property
    def several(self) -> dict | None:
        """several.py's rows for the texts and t asked (None until computed, or when not asked)."""
        return self.several_task.result

    @property
    def tokens(self):
        """(VAL_ROWS, context) validation tokens of the loaded model, or None."""
        return self.validation_task.result

    @property
    def validation_error(self) -> str:
        """What failed in the background, for the notice ('' = nothing)."""
        val = self.validation.error
        errors = [f"{val}; type a text to inspect"] if val else []
        errors += [task.error for task in (self.predictions_task, self.accuracy_task, self.positions_task)
                   if task.error]
        return "; ".join(errors)

    # ---------------------------------------------------------------- what the model is shown

    @property
    def model(self):
        return self.session.model

    def context_length(self) -> int:
        """Positions the session's model reads: the loaded model's, else (before its load) its checkpoint's
        as the metadata the session's knobs were fitted to gives it, else 256 (a Hugging Face model not
        loaded yet)."""
        fitted = self.session.knobs_model()
        return fitted.config.block_size if fitted is not None else 256

    def usable(self) -> bool:
        """A diffusion model is loaded (else `notice` says why not)."""
        model = self.model
        if model is None:
            self.notice = ""
            return False
        name = self.session.model_info.get("name", "this checkpoint")
        if model.config.kind != "diffusion":
            self.notice = (f"Inspect shows what a masked-diffusion model predicts at masked positions; "
                           f"{name} is a causal (left-to-right) model, which never sees [MASK]. "
                           "Pick a diffusion checkpoint in the sidebar.")
            return False
        if model_process(model) == "uniform" and getattr(model.config, "cached", False):
            # a DiffusionGemma-style model denoises one block over a cache of what precedes it: it has no
            # call that shows it a whole noised text
            self.notice = (f"Inspect shows what a model predicts for the whole of a noised text; {name} "
                           "denoises one block at a time over a cache of the text before it. Explore and "
                           "Compare run its own process.")
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
            missing = bool(self.validation_task.error)  # no held-out text: its button cannot help (the notice says why)
            if missing:
                notices.append("the text is empty: type some text")
            elif self.default_text and self._default is None:
                notices.append("the validation text is loading …")
            else:
                notices.append("the text is empty: type some text, or press 'Use validation text'")
        elif not text:
            notices.append("nothing is left to show the model")
        if update:
            self.text_notice = "; ".join(notices)
        return text

    def stale(self, result: dict) -> bool:
        """True when `result` answers another text, t, mask or k than the knobs now ask."""
        text = self.shown_text(update=False) if self.model is not None else ""
        if result["text"] != text or result["t"] != float(self.t) or result["k"] != self.k:
            return True
        return not np.array_equal(result["mask"], self.mask(len(result["mask"])))

    def nucleus_position(self) -> int | None:
        """The masked position the top-p figure shows: `nucleus_at` when it is masked, else the first."""
        result = self.predictions
        if result is None or not len(result["table"]):
            return None
        masked = list(result["table"]["position"])
        return self.nucleus_at if self.nucleus_at in masked else masked[0]

    def mask(self, length: int) -> np.ndarray:
        return draw_mask(length, self.t, self.mask_seed)

    # ---------------------------------------------------------------- several texts and t

    def several_on(self) -> bool:
        """The link or the user asked for several texts or t (else the figure is not shown)."""
        return bool(self.ts.strip() or self.texts.strip())

    def several_ts(self) -> tuple[float, ...]:
        """The t of each row: `ts`, or the slider's t (a bad `ts` is named in several_notice)."""
        try:
            return parse_ts(self.ts) or (float(self.t),)
        except ValueError:
            return (float(self.t),)

    def several_texts(self, update: bool = False) -> tuple[str, ...]:
        """The texts as the model is shown them (prepare_text): `texts`, or the tab's one text; sets
        several_notice when `update`."""
        model, notices = self.model, []
        try:
            parse_ts(self.ts)
        except ValueError as e:
            notices.append(f"several t: {e}; showing t = {float(self.t):g}")
        try:
            raw = parse_texts(self.texts)
        except ValueError as e:
            notices.append(f"several texts: {e}; showing the text below")
            raw = ()
        out = []
        if model is not None:
            for i, text in enumerate(raw):
                shown, changed = prepare_text(model.tokenizer, text, model.config.block_size)
                notices += [f"text {i + 1}: {c}" for c in changed]
                if shown:
                    out.append(shown)
        if not raw:
            one = self.shown_text(update=False) if model is not None else ""
            out = [one] if one else []
        if update:
            self.several_notice = "; ".join(notices)
        return tuple(out)

    # ---------------------------------------------------------------- events

    def on_model_changed(self) -> None:
        for task in self.tasks():
            task.clear()
        self._default = None
        if self.active and self.usable():
            self._fetch_validation()

    def on_shown(self) -> None:
        """The tab is on screen (app.watch_shown): compute from now on."""
        self.active = True

    @param.depends("active", watch=True)
    def _activated(self):
        if self.active and self.tokens is None and self.usable():
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

    @param.depends("ts", "texts", "t", "mask_seed", "k", "text", "active", watch=True)
    def _several_changed(self):
        self.refresh_several()

    def _set_text(self, text: str) -> None:
        self._quiet = True
        try:
            self.text = text
        finally:
            self._quiet = False

    # ---------------------------------------------------------------- the parts, started

    def _fetch_validation(self) -> None:
        self.validation.fetch()

    def _validation_arrived(self, event) -> None:
        """The validation tokens are in: show the excerpt (unless the text was edited) and start the rest."""
        if event.new is None:
            return
        self._default = self.validation.excerpt()
        before = self.text
        if self.default_text:
            self._set_text(self._default)
        # A new text has asked for its predictions already (_text_edited). Asking twice in this one UI
        # callback showed a cached result twice, and the top-p pane built a figure for each: Bokeh
        # merges the held changes into one patch, which then changed the dropped first figure, one the
        # page never got ("reference ... isn't known"); the page rejected the whole patch and stayed
        # at "the validation text is loading" (a repeat visit, whose results all come from the caches).
        if self.text == before:
            self.refresh_predictions()
            self.refresh_several()
        self.refresh_accuracy()
        self.refresh_positions()

    def _validation_failed(self, event) -> None:
        """No validation data (e.g. no corpus file): a typed text still gets its predictions."""
        if event.new:
            self.refresh_predictions()
            self.refresh_several()

    def refresh_predictions(self) -> bool:
        """Predictions at t for the knobs now (predictions.py); False when there is nothing to predict."""
        return self.prediction.refresh()

    def refresh_several(self) -> bool:
        """Several texts and t in one figure (several.py); False when not asked or nothing to show."""
        if self.model is not None:
            self.several_texts(update=True)
        return self.several_part.refresh()

    def refresh_accuracy(self) -> None:
        """Accuracy and mean confidence vs t on validation text (accuracy.py)."""
        self.accuracy_curve.refresh()

    def refresh_positions(self) -> None:
        """The mean per-position confidence at t on validation text (positions.py)."""
        self.position_confidence.refresh()

    def close(self) -> None:
        for task in self.tasks():
            task.close()
