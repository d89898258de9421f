"""Compare's state: 2-4 sampler configurations side by side, on the same seed and template.

Each column is the session's knobs (Explore's sidebar) plus a few overrides, written compactly as
`strategy=random, steps=12` (also the URL form: columns joined by " | "). `model=ar` samples that
column with the AR checkpoint of the model's alphabet (checkpoints.find_judge), the left-to-right
baseline; `model=<name>` with another listed checkpoint of the same alphabet (the masked and the
uniform-state process side by side), its run the one Explore makes with that checkpoint and these knobs. The presets are the teaching notebooks' figures: confidence vs random (the trajectory comparison
of "Sampling Strategies & Speed Tradeoffs"), steps 4 vs 32, diffusion vs the AR baseline, temperature 0.3 vs 1.5
("Generation: Iterative Unmasking").

All columns run one after another in one background task (CompareTask, a runtime.tasks.Task bound
to the session's device) through the real sampler (session.sample_canvas), with the session's seed
and template; each column's result is shown as soon as it is done. Drawn by view.py.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import param

from ....experiments import sample_kind, score_samples
from ....metrics import looks_collapsed, ref_distance
from ....names import PROCESS_NAMES
from ....sampling import knobs as schema
from ....sampling.uniform import model_process
from ...frames import Frames, glyph_table
from ... import checkpoints
from ...runtime import cache
from ...runtime.limits import call_seconds, run_bytes, run_calls
from ...runtime.tasks import Task, TaskCancelled
from ...session import KNOBS, Session, run_plan, sample_canvas, start_canvas
from ...urlstate import parse_value
from ..base import TabState

log = logging.getLogger(__name__)

MAX_COLUMNS, MIN_COLUMNS = 5, 2  # 5: "Generation: Iterative Unmasking" §4.5 shows one seed at 1, 2, 5, 10 and 20 steps
SEP = " | "  # between columns in `columns` (and the URL)
PRESETS = {  # key -> (button label, column overrides)
    "strategies": ("confidence vs random", ("strategy=confidence", "strategy=random")),
    # "Generation: Iterative Unmasking" §4.3
    "order": ("confidence vs left-to-right", ("strategy=confidence", "strategy=left_to_right")),
    "steps": ("steps 4 vs 32", ("steps=4", "steps=32")),
    "ar": ("diffusion vs AR", ("", "model=ar")),
    "temperature": ("temperature 0.3 vs 1.5", ("temperature=0.3", "temperature=1.5")),
}
# The presets that compare what a uniform-state run does not read (it accepts by the entropy bound, in no
# strategy's order): a uniform-state model opened on one of them shows the temperature preset instead
MASKED_ONLY_PRESETS = ("strategies", "order")
# What a column may set: every sidebar knob of the schema (sampling/knobs.py) but the seed, which all
# columns share (the comparison is of one draw), and the model
OVERRIDES = {**{k.name: k.type for k in schema.sidebar_knobs() if k.name != "seed"}, "model": str}
MODELS = ("session", "ar")  # model=session: the model loaded in the sidebar; ar: its AR baseline; or a listed name
METRIC_LABELS = {"gen_ppl": "gen-PPL", "entropy": "entropy", "word_validity": "word validity",
                 "pattern_quality": "pattern quality", "pattern_quality_p2": "pattern quality (period ≥ 2)",
                 "distinct_symbols": "distinct symbols",  # these two show a one-symbol collapse
                 "ref_distance": "distance to held-out text"}  # metrics.ref_distance: what ranks text


def parse_overrides(spec: str, knobs=None) -> dict:
    """`'strategy=random, steps=12'` -> {'strategy': 'random', 'steps': 12}; ValueError if malformed.

    knobs: the sidebar's parameters (a session's `param`; default the Session class's). Each value is
    read as the link reads that knob (urlstate.parse_value), within the sidebar's bounds and choices:
    a column asks for nothing the slider cannot (`steps=4096` is refused as `?steps=4096` is). Knobs
    that clash (threshold with revision) are checked by SamplerConfig."""
    knobs = Session.param if knobs is None else knobs
    out = {}
    for item in spec.replace(",", " ").split():
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or not value:
            raise ValueError(f"{item!r} is not knob=value (e.g. steps=8)")
        if key not in OVERRIDES:
            raise ValueError(f"unknown knob {key!r} in {spec!r}; use one of {', '.join(OVERRIDES)}")
        if key == "model":
            out[key] = value
            continue
        try:
            out[key] = parse_value(knobs[key], value)
        except ValueError as e:
            raise ValueError(f"{key}={value}: {e} (as the sidebar's {knobs[key].label})") from None
    listed = listed_names(knobs)
    if out.get("model", "session") not in (*MODELS, *listed):
        raise ValueError(f"model must be one of {', '.join((*MODELS, *listed))}, got {out['model']!r}")
    return out


def listed_names(knobs) -> list[str]:
    """The checkpoints the sidebar lists (its Checkpoint choices), which a column may name as its model;
    without a session's choices (the Session class's knobs), what a session would list."""
    try:
        names = [n for n in knobs["checkpoint"].objects if isinstance(n, str)]
    except KeyError:  # knobs without a checkpoint selector
        return []
    return names or checkpoints.available()


def named_model(overrides: dict) -> str | None:
    """The checkpoint a column names with model=<name>, None for the session's model or the AR baseline."""
    name = overrides.get("model", "session")
    return None if name in MODELS else name


