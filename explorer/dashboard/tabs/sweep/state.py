"""The Sweep tab's state: quality and speed vs steps for any set of strategies / schedules / temperatures /
thresholds with the AR baseline, the quality grid of "Sampling Strategies & Speed Tradeoffs" and the
temperature comparison of "Generation: Iterative Unmasking", each a background SweepTask.

Every sweep is explorer.experiments.sweep run by a runtime Task (one per section), cached per
(checkpoint, knobs) in the process-wide runtime.cache.SWEEPS; results are set only in dispatched
callbacks. When the server was started with `serve --scheduler ADDRESS` the sweep's sampler calls run
on that Dask cluster (explorer.cluster.client_from_env). The expected cost is shown before a sweep
starts (CPU sweeps on a big model take a while). No Panel here: view.py draws what this holds.
"""
from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass

import param

from .... import names
from ....experiments import (
    QUALITY_METRICS,
    SweepCancelled,
    aggregate,
    cells_from_vary,
    read_axes,
    sample_kind,
    sweep,
    sweep_cells,
)
from ....sampling.config import SCHEDULES, STRATEGIES, recommended
from ....sampling.uniform import model_process
from ... import checkpoints
from ...runtime import cache
from ...runtime.limits import (  # expected_cost, measured_rate: Explore's quality sweep estimates with them too
    expected_cost,
    measured_rate,
    sweep_size,
    sweep_tokens_in_flight,
    table_bytes,
    took,
)
from ...runtime.tasks import Task, TaskCancelled
from ...session import KNOBS, Session
from ...urlstate import parse_value
from ..base import TabState

SPEED_METRICS = ("tokens_per_s", "ms_per_sample")
SECTIONS = {"sweep": "sweep", "grid": "quality grid", "temps": "temperature comparison"}  # plan tag -> its name
# Every knob of the sidebar (the schema's sampler knobs, sampling/knobs.py, and the canvas's): each is part of
# every sweep's base config or canvas, so a change of any of them is a new estimate, maybe a cached result
SIDEBAR_KNOBS = KNOBS


def parse_list(text: str, kind, name: str, *, allow_none: bool = False, knob=None) -> list:
    """'1, 2,4' -> [1, 2, 4]; ValueError naming the field for anything else ('none' where allowed).
    knob: the sidebar's parameter the values stand for (Session.param.steps ...): each is read as a
    link reads that knob (urlstate.parse_value), within its bounds, so a grid asks for no step count
    or temperature the sidebar's slider cannot."""
    out = []
    for item in (s.strip() for s in str(text).split(",")):
        if not item:
            continue
        if allow_none and item.lower() == "none":
            out.append(None)
            continue
        if knob is not None:
            try:
                out.append(parse_value(knob, item))
            except ValueError as e:
                raise ValueError(f"{name}: {e} (as the sidebar's {knob.label.lower()})") from None
            continue
        try:
            value = kind(item)
        except ValueError:
            raise ValueError(f"{name}: {item!r} is not a {'number' if kind is float else 'whole number'}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name}: {item!r} is not a finite number")
        out.append(value)
    return list(dict.fromkeys(out))  # duplicates would only repeat a cell


@dataclass(frozen=True)
class Plan:
    """Everything one sweep needs, read from the knobs on the UI thread; the worker only runs it."""

    model: object
    cells: list
    n_samples: int
    base: object  # SamplerConfig
    length: int
    template: str | None
    judge: str | None  # AR checkpoint scoring text (gen-PPL)
    with_ar: bool  # the judge also samples, as the AR baseline
    key: tuple
    calls: int
    seconds: float
    work: int = 0  # model calls counted per sample (limits.py: what the server allows a request)
    nbytes: int = 0  # memory its table keeps


def format_cost(calls: int, seconds: float) -> str:
    return f"≈ {calls:,} model calls, {took(seconds)} on this server"


