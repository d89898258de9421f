"""Explore's "more samples": N samples at the session's knobs and template in one batched run of the real
sampler (the 5- and 8-sample showcases of "Generation: Iterative Unmasking"), their texts the result of a
runtime Task."""
from __future__ import annotations

import param

from ....runtime.limits import run_calls, table_bytes
from ....runtime.tasks import Task
from ....session import run_plan, sample_canvas
from ...base import TabState


class SamplesState(TabState):
    """How many samples, the button, and `samples`: the Task whose result is their texts."""

    more_n = param.Integer(5, bounds=(2, 16), label="Samples",
                           doc="How many samples at once, at the sidebar's knobs")
    more = param.Event(label="Sample more", doc="Draw that many samples at the current knobs, in one batch")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        self.samples = Task("more samples", session.device, session.dispatch, session.share)

    @param.depends("more", watch=True)
    def sample_more(self, *, wait: bool = False) -> bool:
        """`more_n` samples at the session's knobs and template in one batched run of the real sampler
        (row i draws its own noise from the run's seed); their texts become `samples.result`. False,
        with the Task's error set, when there is no model or the batch is over the server's limits."""
        s = self.session
        try:
            if s.model is None:
                raise ValueError("no model is loaded yet")
            model, config, canvas, n = s.model, s.sampler_config(), s.canvas(), self.more_n
            rows = run_plan(model, config, canvas).max_steps
            s.share.limits.check_calls(f"{n} samples", run_calls(max(rows, 1), config.cfg_scale > 0) * n)
            s.share.reserve("explore.samples", table_bytes(n, canvas.length), f"{n} samples")
        except ValueError as e:  # LimitExceeded too
            self.samples.error = str(e)
            return False
        work = lambda job, report: sample_canvas(model, config, canvas, batch_size=n, record=False).texts()  # noqa: E731
        return self.samples.start(work, status=f"sampling {n} …", wait=wait) is not None

    def close(self) -> None:
        self.samples.close()
        self.session.share.release("explore.samples")
        super().close()