def format_overrides(overrides: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items())


def split_columns(columns: str) -> list[str]:
    return [c.strip() for c in columns.split("|")]


def column_config(base, overrides: dict):
    """The SamplerConfig of one column: the session's config with its overrides, read as the sidebar's
    (threshold=0 and factor=0 are off: Knob.from_ui). Raises ValueError with SamplerConfig's message."""
    knobs = {k: schema.KNOBS[k].from_ui(v) for k, v in overrides.items() if k != "model"}
    return base.replace(**knobs)


def column_configs(base, parsed: list[dict]) -> list:
    """Every column's SamplerConfig; ValueError naming the first column SamplerConfig refuses."""
    configs = []
    for i, overrides in enumerate(parsed):
        try:
            configs.append(column_config(base, overrides))
        except ValueError as e:
            raise ValueError(f"column {i + 1}: {e}") from None
    return configs


def column_label(overrides: dict) -> str:
    if overrides.get("model") == "ar":
        rest = {k: v for k, v in overrides.items() if k != "model"}
        return "AR baseline (left to right)" + (f", {format_overrides(rest)}" if rest else "")
    if named_model(overrides):
        rest = {k: v for k, v in overrides.items() if k != "model"}
        return overrides["model"] + (f", {format_overrides(rest)}" if rest else "")
    return format_overrides(overrides) or "session knobs"


def differing(texts: list) -> list[np.ndarray]:
    """Per text (a string, or a sequence of one string per position), (len,) bool: the positions where
    some other text has another character or token (or none)."""
    out = []
    for i, text in enumerate(texts):
        if text is None:  # a column that failed or has not finished
            out.append(np.zeros(0, dtype=bool))
            continue
        mine = np.array(list(text), dtype=object)
        diff = np.zeros(len(text), dtype=bool)
        for j, other in enumerate(texts):
            if j == i or other is None:
                continue
            theirs = np.array(list(other[:len(text)]) + [None] * max(0, len(text) - len(other)), dtype=object)
            diff |= mine != theirs
        out.append(diff)
    return out