class SweepTask(Task):
    """One background sweep of the tab (runtime.tasks.Task: progress, status, error, result), with its
    buttons and cost estimate. `starter` is the tab's method that plans and submits it."""

    run = param.Event(label="Run")
    stop = param.Event(label="Stop")
    estimate = param.String("", doc="The expected cost of the next run (or 'cached')")

    def __init__(self, name: str, device, dispatch, starter, share=None, **params):
        super().__init__(name, device, dispatch, share, **params)
        self.starter = starter
        self._started, self._where = 0.0, ""  # set by submit (UI thread) and _work (its worker), read by done_status

    @param.depends("run", watch=True)
    def _run_clicked(self):
        self.starter()

    @param.depends("stop", watch=True)
    def _stop_clicked(self):
        self.cancel("cancelled")

    def show_cached(self, key) -> bool:
        cached = cache.SWEEPS.get(key)  # key -> (table, summary), shared by every session
        if cached is not None:
            self.show(cached, "from cache")
        return cached is not None

    def submit(self, plan: Plan, *, wait: bool = False) -> bool:
        """Run `plan` in the background; False (the reason in `error`) when the session has its share
        of work going."""
        if self.start(lambda job, report: self._work(job, report, plan), wait=wait,
                      status=f"starting ({format_cost(plan.calls, plan.seconds)}) …") is None:
            return False
        self.estimate, self._started = "", time.monotonic()
        return True

    def _work(self, job, report, plan: Plan):
        """The sweep, on the Dask cluster the server was started with (serve --scheduler) or here."""
        client = _cluster_client()
        self._where = f" on the Dask cluster at {client.scheduler.address}" if client is not None else ""
        if client is not None:
            report(0, 1, "sweeping" + self._where)
        judge = checkpoints.load(plan.judge, self.worker.device) if plan.judge else None
        try:
            # here: with the working memory a served session may hold (limits.py); a cluster's workers hold theirs
            held = sweep_tokens_in_flight(plan.length)
            run = functools.partial(sweep, tokens_in_flight=held) if client is None else _on_cluster(client)
            result = run(plan.model, plan.base, plan.cells, plan.n_samples, plan.base.seed, length=plan.length,
                         template=plan.template, judge=judge,
                         progress=lambda done, total: report(done, total, f"{done} of {total} samples{self._where}"),
                         cancel=lambda: job.cancelled, include_ar=judge if plan.with_ar else None)
        except SweepCancelled as e:
            raise TaskCancelled(_partial(e.table), f"cancelled after {e.done} of {e.total} samples") from None
        cache.SWEEPS.put(plan.key, result)  # the same table wherever it ran (cluster.py): one cache entry
        rate = measured_rate(result[0]) if client is None else None  # a cluster's timings are its workers'
        if rate:
            cache.SWEEP_RATES[plan.key[0]] = rate
        return result

    def done_status(self, result) -> str:
        return f"done: {len(result[0])} samples in {time.monotonic() - self._started:.1f} s{self._where}"


def _cluster_client():
    """The server's Dask client, or None (no --scheduler). Called on the task's worker: connecting can
    take seconds. A scheduler that cannot be reached raises cluster.ClusterError, whose message the
    Task shows as the notice. explorer.cluster loads Dask (about a second): only a server started with
    --scheduler imports it, here, on its first sweep."""
    if not os.environ.get(names.SCHEDULER_ENV, "").strip():
        return None
    from .... import cluster

    return cluster.client_from_env()


def _on_cluster(client):
    """explorer.cluster.sweep bound to `client` (imported here for the reason _cluster_client gives)."""
    from .... import cluster

    return functools.partial(cluster.sweep, client=client)


def _partial(table):
    """What a cancelled sweep finished, as (table, summary), or None when no batch completed."""
    return (table, aggregate(table, table.attrs.get("knobs"))) if len(table) else None


def sweep_temperatures(model, default: str) -> str:
    """The main sweep's temperatures for `model`. A uniform-state model's curves are one per temperature
    and at 1.0 its samples are noise (gen-PPL over 1,000 on `shakespeare-uniform`): it is swept at the
    temperature it recommends. A masked model at `default` (1.0: the strategies compared at the model's
    own distribution, as the teaching notebook's sweep does)."""
    if model_process(model) != "uniform":
        return default
    try:
        temperature = recommended(model).get("temperature")
    except ValueError:  # a bad recommendation: Session.recommended_knobs warns and keeps the defaults
        temperature = None
    return default if temperature is None else f"{temperature:g}"


# The main sweep's axis inputs and the knob each sets: those a model's run does not read are dropped from
# its sweeps (experiments.read_axes) and greyed, so a lecturer does not tick what changes nothing.
AXIS_INPUTS = {"strategies": "strategy", "schedules": "schedule", "thresholds": "threshold"}


