"""Inspect's state: its knobs (t, mask seed, k, the text) and its four kinds of background work as
runtime Tasks (validation text, predictions at t, accuracy vs t, mean per-position confidence).

Nothing is computed until the tab is first shown (on_shown sets `active`): most sessions never open it.
Results are cached process-wide per (model, t, ...): predictions and the accuracy curve in
runtime.cache.INSPECT, the per-position confidence through runtime.confidence (shared with Explore).
"""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import param

from ....metrics import accuracy_vs_t, topk_predictions
from ...runtime import checkpoints
from ...runtime.cache import INSPECT, model_key
from ...runtime.confidence import cached_mean_confidence, mean_confidence_table
from ...runtime.tasks import Task
from ..base import TabState
from .masking import draw_mask, positions, prepare_text

VAL_ROWS = 16  # validation rows for the accuracy curve: ~1 s per t for the Shakespeare model on a busy CPU
ACC_TS = tuple(round(0.1 * i, 1) for i in range(1, 10))


class InspectState(TabState):
    """The Inspect tab's knobs and its Tasks; the results are the Tasks' (`predictions`, `accuracy`,
    `positions`), set on the UI thread by them."""

    URL_PARAMS = ("t", "mask_seed", "k", "nucleus_p", "nucleus_at", "default_text", "text")  # in this order: see url_carries

    text = param.String("", label="Text", doc="The clean text to mask (default: a validation excerpt)")
    default_text = param.Boolean(True, label="Validation text",
                                 doc="Use an excerpt of the checkpoint's validation split as the text")
    t = param.Number(0.5, bounds=(0.0, 1.0), step=0.01, label="Masking ratio t",
                     doc="Each character is masked with probability t (t = 1: all [MASK])")
    mask_seed = param.Integer(0, bounds=(0, 2**31 - 1), label="Mask seed",
                              doc="Seed of the random mask: the same seed and t give the same mask")
    k = param.Integer(3, bounds=(1, 10), label="Candidates (k)", doc="Candidates shown per masked position")
    nucleus_p = param.Number(0.9, bounds=(0.05, 1.0), step=0.05, label="Top-p (nucleus)",
                             doc="Seed 001's top-p: which candidates survive at one masked position, with "
                                 "their probabilities renormalised")
    nucleus_at = param.Integer(-1, bounds=(-1, 100_000), label="Top-p position",
                               doc="The masked position the top-p figure shows (-1 = the first masked one)")
    redraw = param.Event(label="Re-draw mask", doc="Draw a new random mask (a new mask seed)")
    use_default = param.Event(label="Use validation text", doc="Put the validation excerpt back")
    active = param.Boolean(False, doc="The tab has been shown: compute its results from now on")
    notice = param.String("", doc="What is wrong with the model or the text ('' = nothing)")
    text_notice = param.String("", doc="What was changed in the text to show it to the model")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        dispatch = lambda callback: self.session.dispatch(callback)  # read when called: a dispatcher set later is used
        device = session.device  # model calls take turns there with every session's sampler runs
        self.validation_task = Task("validation text", device, dispatch)
        self.predictions_task = Task("predictions", device, dispatch)
        self.accuracy_task = Task("accuracy vs t", device, dispatch)
        self.positions_task = Task("per-position confidence", device, dispatch)
        self._default = None  # the validation excerpt of the loaded model
        self._quiet = False  # set while the state changes `text` itself (not the user's edit)
        self.validation_task.param.watch(self._validation_arrived, "result")
        self.validation_task.param.watch(self._validation_failed, "error")
        self.accuracy_task.param.watch(self._accuracy_arrived, "result")

    def tasks(self) -> tuple[Task, ...]:
        return self.validation_task, self.predictions_task, self.accuracy_task, self.positions_task

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
        """runtime.confidence.mean_confidence_table at t (attrs["t"]: the t it was measured at)."""
        return self.positions_task.result

    @property
    def tokens(self):
        """(VAL_ROWS, context) validation tokens of the loaded model, or None."""
        return self.validation_task.result

    @property
    def validation_error(self) -> str:
        """What failed in the background, for the notice ('' = nothing)."""
        val = self.validation_task.error.removeprefix(f"{self.validation_task.label} failed: ")
        errors = [f"{val}; type a text to inspect"] if val else []
        errors += [task.error for task in (self.predictions_task, self.accuracy_task, self.positions_task)
                   if task.error]
        return "; ".join(errors)

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
            loading = self.default_text and self._default is None and not self.validation_task.error
            notices.append("the validation text is loading …" if loading
                           else "the text is empty: type some text, or press 'Use validation text'")
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

    def _set_text(self, text: str) -> None:
        self._quiet = True
        try:
            self.text = text
        finally:
            self._quiet = False

    # ---------------------------------------------------------------- validation data

    def _fetch_validation(self) -> None:
        model = self.model
        self.validation_task.start(lambda job, report: _held_out(model), status="loading validation text …")

    def _validation_arrived(self, event) -> None:
        """The validation tokens are in: show the excerpt (unless the text was edited) and start the rest."""
        if event.new is None:
            return
        self._default = self.model.tokenizer.decode(event.new[0].tolist())
        if self.default_text:
            self._set_text(self._default)
        self.refresh_predictions()
        self.refresh_accuracy()
        self.refresh_positions()

    def _validation_failed(self, event) -> None:
        """No validation data (e.g. no corpus file): a typed text still gets its predictions."""
        if event.new:
            self.refresh_predictions()

    # ---------------------------------------------------------------- predictions at t

    def refresh_predictions(self) -> bool:
        """Show the cached predictions for (model, text, t, mask, k), or compute them in the background;
        False when there is nothing to predict."""
        if not self.active or not self.usable():
            return False
        text = self.shown_text()
        if not text:
            self.predictions_task.clear()
            return False
        model, t, k = self.model, float(self.t), self.k
        mask = self.mask(positions(model, text))  # drawn here: the prediction is at the mask the forward view draws
        key = ("preds", model_key(model), text, t, self.mask_seed, k)
        cached = INSPECT.get(key)
        if cached is not None:
            self.predictions_task.show(cached, "from cache")
        else:
            self.predictions_task.start(lambda job, report: _predict(model, text, t, mask, k, key),
                                        status="predicting …")
        return True

    # ---------------------------------------------------------------- validation curves

    def refresh_accuracy(self) -> None:
        """Accuracy and mean confidence vs t on validation text: cached, else one t at a time in the
        background (one start of the Task per t), each point shown as it arrives."""
        if self.tokens is None or not self.usable():
            return
        cached = INSPECT.get(self._accuracy_key())
        if cached is not None:
            self.accuracy_task.show(cached, "from cache")
        else:
            self._next_accuracy(None)

    def _accuracy_key(self) -> tuple:
        return ("accuracy", model_key(self.model), tuple(self.tokens.shape))

    def _next_accuracy(self, done: pd.DataFrame | None) -> None:
        """Measure the next t of ACC_TS and hand in the rows so far, `done` and the new one."""
        if self.model is None:  # the session closed (or the model is changing) while a row was measured
            return
        model, tokens, key = self.model, self.tokens, self._accuracy_key()
        n = 0 if done is None else len(done)
        self.accuracy_task.start(lambda job, report: _accuracy_rows(model, tokens, done, key),
                                 status=f"accuracy vs t: {n} of {len(ACC_TS)} …")

    def _accuracy_arrived(self, event) -> None:
        """Rows arrived (on the UI thread, from the Task): go on with the next t until ACC_TS is done.
        A superseded or cleared job never hands in rows (Task.show / clear forget it)."""
        table = event.new
        if table is not None and len(table) < len(ACC_TS) and not self.accuracy_task.running:
            self._next_accuracy(table)

    # ---------------------------------------------------------------- mean per-position confidence

    def refresh_positions(self) -> None:
        """The mean per-position confidence at t on validation text (runtime.confidence: cached per
        model, t and length, shared with Explore's view of it)."""
        if not self.active or self.tokens is None or not self.usable():
            return
        model, t = self.model, float(self.t)
        length = model.config.block_size
        cached = cached_mean_confidence(model, t, length)
        if cached is not None:
            self.positions_task.show(cached, "from cache")
        else:
            self.positions_task.start(lambda job, report: mean_confidence_table(model, t, length),
                                      status="mean confidence by position …")

    def close(self) -> None:
        for task in self.tasks():
            task.close()