def score(model, traj, judge) -> dict:
    """The column's quality (experiments.score_samples: pattern quality on `patterns`, else entropy,
    word validity with the model's word list, gen-PPL with the AR judge) and its cost."""
    kind = sample_kind(model)
    text = model.tokenizer.decode(traj.final[0])
    words = (getattr(model, "meta", None) or {}).get("words") if kind == "text" else None
    table = score_samples(kind, traj.final[:1], [text], judge=judge if kind in ("text", "tokens") else None,
                          words=words or None)
    values = {k: float(table[k].iloc[0]) for k in METRIC_LABELS if k in table}
    if "gen_nll" in table:  # how far from held-out text: what ranks text columns (gen-PPL alone crowns 'the the')
        try:
            ref_nll, ref_entropy = checkpoints.reference_scores(model, judge, traj.length)
            values["ref_distance"] = float(ref_distance(table["gen_nll"].iloc[0], table["entropy"].iloc[0],
                                                        ref_nll, ref_entropy))
        except ValueError:  # no held-out data on the server: no distance, and no text column is "best"
            pass
    # flagged, so that no quality of a collapse ranks it best (a one-symbol tiling scores 1.0 on pattern quality)
    values["collapsed"] = float(looks_collapsed(traj.final[0]))
    return {**values, "nfe": int(traj.nfe), "seconds": own_seconds(traj)}


def own_seconds(traj) -> float:
    """The column's own run: its steps' wall time (model calls and choices), as if it ran alone. Not the
    trajectory's whole time, which counts the gaps between steps, where a Compare run lends the device
    to queued runs of other sessions (Job.cancelled) and records the step: one column of 12 model calls
    "took" 733 ms beside another's 55 ms for the same 12 calls."""
    return float(np.sum(traj.step_seconds))


@dataclass(frozen=True)
class Column:
    """One planned column: its label, its overrides and the SamplerConfig they make."""

    label: str
    overrides: dict
    config: object


@dataclass(frozen=True)
class Plan:
    """Everything a comparison needs, read from the session on the UI thread when it starts (the
    worker thread never reads the session, whose knobs may change while it runs)."""

    model: object
    model_name: str
    columns: tuple
    canvas: object
    judge_name: str | None
    template: str
    length: int
    seed: int
    calls: int = 0  # model calls of every column (limits.py: what the server allows a request)
    seconds: float = 0.0  # what they should take here
    nbytes: int = 0  # memory its columns' trajectories and frames keep


def run_column(job, plan: Plan, column: Column, judge, device=None) -> dict:
    """One column on the worker thread: its model and canvas, the sampler run, its scores. A column
    naming a checkpoint loads it on `device` (shared by every session) and starts from the canvas
    Explore builds for it: its run is that checkpoint's solo run."""
    if column.overrides.get("model") == "ar":
        if judge is None:
            raise ValueError("no AR checkpoint with this model's alphabet in checkpoints/ "
                             "(train one with `python run.py train --kind ar`)")
        model, name = judge, plan.judge_name
        canvas = start_canvas(judge, plan.template, min(plan.length, judge.config.block_size), plan.seed)
    elif named_model(column.overrides):
        name = named_model(column.overrides)
        model = checkpoints.load(name, device)
        canvas = start_canvas(model, plan.template, min(plan.length, model.config.block_size), plan.seed)
    else:
        model, name, canvas = plan.model, plan.model_name, plan.canvas
    traj = sample_canvas(model, column.config, canvas, on_step=lambda record: not job.cancelled)
    frames = Frames.from_trajectory(traj, glyph_table(model.tokenizer))
    return {"label": column.label, "model": name, "kind": model.config.kind, "config": column.config,
            "traj": traj, "frames": frames, "text": frames.text(), "tokenizer": model.tokenizer,
            "pieces": tuple(frames.chars(frames.n_rows - 1)),  # one string per position: a char or a token
            "metrics": score(plan.model, traj, judge), "error": ""}