class SweepTabState(TabState):
    """The Sweep tab's knobs and its three sweeps (main, grid, temperatures)."""

    strategies = param.ListSelector(default=["confidence", "random"], objects=list(STRATEGIES), label="Strategies",
                                    doc="Unmasking strategies: one curve each")
    schedules = param.ListSelector(default=["linear"], objects=list(SCHEDULES), label="Schedules",
                                   doc="How many positions each step commits: one curve each")
    temperatures = param.String("1.0", label="Temperatures", doc="Comma-separated, e.g. 0.7, 1.0: one curve each")
    thresholds = param.String("", label="Thresholds γ",
                              doc="Confidence-threshold decoding (Fast-dLLM), e.g. 0.7, 0.9: needs no step count; "
                                  "a flat line on a steps axis, a curve on an NFE axis")
    include_ar = param.Boolean(True, label="AR baseline",
                               doc="Sample the AR checkpoint with this alphabet too (when there is one)")
    steps_grid = param.String("1,2,4,8,16,32", label="Steps grid", doc="Step counts to sample at")
    samples = param.Integer(4, bounds=(1, 64), label="Samples per point",
                            doc="More samples: tighter bands, longer sweep")
    x = param.Selector(default="steps", objects=["steps", "nfe"], label="x axis",
                       doc="Denoising steps or model calls (NFE)")
    metric = param.Selector(default="auto", objects=["auto", *QUALITY_METRICS], label="Quality metric",
                            doc="auto: pattern quality for patterns, gen-PPL with an AR judge, else valid words")
    speed_metric = param.Selector(default="tokens_per_s", objects=list(SPEED_METRICS), label="Speed")
    grid_steps = param.String("1,3,5,10,20", label="Grid steps", doc="Step counts of the quality grid's columns")
    grid_samples = param.Integer(4, bounds=(1, 16), label="Grid rows", doc="Samples per step count")
    temp_values = param.String("0.3,0.7,1.0,1.5", label="Temperatures",
                               doc="Temperatures compared, each at the same seeds")
    temp_steps = param.Integer(12, bounds=Session.param.steps.bounds, label="Steps",  # the sidebar's bounds
                               doc="Denoising steps of every sample")
    temp_samples = param.Integer(3, bounds=(1, 16), label="Samples each")
    note = param.String("", doc="What this model cannot do here (no AR baseline, not a diffusion model)")
    unread = param.List([], doc="The axis inputs the loaded model's run does not read (greyed in the view)")
    no_ar = param.Boolean(False, doc="No AR checkpoint of the loaded model's alphabet: no baseline to include")

    URL_PARAMS = ("strategies", "schedules", "temperatures", "thresholds", "include_ar", "steps_grid", "samples",
                  "x", "metric")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        dispatch = lambda callback: self.session.dispatch(callback)  # noqa: E731  read when called
        device, share = session.device, session.share
        self.main = SweepTask("sweep", device, dispatch, self.start_sweep, share)
        self.grid = SweepTask("quality grid", device, dispatch, self.start_grid, share)
        self.temps = SweepTask("temperature comparison", device, dispatch, self.start_temps, share)
        self._judge = None
        # the Temperatures the tab chose itself for the loaded model (sweep_temperatures); once someone
        # (a link, the user) sets another value, a model change keeps theirs
        self._chosen_temps = self.temperatures
        # off screen, a knob change only marks the estimates stale (worked out when the tab is next shown):
        # the three plans cost about 5 ms a change, and a dragged slider sends 30 changes a second
        self._hidden, self._stale = False, False
        # the sidebar's knobs are part of every sweep's base config: new estimate, maybe a cached result
        session.param.watch(lambda *events: self._knobs_changed(), list(SIDEBAR_KNOBS))
        self.on_model_changed()

    def _knobs_changed(self) -> None:
        if self._hidden:
            self._stale = True
        else:
            self.refresh_all()

    # ------------------------------------------------------------------ plans (UI thread, cheap)

    def _base(self, **overrides):
        """The sidebar's sampler knobs (top-k/p, blocks, revision, seed) with the tab's overrides; scheduled
        decoding unless a cell sets a threshold."""
        return self.session.sampler_config().replace(threshold=None, **overrides)

    def _plan(self, vary, n: int, base, tag: str, with_ar: bool) -> Plan:
        """A validated Plan (ValueError with a readable message otherwise)."""
        model = self.session.model
        if model is None:
            raise ValueError("no model is loaded yet")
        if model.config.kind != "diffusion":
            raise ValueError("sweeps compare diffusion samplers: pick a diffusion checkpoint in the sidebar")
        canvas = self.session.canvas()
        template = self.session.prompt_template() or None
        with_ar = with_ar and self._judge is not None and template is None
        # the size from the lists' lengths, refused before a huge grid's cells are built (limits.py)
        work, samples = sweep_size(vary, n, canvas.length, base, ar=with_ar)
        self.session.share.limits.check_calls(f"this {SECTIONS[tag]}", work)
        cells = sweep_cells(base, cells_from_vary(vary))
        name = self.session.model_info.get("name")
        path = getattr(model, "path", None)
        mtime = path.stat().st_mtime_ns if path is not None and path.exists() else None
        key = (name, mtime, tag, tuple(tuple(sorted(c.items())) for c in cells), n,
               tuple(sorted(base.to_dict().items())), canvas.length, template, self._judge, with_ar)
        calls, seconds = expected_cost(self.session.model_info.get("n_params", 0), cells, n, canvas.length,
                                       with_ar, self._judge is not None, cache.SWEEP_RATES.get(name), base.steps)
        return Plan(model, cells, n, base, canvas.length, template, self._judge, with_ar, key, calls, seconds,
                    work, table_bytes(samples, canvas.length))

    def sweep_plan(self) -> Plan:
        if not self.strategies or not self.schedules:
            raise ValueError("pick at least one strategy and one schedule")
        knobs = self.session.param
        steps = parse_list(self.steps_grid, int, "Steps grid", knob=knobs.steps)
        temps = parse_list(self.temperatures, float, "Temperatures", knob=knobs.temperature) \
            or [float(self.session.temperature)]
        thresholds = [t for t in parse_list(self.thresholds, float, "Thresholds", allow_none=True,
                                            knob=knobs.threshold) if t is not None]
        if not steps:
            raise ValueError("Steps grid: give at least one step count, e.g. 1,2,4,8,16,32")
        vary = {"steps": steps, "strategy": list(self.strategies), "schedule": list(self.schedules),
                "temperature": temps}
        if thresholds:  # None too: the scheduled curves stay, the thresholds join them
            vary["threshold"] = [None, *thresholds]
        return self._plan(read_axes(vary, self.session.model), self.samples, self._base(), "sweep", self.include_ar)

    def grid_plan(self) -> Plan:  # (its one strategy is the base's: a uniform-state run ignores it)
        steps = parse_list(self.grid_steps, int, "Grid steps", knob=self.session.param.steps)
        if not steps:
            raise ValueError("Grid steps: give at least one step count, e.g. 1,3,5,10,20")
        strategy = self.strategies[0] if self.strategies else "confidence"
        return self._plan({"steps": steps}, self.grid_samples, self._base(strategy=strategy), "grid", False)

    def temps_plan(self) -> Plan:
        temps = parse_list(self.temp_values, float, "Temperatures", knob=self.session.param.temperature)
        if not temps:
            raise ValueError("Temperatures: give at least one, e.g. 0.3,0.7,1.0,1.5")
        return self._plan({"temperature": temps}, self.temp_samples, self._base(steps=self.temp_steps), "temps",
                          False)

    # ------------------------------------------------------------------ running

    def _start(self, task: SweepTask, planner, wait: bool, by_itself: bool = False) -> bool:
        """Show the cached result for these knobs, or run the sweep in the background. Refused, with a
        notice, over the server's limits (limits.py; the plan checks the model calls). by_itself: not
        a click (a link opening the tab): a sweep over the auto-start limit shows its estimate and
        waits for Run."""
        share = self.session.share
        try:
            plan = planner()
            if task.show_cached(plan.key):
                return True
            if by_itself and not share.limits.starts_by_itself(plan.seconds):
                task.estimate = share.limits.waiting_note(plan.work, plan.seconds)
                return False
            share.reserve(f"sweep.{plan.key[2]}", plan.nbytes, f"this {SECTIONS[plan.key[2]]}")
        except ValueError as e:  # LimitExceeded too
            task.cancel()
            task.error = str(e)
            return False
        return task.submit(plan, wait=wait)

    def start_sweep(self, *, wait: bool = False, by_itself: bool = False) -> bool:
        return self._start(self.main, self.sweep_plan, wait, by_itself)

    def start_grid(self, *, wait: bool = False) -> bool:
        return self._start(self.grid, self.grid_plan, wait)

    def start_temps(self, *, wait: bool = False) -> bool:
        return self._start(self.temps, self.temps_plan, wait)

    # ------------------------------------------------------------------ knobs -> estimate / cache

    @param.depends("strategies", "schedules", "temperatures", "thresholds", "include_ar", "steps_grid",
                   "samples", watch=True)
    def _sweep_knobs(self):
        self.note = self._note()
        self._refresh(self.main, self.sweep_plan)

    @param.depends("grid_steps", "grid_samples", "strategies", watch=True)
    def _grid_knobs(self):
        self._refresh(self.grid, self.grid_plan)

    @param.depends("temp_values", "temp_steps", "temp_samples", watch=True)
    def _temps_knobs(self):
        self._refresh(self.temps, self.temps_plan)

    def _refresh(self, task: SweepTask, planner) -> None:
        """New knobs: say what a run would cost, and show a cached result at once if there is one."""
        try:
            plan = planner()
        except ValueError as e:
            task.param.update(estimate="", error=str(e) if self.session.model is not None else "")
            return
        task.error = ""
        if task.show_cached(plan.key):
            task.estimate = "cached: shown without sampling"
        else:
            task.estimate = "Run: " + format_cost(plan.calls, plan.seconds)

    def refresh_all(self) -> None:
        self.note = self._note()
        for task, planner in ((self.main, self.sweep_plan), (self.grid, self.grid_plan),
                              (self.temps, self.temps_plan)):
            self._refresh(task, planner)

    def url_default(self, name: str):
        """The Temperatures this tab chose for the loaded model (sweep_temperatures), which the link leaves
        out as it leaves out a default; None: the parameter's own default."""
        return self._chosen_temps if name == "temperatures" else None

    def on_model_changed(self) -> None:
        for task in (self.main, self.grid, self.temps):
            task.clear()
        for tag in SECTIONS:
            self.session.share.release(f"sweep.{tag}")
        model, names = self.session.model, self.session.param.checkpoint.objects
        self._judge = checkpoints.find_judge(model, names) if model is not None else None
        if model is not None and self.temperatures == self._chosen_temps:
            self.temperatures = self._chosen_temps = sweep_temperatures(model, self.param.temperatures.default)
        self.unread = [name for name, knob in AXIS_INPUTS.items() if knob not in read_axes({knob: []}, model)]
        self.no_ar = model is not None and self._judge is None
        self.refresh_all()

    def _note(self) -> str:
        model = self.session.model
        if model is None:
            return ""
        if model.config.kind != "diffusion":
            return "This is an AR checkpoint: the Sweep tab compares diffusion samplers. Pick a diffusion model."
        if self._judge is not None:
            return ("A template is set: the AR baseline cannot fill one and is left out."
                    if self.include_ar and self.session.template.strip() else "")
        # Without a judge only what the user asked for is missing: the baseline (if ticked), gen-PPL for text
        missing = [*(["no AR baseline"] if self.include_ar else []),
                   *(["text is scored without gen-PPL"] if sample_kind(model) != "patterns" else [])]
        return f"No AR checkpoint with this model's alphabet in checkpoints/: {', and '.join(missing)}." if missing else ""

    def on_hidden(self) -> None:
        self._hidden = True

    def on_shown(self) -> None:
        """Opening the tab (or a link to it) shows the main sweep: from the cache when these knobs were
        swept before in this server, else computed now if it is small enough to start by itself
        (limits.py), else its estimate waits for Run (its cost is on the page; Stop cancels). Knobs changed
        while it was hidden get their estimates first."""
        self._hidden = False
        if self._stale:
            self._stale = False
            self.refresh_all()
        if self.session.model is not None and self.session.model.config.kind == "diffusion" \
                and self.main.result is None and not self.main.running:
            self.start_sweep(by_itself=True)

    def check_link_value(self, name: str, value) -> None:
        """A link's lists are read as the plans read them (urlstate.UrlState: refused with the link's
        notice): within the sidebar's bounds."""
        knobs = self.session.param
        lists = {"steps_grid": knobs.steps, "grid_steps": knobs.steps, "temperatures": knobs.temperature,
                 "temp_values": knobs.temperature, "thresholds": knobs.threshold}
        if name in lists:
            parse_list(value, float, self.param[name].label, allow_none=name == "thresholds", knob=lists[name])
        if name == "temperatures":
            self._chosen_temps = None  # the link's own temperatures: a model's load keeps them

    def close(self) -> None:
        for task in (self.main, self.grid, self.temps):
            task.close()
        for tag in SECTIONS:
            self.session.share.release(f"sweep.{tag}")

