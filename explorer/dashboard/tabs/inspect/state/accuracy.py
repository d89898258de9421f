"""Inspect's accuracy vs t: the model's accuracy and mean confidence at masked positions of the
validation text, one t of ACC_TS at a time (each point shown as it arrives), as a runtime Task;
cached process-wide (runtime.cache.INSPECT) by point as well as whole. Why by point: a class opening one
Inspect link at once starts one curve per session before any is complete, and the device takes one
session's point at a time, so each later session finds the point the first one measured instead of
measuring it again (on a CPU a point of a character model's curve costs about a second)."""
from __future__ import annotations

import pandas as pd

from .....metrics import accuracy_vs_t
from ....runtime.cache import INSPECT, model_key
from ....runtime.tasks import Task

ACC_TS = tuple(round(0.1 * i, 1) for i in range(1, 10))


class AccuracyCurve:
    """`task.result`: metrics.accuracy_vs_t rows computed so far (one per t of ACC_TS when complete),
    on the tab's validation rows (`tab.tokens`)."""

    def __init__(self, tab, device, dispatch):
        self.tab = tab
        self.task = Task("accuracy vs t", device, dispatch)
        self.task.param.watch(self._arrived, "result")

    def refresh(self) -> None:
        """The cached curve, else one t at a time in the background (one start of the Task per t)."""
        tab = self.tab
        if tab.tokens is None or not tab.usable():
            return
        cached = INSPECT.get(self._key())
        if cached is not None:
            self.task.show(cached, "from cache")
        else:
            self._next(None)

    def _key(self) -> tuple:
        return ("accuracy", model_key(self.tab.model), tuple(self.tab.tokens.shape))

    def _next(self, done: pd.DataFrame | None) -> None:
        """Measure the next t of ACC_TS and hand in the rows so far, `done` and the new one."""
        tab = self.tab
        if tab.model is None:  # the session closed (or the model is changing) while a row was measured
            return
        model, tokens, key = tab.model, tab.tokens, self._key()
        n = 0 if done is None else len(done)
        self.task.start(lambda job, report: _accuracy_rows(model, tokens, done, key),
                        status=f"accuracy vs t: {n} of {len(ACC_TS)} …")

    def _arrived(self, event) -> None:
        """Rows arrived (on the UI thread, from the Task): go on with the next t until ACC_TS is done.
        A superseded or cleared job never hands in rows (Task.show / clear forget it)."""
        table = event.new
        if table is not None and len(table) < len(ACC_TS) and not self.task.running:
            self._next(table)


def _accuracy_rows(model, tokens, done: pd.DataFrame | None, key: tuple) -> pd.DataFrame:
    """`done` and one more row of metrics.accuracy_vs_t (at the next t of ACC_TS), that row from the cache
    when any session measured it already (it runs on the device's turn, so a point measured by another
    session is in the cache by then); the table cached when complete."""
    t = ACC_TS[0 if done is None else len(done)]
    row = INSPECT.get(key + (t,))
    if row is None:
        row = accuracy_vs_t(model, tokens, ts=[t], seed=0)
        INSPECT.put(key + (t,), row)
    table = row if done is None else pd.concat([done, row], ignore_index=True)
    if len(table) == len(ACC_TS):
        INSPECT.put(key, table)
    return table