class CompareTask(Task):
    """Compare's background run (runtime.tasks.Task: progress, status, error, running, cancel). Its
    result is the list of column results, each filled in (on the UI thread) as soon as its column is
    sampled and None until then, so the columns appear one by one."""

    def begin(self, plan: Plan, *, wait: bool = False) -> bool:
        """Run every column of `plan`, superseding a comparison in progress; False (the reason in
        `error`, the comparison shown left alone) when the session has its share of work going."""
        n = len(plan.columns)
        # the new job replaces the current one before the list is cleared: a late column of the
        # previous comparison is no longer current, so it cannot land in the new list
        return self.start(lambda job, report: self._work(job, report, plan), wait=wait,
                          status=f"sampling {n} configurations …",
                          admitted=lambda: setattr(self, "result", [None] * n)) is not None

    def _work(self, job, report, plan: Plan) -> list:
        """Every column in turn (worker thread); a column that fails says why and the others still run."""
        results, judge, n = [None] * len(plan.columns), None, len(plan.columns)
        for i, column in enumerate(plan.columns):
            if job.cancelled:
                raise TaskCancelled(None, "stopped")  # (None: the columns shown so far stay)
            try:
                if judge is None and plan.judge_name:
                    judge = checkpoints.load(plan.judge_name, self.worker.device)
                results[i] = run_column(job, plan, column, judge, self.worker.device)
            except Exception as e:
                if job.cancelled:  # the sampler stopped because of the cancel: not the column's fault
                    raise TaskCancelled(None, "stopped") from None
                log.warning("compare column %d failed: %s", i, e, exc_info=not isinstance(e, ValueError))
                results[i] = {"label": column.label, "error": f"{column.label}: {e}"}
            self.dispatch(lambda i=i, result=results[i]: self._column_done(job, i, result))
            report(i + 1, n, f"sampling {n} configurations … {i + 1} done")
        return results

    def _column_done(self, job, i: int, result: dict) -> None:
        if self.worker.is_current(job) and self.result is not None and i < len(self.result):
            results = list(self.result)
            results[i] = result
            self.result = results

    def done_status(self, result) -> str:
        done = [r for r in result if r is not None and not r.get("error")]
        return f"done: {len(done)} of {len(result)} configurations sampled"

    def clear(self) -> None:
        super().clear()
        # forgotten, not only cancelled: a comparison that finished a moment ago may have its report
        # still queued for the UI thread, and Task applies the report of the current job
        self.worker.current = None