def _held_out(model):
    """VAL_ROWS held-out rows of the model's context (runtime.checkpoints.validation_tokens), on the
    worker thread. ValueError when this server does not have them (a checkpoint trained on a file
    that is not here): the Task logs it as one line, and the tab says so and asks for a typed text."""
    try:
        return checkpoints.validation_tokens(model, model.config.block_size, VAL_ROWS)
    except ValueError as e:
        raise ValueError(f"the held-out text is not available on this server ({e})") from None


def _predict(model, text: str, t: float, mask: np.ndarray, k: int, key: tuple) -> dict:
    """metrics.topk_predictions at the given mask, labelled with what it was asked, and cached."""
    result = topk_predictions(model, text, t, mask=mask, k=k)
    result["text"], result["t"], result["k"] = text, t, k
    INSPECT.put(key, result)
    return result


def _accuracy_rows(model, tokens, done: pd.DataFrame | None, key: tuple) -> pd.DataFrame:
    """`done` and one more row of metrics.accuracy_vs_t (at the next t of ACC_TS); cached when complete."""
    row = accuracy_vs_t(model, tokens, ts=[ACC_TS[0 if done is None else len(done)]], seed=0)
    table = row if done is None else pd.concat([done, row], ignore_index=True)
    if len(table) == len(ACC_TS):
        INSPECT.put(key, table)
    return table
