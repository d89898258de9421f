"""Explore's quality vs steps: experiments.sweep over steps x strategies at the session's other knobs,
a runtime Task that takes turns with the runs on the device, cached process-wide per knobs.

After a run it starts by itself when cached or cheap (`auto_sweep`); a knob change cancels a sweep
whose cache key no longer matches. The AR judge (an AR checkpoint of the model's alphabet) scores
text and adds the left-to-right baseline.
"""
from __future__ import annotations

import itertools
import os

import param

from .....experiments import QUALITY_METRICS, read_axes
from .....names import STRATEGIES
from .... import checkpoints
from ....runtime.cache import SWEEP_RATES, SWEEPS
from ....runtime.limits import expected_cost, measured_rate, sweep_size, sweep_tokens_in_flight, table_bytes, took
from ....runtime.tasks import Task, TaskCancelled
from ...base import TabState

AUTO_SWEEP_SECONDS = 10.0  # the quality sweep starts by itself after a run only when estimated cheaper
STEPS_GRID = (1, 2, 4, 8, 16, 32, 64)  # the quality sweep's x axis (steps up to the canvas's length)
AUTO_SWEEP_ENV = "MDLM_EXPLORER_AUTO_SWEEP"


def auto_sweep_default() -> bool:
    """Whether a new session computes quality vs steps after each run: on, unless the server was
    started with --no-auto-sweep (MDLM_EXPLORER_AUTO_SWEEP=0). A class of many sessions on one CPU
    turns it off: each sweep costs many runs' worth of device time. Compute still works."""
    return os.environ.get(AUTO_SWEEP_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def sweep_grid(n_generate: int) -> list[int]:
    """The quality sweep's step counts: STEPS_GRID up to the positions the canvas generates."""
    return [n for n in STEPS_GRID if n <= max(n_generate, 1)] or [1]


def held_out_reference(model, judge, length: int, template: str | None, n: int = 16):
    """Held-out text of the canvas's length for the quality sweep's reference row, which gives text its
    `ref_distance` (what ranks text: gen-PPL alone crowns `the the the`). None for patterns, without a
    judge, for a template (its given text would be scored too) or without held-out data here."""
    if judge is None or template or model.config.kind != "diffusion":
        return None
    try:
        return checkpoints.validation_tokens(model, length, n).numpy()
    except ValueError:
        return None


class QualityState(TabState):
    """The sweep's knobs and `quality`, the Task whose result is its (table, summary). Reads the run's
    `frames`, `trajectory` and `running` (run.py) to estimate its cost and to wait for the run."""

    sweep_strategies = param.ListSelector(default=["confidence", "random"], objects=list(STRATEGIES),
                                          label="Strategies", doc="Strategies compared in quality vs steps")
    sweep_x = param.Selector(default="steps", objects=["steps", "nfe"], label="x axis",
                             doc="Plot against denoising steps or model calls (NFE)")
    sweep_metric = param.Selector(default="auto", objects=["auto", *QUALITY_METRICS], label="Quality metric",
                                  doc="auto: pattern quality (period >= 2) for patterns; for text the distance "
                                      "from held-out text when the server has it, else gen-PPL with an AR "
                                      "judge, else the valid-word fraction")
    sweep_samples = param.Integer(4, bounds=(1, 64), label="Samples per point",
                                  doc="Samples per (steps, strategy) point: more = tighter bands, slower")
    sweep_auto = param.Boolean(True, label=f"Compute after each run, if under {AUTO_SWEEP_SECONDS:g} s",
                               doc="Start the quality-vs-steps sweep when a run finishes, if it is cached or "
                                   f"estimated under {AUTO_SWEEP_SECONDS:g} s of model calls; a longer one waits "
                                   "for Compute")
    compute_sweep = param.Event(label="Compute", doc="Compute quality vs steps for the current knobs")
    stop_sweep = param.Event(label="Stop", doc="Stop the quality-vs-steps sweep")

    def __init__(self, session, **params):
        params.setdefault("sweep_auto", auto_sweep_default())  # `serve --no-auto-sweep` turns it off for all
        super().__init__(session, **params)
        limit = self.auto_limit()  # the label says the bound this server applies, not the panel's own
        self.param.sweep_auto.label = f"Compute after each run, if under {limit:g} s"
        self.param.sweep_auto.doc = ("Start the quality-vs-steps sweep when a run finishes, if it is cached or "
                                     f"estimated under {limit:g} s of model calls; a longer one waits for Compute")
        self.quality = Task("quality sweep", session.device, session.dispatch, session.share)
        self._judge_name = None

    def reads_strategy(self) -> bool:
        """Whether the loaded model's run reads the strategies compared (experiments.read_axes: a
        uniform-state run accepts by the entropy bound, in no strategy's order)."""
        return "strategy" in read_axes({"strategy": []}, self.session.model)

    def axes(self, n_generate: int) -> dict:
        """The sweep's axes: steps up to the canvas, and the strategies compared where the run reads them."""
        return read_axes({"steps": sweep_grid(n_generate), "strategy": list(self.sweep_strategies)},
                         self.session.model)

    def _nothing_compared(self) -> bool:
        return self.reads_strategy() and not self.sweep_strategies

    def reset_quality(self) -> None:
        """A new model: find its AR judge, and forget the last model's sweep."""
        s = self.session
        self._judge_name = checkpoints.find_judge(s.model, s.param.checkpoint.objects) if s.model else None
        self.quality.clear()
        s.share.release("explore.quality")

    # ------------------------------------------------------------------ after a run

    def sweep_cost(self, canvas, template: str | None) -> tuple[int, float]:
        """(model calls, seconds) the quality sweep should take from `canvas`: the Sweep tab's cost model
        (limits.expected_cost: batched calls at the rate an earlier sweep of this checkpoint measured on
        this server, else at the model's size), so the same knobs get the same estimate. It was the last
        run's time per call times every sample's calls, as if none were batched: a few calls timed under
        whatever else the server was doing put similar runs' estimates anywhere from 17 s to 139 s."""
        s = self.session
        vary = self.axes(canvas.n_generate)
        cells = [dict(zip(vary, values)) for values in itertools.product(*vary.values())]
        judge = self._judge_name is not None
        return expected_cost(s.model_info.get("n_params", 0), cells, self.sweep_samples, canvas.length,
                             judge and template is None, judge, SWEEP_RATES.get(s.model_info.get("name")))

    def auto_limit(self) -> float:
        """The seconds a quality sweep may be estimated at to start after a run by itself: the panel's own
        AUTO_SWEEP_SECONDS, or the server's shorter limit on what starts without a click
        (--auto-start-seconds), which _admit_sweep applies too."""
        return min(AUTO_SWEEP_SECONDS, self.session.share.limits.auto_start_seconds)

    def auto_sweep(self, traj) -> None:
        """After a run: the sweep if it is cached or cheap (AUTO_SWEEP_SECONDS), else say what it
        would cost and leave it to the Compute button (a 60-sample sweep kept a 2-core laptop busy for
        50 s after every run)."""
        s = self.session
        try:
            cached = SWEEPS.get(self.sweep_key()) is not None
            calls, estimate = self.sweep_cost(s.canvas(), s.prompt_template() or None)
        except ValueError:  # start_sweep says why
            cached, calls, estimate = False, 0, 0.0
        limit = self.auto_limit()
        if cached or estimate <= limit or self._nothing_compared():
            self.start_sweep(by_itself=True)
            return
        self.quality.clear()
        self.quality.status = (f"not computed after this run: ≈ {calls:,} model calls, {took(estimate)} on this "
                               f"server, over the {limit:g} s a sweep may take to start by itself; "
                               f"press Compute")

    def strategy_note(self) -> str:
        """Which strategies the plot compares, and whether the sidebar's is one of them: the plot keeps
        its own list when the sidebar's strategy changes, and said nothing of it."""
        if not self.reads_strategy():
            return (f"One curve, at the sidebar's temperature {float(self.session.temperature):g}: a uniform-state "
                    "run accepts by the entropy bound, in no strategy's order.")
        mine, compared = self.session.strategy, list(self.sweep_strategies)
        listed = ", ".join(f"{name} (the sidebar's)" if name == mine else name for name in compared) or "none"
        if mine in compared:
            return f"Compares {listed}."
        return f"Compares {listed}; the sidebar's strategy, {mine}, is not among them (tick it to add it)."

    # ------------------------------------------------------------------ the sweep

    def sweep_key(self):
        """What the sweep's result depends on (its cache key): everything but the steps and strategy
        it varies. ValueError when the knobs are invalid."""
        s = self.session
        cfg = s.sampler_config().to_dict()
        for varied in ("steps", "strategy"):
            cfg.pop(varied)
        path = getattr(s.model, "path", None)
        mtime = path.stat().st_mtime_ns if path is not None and path.exists() else None
        compared = tuple(self.sweep_strategies) if self.reads_strategy() else ()
        return (s.model_info.get("name"), mtime, tuple(sorted(cfg.items())), s.length, s.template, s.chat,
                compared, self.sweep_samples, self._judge_name)

    def start_sweep(self, *, wait: bool = False, by_itself: bool = False) -> bool:
        """Show the cached sweep for these knobs, or compute it in the background. Refused, with a
        notice, over the server's limits (limits.py). by_itself: not a click on Compute (after a run,
        a knob of the sweep changed): a sweep over the auto-start limit says so and waits for Compute."""
        s = self.session
        if s.model is None or self._nothing_compared():
            return False
        if s.model.config.kind != "diffusion":
            self.quality.status = "quality vs steps compares diffusion samplers: pick a diffusion model"
            return False
        try:
            key, config, canvas = self.sweep_key(), s.sampler_config(), s.canvas()
            cached = SWEEPS.get(key)
            if cached is not None:
                self.quality.show(cached, "from cache")
                return True
            template = s.prompt_template() or None  # as typed (stripped as start_canvas strips it)
            if not self._admit_sweep(config, canvas, template, by_itself):
                return False
        except ValueError as e:  # LimitExceeded too
            self.quality.error = str(e)
            return False
        args = (s.model, config, canvas, template, self.axes(canvas.n_generate), self.sweep_samples, s.seed, key)
        return self.quality.start(lambda job, report: self._sweep(job, report, *args), status="computing …",
                                  wait=wait) is not None

    def _admit_sweep(self, config, canvas, template, by_itself: bool) -> bool:
        """The sweep's model calls and table against the server's limits (LimitExceeded); False, with
        the estimate as the panel's status, when it is too large to start `by_itself`."""
        share, n = self.session.share, self.sweep_samples
        with_ar = self._judge_name is not None and template is None  # as _sweep samples it
        calls, samples = sweep_size(self.axes(canvas.n_generate), n, canvas.length, config, ar=with_ar)
        share.limits.check_calls("this quality sweep", calls)
        if by_itself:
            seconds = self.sweep_cost(canvas, template)[1]
            if not share.limits.starts_by_itself(seconds):
                self.quality.clear()
                self.quality.status = share.limits.waiting_note(calls, seconds, "Compute")
                return False
        share.reserve("explore.quality", table_bytes(samples + 16, canvas.length), "this quality sweep")  # + reference
        return True

    def _sweep(self, job, report, model, config, canvas, template, vary, n_samples, seed, key):
        """The Task's work (on its worker): experiments.sweep over `vary` (steps x strategies), then cached."""
        from .....experiments import (  # the sweep code loads only when one runs
            SweepCancelled,
            sweep,
        )

        judge = checkpoints.load(self._judge_name, self.session.device) if self._judge_name else None
        reference = held_out_reference(model, judge, canvas.length, template)
        try:
            result = sweep(model, config, vary, n_samples=n_samples,
                           seed=seed, length=canvas.length, template=template, judge=judge, reference=reference,
                           progress=lambda done, total: report(done, total, f"{done} of {total} samples"),
                           cancel=lambda: job.cancelled, include_ar=judge is not None and template is None,
                           tokens_in_flight=sweep_tokens_in_flight(canvas.length))  # limits.py says why
        except SweepCancelled:
            raise TaskCancelled() from None
        SWEEPS.put(key, result)
        rate = measured_rate(result[0])  # the next estimate of this checkpoint's sweeps, here and in the Sweep tab
        if rate:
            SWEEP_RATES[key[0]] = rate
        return result

    def cancel_sweep(self) -> None:
        """Cancel a sweep in progress: its cache key no longer matches the knobs (or a run supersedes it)."""
        self.quality.cancel("cancelled (knobs changed)")

    @param.depends("compute_sweep", watch=True)
    def _compute_clicked(self):
        self.start_sweep()

    @param.depends("stop_sweep", watch=True)
    def _stop_sweep_clicked(self):
        self.quality.cancel()

    @param.depends("sweep_strategies", "sweep_samples", watch=True)
    def _sweep_knobs_changed(self):
        self.cancel_sweep()
        if self.sweep_auto and not self.running:
            self.start_sweep(by_itself=True)  # a link sets these too: a large sweep waits for Compute

    def close(self) -> None:
        self.quality.close()
        self.session.share.release("explore.quality")
        super().close()