class CompareState(TabState):
    """The compared configurations (`columns`), the preset they came from, and their run (`task`)."""

    URL_PARAMS = ("preset", "columns")

    preset = param.Selector(default="strategies", objects=[*PRESETS, "custom"], label="Preset",
                            doc="A comparison from the spec; editing a column makes it 'custom'")
    columns = param.String(SEP.join(PRESETS["strategies"][1]), label="Columns",
                           doc="Each column's overrides of the session knobs, e.g. 'steps=4 | steps=32'")
    run = param.Event(label="Run", doc="Sample every column with the session's seed and template")
    stop = param.Event(label="Stop", doc="Stop the comparison")

    run_id = param.Integer(0, doc="Bumped when a comparison starts")
    error = param.String("", doc="A readable notice about the columns ('' = none)")
    base_info = param.String("", doc="The session knobs and canvas every column shares")
    stale = param.String("", doc="What changed since the comparison shown ran ('' = nothing, or none shown)")

    def __init__(self, session, **params):
        super().__init__(session, **params)
        # the session's dispatch is read when called: the app installs the document's after building
        self.task = CompareTask("compare", session.device, lambda callback: self.session.dispatch(callback),
                                session.share)  # its jobs count against the session's limits (limits.py)
        self._quiet = False
        self._ran = None  # what the comparison shown was run with (_inputs), for `stale`
        # the preset and columns a uniform-state model was moved off (on_model_changed), for a masked one
        self._moved_from = None
        self.param.watch(self._columns_set, "columns")
        self.param.watch(lambda *events: self._check_stale(), "columns")
        session.param.watch(lambda *events: self._check_stale(), list(KNOBS))
        self.task.param.watch(lambda *events: self._check_stale(), "result")
        try:
            self.overrides()
        except ValueError as e:  # e.g. a bad ?compare.columns= in a shared link
            self.error = f"columns: {e}; showing the default comparison"
            self._quietly(preset="strategies", columns=SEP.join(PRESETS["strategies"][1]))

    @property
    def results(self) -> list:
        """Per column: a result dict, or None while it runs ([] before the first comparison)."""
        return self.task.result or []

    @property
    def running(self) -> bool:
        return self.task.running

    def texts(self) -> list[tuple | None]:
        """Each finished column's final canvas, one string per position (characters, or a Hugging Face
        model's tokens), for comparing position by position."""
        return [r["pieces"] if r and not r.get("error") else None for r in self.results]

    # ------------------------------------------------------------------ columns

    def overrides(self, columns: str | None = None) -> list[dict]:
        """Parsed overrides of every column (ValueError for a bad one or a bad column count)."""
        specs = split_columns(self.columns if columns is None else columns)
        if not MIN_COLUMNS <= len(specs) <= MAX_COLUMNS:
            raise ValueError(f"compare {MIN_COLUMNS} to {MAX_COLUMNS} columns, got {len(specs)}")
        parsed = []
        for i, spec in enumerate(specs):
            try:
                parsed.append(parse_overrides(spec, self.session.param))
            except ValueError as e:
                raise ValueError(f"column {i + 1}: {e}") from None
        return parsed

    def _quietly(self, **values) -> None:
        """Set columns / preset without the watchers that validate and re-match them."""
        self._quiet = True
        try:
            # one at a time, not param.update: a watcher of both would get two events in one call
            for name, value in values.items():
                setattr(self, name, value)
        finally:
            self._quiet = False

    def set_columns(self, columns: str, *, preset: str = "custom") -> bool:
        """Replace every column; a bad spec leaves them as they were, with a notice."""
        try:
            parsed = self.overrides(columns)
            if self.session.model is not None:
                column_configs(self.session.sampler_config(), parsed)
        except ValueError as e:
            self.error = str(e)
            return False
        self._quietly(columns=SEP.join(format_overrides(o) for o in parsed), preset=preset)
        self.error = ""
        self._moved_from = None  # someone chose these columns: a model change keeps them
        return True

    def set_column(self, i: int, spec: str) -> bool:
        """Column i's overrides edited (False, with a notice, for a bad one): the comparison runs again
        (as a preset's click runs it) where it may start by itself, else `stale` says to press Run."""
        specs = split_columns(self.columns)
        specs[i] = spec
        return self._edited(SEP.join(specs))

    def add_column(self) -> bool:
        specs = split_columns(self.columns)
        if len(specs) >= MAX_COLUMNS:
            self.error = f"at most {MAX_COLUMNS} columns"
            return False
        return self._edited(SEP.join([*specs, specs[-1]]))

    def remove_column(self, i: int) -> bool:
        specs = split_columns(self.columns)
        if len(specs) <= MIN_COLUMNS:
            self.error = f"compare at least {MIN_COLUMNS} columns"
            return False
        return self._edited(SEP.join(specs[:i] + specs[i + 1:]))

    def _edited(self, columns: str) -> bool:
        if not self.set_columns(columns):
            return False
        if self.session.model is not None:
            self.start(by_itself=True)
        return True

    def _inputs(self) -> tuple:
        """What a comparison is run with: the columns and every session knob (the model's name too)."""
        s = self.session
        return (self.columns, s.model_info.get("name"), *(getattr(s, k) for k in KNOBS))

    def _check_stale(self) -> None:
        """`stale`: the comparison shown was run with other columns or knobs than those shown now (its
        columns' titles and heatmaps, and the line above them, are of the earlier ones)."""
        shown = self._ran is not None and any(self.results)
        self.stale = ("" if not shown or self._inputs() == self._ran else
                      "The columns or the sidebar's knobs changed since this comparison ran: what is drawn is "
                      "the earlier comparison. Press Run to compare them as they are now.")

    def apply_preset(self, key: str, *, start: bool = True) -> bool:
        """One click: that preset's columns, then run them."""
        if key not in PRESETS:
            self.error = f"unknown preset {key!r}; pick one of {', '.join(PRESETS)}"
            return False
        if not self.set_columns(SEP.join(PRESETS[key][1]), preset=key):
            return False
        return self.start() if start else True

    @param.depends("preset", watch=True)
    def _preset_chosen(self):
        if self._quiet:
            return
        self._moved_from = None  # someone chose: a model change keeps their choice
        if self.preset in PRESETS:
            self.apply_preset(self.preset, start=self.session.model is not None)

    def _columns_set(self, event):
        """Set from outside (the URL): validated like an edit; a bad value is put back, with a notice."""
        if self._quiet:
            return
        self._moved_from = None  # columns set from outside: a model change keeps them
        try:
            self.overrides()
        except ValueError as e:
            self.error = f"{e}; the columns were not changed"
            self._quietly(columns=event.old)
            return
        match = [k for k, (_, c) in PRESETS.items() if SEP.join(c) == self.columns]
        self._quietly(preset=match[0] if match else "custom")

    # ------------------------------------------------------------------ runs

    def plan(self) -> Plan:
        """The comparison the session's knobs and the columns make now; ValueError when invalid."""
        s = self.session
        if s.model is None:
            raise ValueError("no model is loaded yet")
        parsed = self.overrides()
        configs = column_configs(s.sampler_config(), parsed)
        columns = tuple(Column(column_label(o), o, c) for o, c in zip(parsed, configs))
        judge = checkpoints.find_judge(s.model, s.param.checkpoint.objects)
        canvas = s.canvas()
        rows = []
        for i, column in enumerate(columns):
            try:
                rows.append(_column_rows(s.model, column, canvas, s))
            except ValueError as e:
                raise ValueError(f"column {i + 1}: {e}") from None
        calls = sum(run_calls(r, c.config.cfg_scale > 0) for r, c in zip(rows, columns))
        name = s.model_info.get("name", "?")
        seconds = calls * call_seconds(s.model_info.get("n_params", 0), canvas.length, rate=cache.SWEEP_RATES.get(name))
        return Plan(s.model, name, columns, canvas, judge, s.prompt_template(), s.length, s.seed, calls, seconds,
                    sum(run_bytes(r + 1, canvas.length) for r in rows))

    def start(self, *, wait: bool = False, by_itself: bool = False) -> bool:
        """Run every column (superseding a comparison in progress); False with a notice when invalid or
        over the server's limits (limits.py), the previous results kept. by_itself: not a click (a
        link opening the tab): a comparison over the auto-start limit waits for the Run button."""
        share = self.session.share
        try:
            plan = self.plan()
            share.limits.check_calls("this comparison", plan.calls)
            if by_itself and not share.limits.starts_by_itself(plan.seconds):
                self.error = share.limits.waiting_note(plan.calls, plan.seconds)
                return False
            share.reserve("compare", plan.nbytes, "this comparison")
        except ValueError as e:  # LimitExceeded too
            self.error = str(e)
            return False
        self._ran = self._inputs()
        self.param.update(error="", base_info=self._describe_base(plan), run_id=self.run_id + 1)
        return self.task.begin(plan, wait=wait)

    def _describe_base(self, plan: Plan) -> str:
        cfg = self.session.sampler_config()
        template = f"template {plan.template!r}" if plan.template else "no template"
        judge = (f"gen-PPL judged by {plan.judge_name}" if plan.judge_name
                 else "no AR judge for this alphabet: no gen-PPL")
        return (f"{plan.model_name}, seed {plan.seed}, length {plan.length}, {template}; "
                f"session knobs: steps={cfg.steps}, strategy={cfg.strategy}, temperature={cfg.temperature:g}, "
                f"schedule={cfg.schedule}; {judge}")

    def stop_run(self) -> None:
        self.task.cancel("stopped")

    @param.depends("run", watch=True)
    def _run_clicked(self):
        self.start()

    @param.depends("stop", watch=True)
    def _stop_clicked(self):
        self.stop_run()

    def on_model_changed(self) -> None:
        """Results of another model no longer describe this one. A uniform-state model opened on a preset
        of masked-only knobs (confidence vs random) would show two identical columns: it shows the
        temperature preset instead; columns of one's own are kept (and refused, saying why, if they set
        what its run does not read)."""
        self.task.clear()
        self.session.share.release("compare")
        self.base_info = ""
        model = self.session.model
        if model is None:
            return
        if model_process(model) == "uniform" and self.preset in MASKED_ONLY_PRESETS:
            self._moved_from = (self.preset, self.columns)
            self._quietly(preset="temperature", columns=SEP.join(PRESETS["temperature"][1]))
        elif model_process(model) != "uniform" and self._moved_from is not None:
            # back on a masked model with the preset the tab chose (no one picked another): the one it left
            if self.preset == "temperature" and self.columns == SEP.join(PRESETS["temperature"][1]):
                preset, columns = self._moved_from
                self._quietly(preset=preset, columns=columns)
            self._moved_from = None

    def on_shown(self) -> None:
        """Opening the tab (or a link to it) shows the comparison: run it once if nothing is shown,
        unless it costs more than a link may start by itself (then its estimate waits for Run)."""
        if not self.running and not any(self.results):
            self.start(by_itself=True)

    def url_default(self, name: str):
        """The preset and columns this tab chose for the loaded model (on_model_changed: a uniform-state
        model's temperature preset), which the link leaves out as it leaves out a default; None: the
        parameter's own default."""
        if self._moved_from is None or self.preset != "temperature":
            return None
        return {"preset": "temperature", "columns": SEP.join(PRESETS["temperature"][1])}.get(name)

    def check_link_value(self, name: str, value) -> None:
        """A link's columns are read as a typed edit is (urlstate.UrlState: refused with the link's notice)."""
        if name == "columns":
            self.overrides(value)

    def close(self) -> None:
        self.task.close()
        self.session.share.release("compare")


