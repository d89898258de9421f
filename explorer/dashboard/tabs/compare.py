"""Compare: 2-4 sampler configurations side by side, on the same seed and template (issue 6).

Each column is the session's knobs (Explore's sidebar) plus a few overrides, written compactly as
`strategy=random, steps=12` (also the URL form: columns joined by " | "). `model=ar` samples that
column with the AR checkpoint of the model's alphabet (runtime.checkpoints.find_judge), the left-to-right
baseline. The presets are the product spec's figures: confidence vs random (seed 000's trajectory
comparison), steps 4 vs 32, diffusion vs the AR baseline, temperature 0.3 vs 1.5 (seed 001).

All columns run one after another on one Worker through the real sampler (state.sample_canvas),
with the session's seed and template; each column's result comes back through `dispatch` as soon
as it is done. Heatmaps are drawn on a normalised progress axis (views/compare_column.py).
"""
from __future__ import annotations

import logging

import numpy as np
import param

from ..runtime import checkpoints
from ..session import sample_canvas, start_canvas
from ..runtime.tasks import Worker
from .base import TabState

log = logging.getLogger(__name__)

MAX_COLUMNS, MIN_COLUMNS = 4, 2
SEP = " | "  # between columns in `columns` (and the URL)
PRESETS = {  # key -> (button label, column overrides)
    "strategies": ("confidence vs random", ("strategy=confidence", "strategy=random")),
    "steps": ("steps 4 vs 32", ("steps=4", "steps=32")),
    "ar": ("diffusion vs AR", ("", "model=ar")),
    "temperature": ("temperature 0.3 vs 1.5", ("temperature=0.3", "temperature=1.5")),
}
OVERRIDES = {"steps": int, "temperature": float, "top_p": float, "top_k": int, "strategy": str,
             "schedule": str, "block_length": int, "threshold": float, "remask": float, "model": str}
MODELS = ("session", "ar")  # model=session: the model loaded in the sidebar; ar: its AR baseline
METRIC_LABELS = {"gen_ppl": "gen-PPL", "entropy": "entropy", "word_validity": "word validity",
                 "pattern_quality": "pattern quality"}


def parse_overrides(spec: str) -> dict:
    """`'strategy=random, steps=12'` -> {'strategy': 'random', 'steps': 12}; ValueError if malformed.
    Only knob names and types are checked here; values are checked by SamplerConfig."""
    out = {}
    for item in spec.replace(",", " ").split():
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or not value:
            raise ValueError(f"{item!r} is not knob=value (e.g. steps=8)")
        if key not in OVERRIDES:
            raise ValueError(f"unknown knob {key!r} in {spec!r}; use one of {', '.join(OVERRIDES)}")
        try:
            out[key] = OVERRIDES[key](value)
        except ValueError:
            raise ValueError(f"{key} must be a number, got {value!r}") from None
    if out.get("model", "session") not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {out['model']!r}")
    return out


def format_overrides(overrides: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items())


def split_columns(columns: str) -> list[str]:
    return [c.strip() for c in columns.split("|")]


def column_config(base, overrides: dict):
    """The SamplerConfig of one column: the session's config with its overrides (threshold 0 = off,
    as in the sidebar). Raises ValueError with SamplerConfig's message."""
    knobs = {k: v for k, v in overrides.items() if k != "model"}
    if "threshold" in knobs and knobs["threshold"] <= 0:
        knobs["threshold"] = None
    return base.replace(**knobs)


def column_label(overrides: dict) -> str:
    if overrides.get("model") == "ar":
        rest = {k: v for k, v in overrides.items() if k != "model"}
        return "AR baseline (left to right)" + (f", {format_overrides(rest)}" if rest else "")
    return format_overrides(overrides) or "session knobs"


def differing(texts: list[str]) -> list[np.ndarray]:
    """Per text, (len,) bool: the positions where some other text has another character (or none)."""
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
    from ...experiments import sample_kind, score_samples

    kind = sample_kind(model)
    text = model.tokenizer.decode(traj.final[0])
    words = (getattr(model, "meta", None) or {}).get("words") if kind == "text" else None
    table = score_samples(kind, traj.final[:1], [text], judge=judge if kind == "text" else None,
                          words=words or None)
    values = {k: float(table[k].iloc[0]) for k in METRIC_LABELS if k in table}
    return {**values, "nfe": int(traj.nfe), "seconds": float(traj.seconds)}


