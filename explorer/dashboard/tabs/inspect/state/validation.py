"""Inspect's validation text: VAL_ROWS held-out rows of the loaded model's context, loaded on a runtime
Task when the tab is first shown. The accuracy curve and the mean confidence by position are measured
on them, and their first row is the default text the tab masks."""
from __future__ import annotations

from .... import checkpoints
from ....runtime.tasks import Task

VAL_ROWS = 16  # validation rows for the accuracy curve: ~1 s per t for the Shakespeare model on a busy CPU


class ValidationText:
    """The held-out rows of `tab`'s model: `task.result` is a (VAL_ROWS, context) tensor, or None
    while loading or when this server does not have them (`task.error` says why)."""

    def __init__(self, tab, device, dispatch):
        self.tab = tab
        self.task = Task("validation text", device, dispatch)

    @property
    def tokens(self):
        return self.task.result

    def fetch(self) -> None:
        """Load the rows in the background (the tab hears of them through the Task's `result`)."""
        model = self.tab.model
        self.task.start(lambda job, report: held_out(model), status="loading validation text …")

    def excerpt(self) -> str:
        """The first row as text: the tab's default text to mask."""
        return self.tab.model.tokenizer.decode(self.tokens[0].tolist())

    @property
    def error(self) -> str:
        """Why the rows are missing, for the tab's notice ('' = they are not)."""
        return self.task.error.removeprefix(f"{self.task.label} failed: ")


def held_out(model):
    """VAL_ROWS held-out rows of the model's context (checkpoints.validation_tokens), on the worker
    thread. ValueError when this server does not have them (a checkpoint trained on a file that is
    not here): the Task logs it as one line, and the tab says so and asks for a typed text."""
    try:
        return checkpoints.validation_tokens(model, model.config.block_size, VAL_ROWS)
    except ValueError as e:
        why = str(e).removeprefix("no validation data for this checkpoint: ")
        raise ValueError(f"the held-out text is not available on this server: {why}") from None