def _column_rows(model, column: Column, canvas, session) -> int:
    """Model calls a column's run makes at most (before guidance): its steps; a threshold run's or the
    AR baseline's, a call per generated position. A named checkpoint is read from its metadata
    (checkpoints.peek), and refused when its alphabet is not the session model's (the columns share
    one template and one judge)."""
    if column.overrides.get("model") == "ar":
        return max(canvas.n_generate, 1)
    name = named_model(column.overrides)
    if name:
        card = checkpoints.peek(name)
        if card is None or not _same_alphabet(card.tokenizer, model.tokenizer):
            raise ValueError(f"model={name}: a column compares checkpoints of the loaded model's alphabet "
                             f"({session.model_info.get('name', '?')}'s); {name} has another")
        model = card
        canvas = start_canvas(card, session.prompt_template(), min(session.length, card.config.block_size),
                              session.seed)
    check_read(model, column.overrides)
    return run_plan(model, column.config, canvas).max_steps


def check_read(model, overrides: dict) -> None:
    """Refuse a column that sets a knob its diffusion model's process does not read (the schema's
    `processes`): its run would be the session's, and the comparison would show identical columns as if
    the knob made no difference. ValueError naming the knob and the process."""
    process = model_process(model)
    unread = schema.unread_by("diffusion", process, overrides)
    if unread:
        knobs = format_overrides({k: overrides[k] for k in unread})
        raise ValueError(f"{knobs}: a {PROCESS_NAMES[process]} run does not read "
                         f"{'it' if len(unread) == 1 else 'them'}; compare what it does (temperature, steps"
                         f"{', entropy_bound' if process == 'uniform' else ', strategy'})")


def _same_alphabet(a, b) -> bool:
    """Two tokenizers with the same symbols and ids (a Hugging Face tokenizer matches no character model)."""
    try:
        return a.to_dict() == b.to_dict()
    except AttributeError:
        return False