class CompareState(TabState):
    """The compared configurations (`columns`), the preset they came from, and their results."""

    URL_PARAMS = ("preset", "columns")

    preset = param.Selector(default="strategies", objects=[*PRESETS, "custom"], label="Preset",
                            doc="A comparison from the spec; editing a column makes it 'custom'")
    columns = param.String(SEP.join(PRESETS["strategies"][1]), label="Columns",
                           doc="Each column's overrides of the session knobs, e.g. 'steps=4 | steps=32'")
    run = param.Event(label="Run", doc="Sample every column with the session's seed and template")
    stop = param.Event(label="Stop", doc="Stop the comparison")

    results = param.List(default=[], doc="Per column: a result dict, or None while it runs")
    running = param.Boolean(False)
    run_id = param.Integer(0, doc="Bumped when a comparison starts")
    status = param.String("")
    error = param.String("", doc="A readable notice ('' = none)")
    base_info = param.String("", doc="The session knobs and canvas every column shares")

    def __init__(self, explorer, **params):
        super().__init__(explorer, **params)
        self._worker = Worker("compare", explorer.device)
        self._begun = None  # the job whose columns are shown (see _begin)
        self._quiet = False
        self.param.watch(self._columns_set, "columns")
        try:
            self.overrides()
        except ValueError as e:  # e.g. a bad ?compare.columns= in a shared link
            self.error = f"columns: {e}; showing the default comparison"
            self._quiet = True
            try:
                self.preset, self.columns = "strategies", SEP.join(PRESETS["strategies"][1])
            finally:
                self._quiet = False

    # ------------------------------------------------------------------ columns

    def overrides(self, columns: str | None = None) -> list[dict]:
        """Parsed overrides of every column (ValueError for a bad one or a bad column count)."""
        specs = split_columns(self.columns if columns is None else columns)
        if not MIN_COLUMNS <= len(specs) <= MAX_COLUMNS:
            raise ValueError(f"compare {MIN_COLUMNS} to {MAX_COLUMNS} columns, got {len(specs)}")
        parsed = []
        for i, spec in enumerate(specs):
            try:
                parsed.append(parse_overrides(spec))
            except ValueError as e:
                raise ValueError(f"column {i + 1}: {e}") from None
        return parsed

    def set_columns(self, columns: str, *, preset: str = "custom") -> bool:
        """Replace every column; a bad spec leaves them as they were, with a notice."""
        try:
            parsed = self.overrides(columns)
            if self.session.model is not None:
                base = self.session.sampler_config()
                for i, o in enumerate(parsed):
                    try:
                        column_config(base, o)
                    except ValueError as e:
                        raise ValueError(f"column {i + 1}: {e}") from None
        except ValueError as e:
            self.error = str(e)
            return False
        self._quiet = True
        try:
            # one at a time, not param.update: a watcher of both would get two events in one call
            self.columns = SEP.join(format_overrides(o) for o in parsed)
            self.preset = preset
        finally:
            self._quiet = False
        self.error = ""
        return True

    def set_column(self, i: int, spec: str) -> bool:
        specs = split_columns(self.columns)
        specs[i] = spec
        return self.set_columns(SEP.join(specs))

    def add_column(self) -> bool:
        specs = split_columns(self.columns)
        if len(specs) >= MAX_COLUMNS:
            self.error = f"at most {MAX_COLUMNS} columns"
            return False
        return self.set_columns(SEP.join([*specs, specs[-1]]))

    def remove_column(self, i: int) -> bool:
        specs = split_columns(self.columns)
        if len(specs) <= MIN_COLUMNS:
            self.error = f"compare at least {MIN_COLUMNS} columns"
            return False
        return self.set_columns(SEP.join(specs[:i] + specs[i + 1:]))

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
        if not self._quiet and self.preset in PRESETS:
            self.apply_preset(self.preset, start=self.session.model is not None)

    def _columns_set(self, event):
        """Set from outside (the URL): validated like an edit; a bad value is put back, with a notice."""
        if self._quiet:
            return
        self._quiet = True
        try:
            try:
                self.overrides()
            except ValueError as e:
                self.error = f"{e}; the columns were not changed"
                self.columns = event.old
                return
            match = [k for k, (_, c) in PRESETS.items() if SEP.join(c) == self.columns]
            self.preset = match[0] if match else "custom"
        finally:
            self._quiet = False

    # ------------------------------------------------------------------ runs

    def _plan(self) -> tuple[list, object]:
        """(label, overrides, config) per column and the session canvas; ValueError when invalid."""
        ex = self.session
        if ex.model is None:
            raise ValueError("no model is loaded yet")
        base, canvas = ex.sampler_config(), ex.canvas()
        plan = []
        for i, o in enumerate(self.overrides()):
            try:
                plan.append((column_label(o), o, column_config(base, o)))
            except ValueError as e:
                raise ValueError(f"column {i + 1}: {e}") from None
        return plan, canvas

    def start(self, *, wait: bool = False) -> bool:
        """Run every column (superseding a comparison in progress); False with a notice when invalid,
        the previous results kept."""
        try:
            plan, canvas = self._plan()
        except ValueError as e:
            self.error = str(e)
            return False
        ex = self.session
        judge_name = checkpoints.find_judge(ex.model, ex.param.checkpoint.objects)
        job_args = (ex.model, plan, canvas, judge_name, ex.template.strip(), ex.length, ex.seed, ex.device)
        self.error = ""
        self.base_info = self._describe_base(judge_name)
        job = self._worker.submit(lambda job: self._job(job, *job_args), wait=wait)
        # Through the dispatcher: start() runs inside a click's event, which Panel may process without
        # the document lock, and clearing the columns changes raw Bokeh models (heatmaps).
        ex.dispatch(lambda: self._begin(job, len(plan)))
        return True

    def _begin(self, job, n: int) -> None:
        """Clear the columns for a new comparison, once per job (UI thread): from start()'s dispatch,
        or from the job's first column if that is handled first (a fast model's first column was
        seen to arrive before start()'s reset, and then had no slot to go in)."""
        if self._worker.is_current(job) and self._begun is not job:
            self._begun = job
            self.param.update(results=[None] * n, running=True, run_id=self.run_id + 1,
                              status=f"sampling {n} configurations …")

    def _describe_base(self, judge_name) -> str:
        ex = self.session
        cfg = ex.sampler_config()
        template = f"template {ex.template.strip()!r}" if ex.template.strip() else "no template"
        judge = f"gen-PPL judged by {judge_name}" if judge_name else "no AR judge for this alphabet: no gen-PPL"
        return (f"{ex.model_info.get('name', '?')}, seed {ex.seed}, length {ex.length}, {template}; "
                f"session knobs: steps={cfg.steps}, strategy={cfg.strategy}, temperature={cfg.temperature:g}, "
                f"schedule={cfg.schedule}; {judge}")

    def _job(self, job, model, plan, canvas, judge_name, template, length, seed, device) -> None:
        judge = None
        for i, (label, overrides, config) in enumerate(plan):
            if job.cancelled:
                return self.session.dispatch(lambda: self._finished(job, "stopped"))
            try:
                if judge is None and judge_name:
                    judge = checkpoints.load(judge_name, device)
                result = self._run_column(job, model, judge, judge_name, label, overrides, config, canvas,
                                          template, length, seed)
            except Exception as e:  # the column says why; the others still run
                if job.cancelled:
                    return self.session.dispatch(lambda: self._finished(job, "stopped"))
                log.warning("compare column %d failed: %s", i, e, exc_info=not isinstance(e, ValueError))
                result = {"label": label, "error": f"{label}: {e}"}
            self.session.dispatch(lambda i=i, result=result: self._column_done(job, i, len(plan), result))
        self.session.dispatch(lambda: self._finished(job, ""))

    def _run_column(self, job, model, judge, judge_name, label, overrides, config, canvas, template,
                    length, seed) -> dict:
        """One column on the worker thread: its model and canvas, the sampler run, its scores."""
        from ..frames import Frames, glyph_table

        if overrides.get("model") == "ar":
            if judge is None:
                raise ValueError("no AR checkpoint with this model's alphabet in checkpoints/ "
                                 "(train one with `python run.py train --kind ar`)")
            run_model, name = judge, judge_name
            canvas = start_canvas(judge, template, min(length, judge.config.block_size), seed)
        else:
            run_model, name = model, self.session.model_info.get("name", "?")
        traj = sample_canvas(run_model, config, canvas, on_step=lambda record: not job.cancelled)
        frames = Frames.from_trajectory(traj, glyph_table(run_model.tokenizer))
        return {"label": label, "model": name, "kind": run_model.config.kind, "config": config,
                "traj": traj, "frames": frames, "text": frames.text(), "tokenizer": run_model.tokenizer,
                "metrics": score(model, traj, judge), "error": ""}

    def _column_done(self, job, i: int, n: int, result: dict) -> None:
        if not self._worker.is_current(job):
            return
        self._begin(job, n)
        results = list(self.results)
        results[i] = result
        self.results = results

    def _finished(self, job, message: str) -> None:
        if job is not self._worker.current:
            return
        self.running = False
        done = [r for r in self.results if r is not None and not r.get("error")]
        self.status = message or f"{len(done)} of {len(self.results)} configurations sampled"

    def stop_run(self) -> None:
        self._worker.cancel()
        if self.running:
            self.param.update(running=False, status="stopped")

    @param.depends("run", watch=True)
    def _run_clicked(self):
        self.start()

    @param.depends("stop", watch=True)
    def _stop_clicked(self):
        self.stop_run()

    def texts(self) -> list[str | None]:
        return [r["text"] if r and not r.get("error") else None for r in self.results]

    def on_model_changed(self) -> None:
        """Results of another model no longer describe this one."""
        self._worker.cancel()
        self.param.update(results=[], running=False, status="", base_info="")

    def on_shown(self) -> None:
        """Opening the tab (or a link to it) shows the comparison: run it once if nothing is shown."""
        if not self.running and not any(self.results or []):
            self.start()

    def close(self) -> None:
        self._worker.cancel()


def build(state):
    from ..views.compare_column import CompareView

    tab = CompareState(state)
    return tab, CompareView(tab=tab)
