"""What one browser session may ask of the server, as the operator set it: the only definition of the
serving limits.

`python run.py serve --max-calls-per-request N --auto-start-seconds S --max-jobs-per-session N
--max-result-mb MB` hands them to every session through the environment variables below (cli/serve.py,
session_defaults), the way `panel serve explorer/dashboard/app.py` users set them; unset, the
defaults here apply, so both ways of serving get the same limits.

Why these four. A class shares one machine: a shared link or a widget can ask for any amount of work
(a Sweep link's grid once asked for ~19 million model calls and held 1.5 GB), and every session's
runs wait for the device while it is done.
  * calls_per_request: the model calls one request (a sweep, a comparison, a batch of samples, a
    run) may make. They are counted per sample, as the CPU pays them: a call on a batch of 64
    samples costs about 64 single calls there, and a link asks for 64 samples as easily as for one.
    An AR baseline counts a call per generated token and sample. A request over it is refused with
    a notice giving its estimate and the limit.
  * auto_start_seconds: the estimated seconds of model calls a request may cost and still start by
    itself (a link opening a tab, a knob change, the quality sweep after a run). Above it the page
    shows the estimate and waits for its Run button, so a link never starts more than a few seconds
    of work. Seconds, not calls: a call of the 24-symbol patterns model costs a thirtieth of a
    Shakespeare one (`call_seconds`). Explore's own run is bounded by the sidebar and always starts.
  * jobs_per_session: runs and sweeps a session may have queued or running at once (tasks.Worker
    counts them; a new request of a tab replaces that tab's own one, so only different tabs add up).
    A session's background work also runs one task at a time, so it holds one sweep's working
    memory, not one per tab.
  * result_mb: memory of results a session keeps at once (trajectories, sweep tables, samples),
    estimated before the request starts; each tab keeps only its latest result.
"""
from __future__ import annotations

import logging
import math
import os
import threading
from dataclasses import dataclass, fields

log = logging.getLogger(__name__)

ENV = {"calls_per_request": "MDLM_EXPLORER_MAX_CALLS", "auto_start_seconds": "MDLM_EXPLORER_AUTO_START_SECONDS",
       "jobs_per_session": "MDLM_EXPLORER_MAX_JOBS", "result_mb": "MDLM_EXPLORER_MAX_RESULT_MB"}
FLAGS = {"calls_per_request": "--max-calls-per-request", "auto_start_seconds": "--auto-start-seconds",
         "jobs_per_session": "--max-jobs-per-session", "result_mb": "--max-result-mb"}
MB = 1 << 20
# Result sizes (checked against real results in tests/unit/dashboard/runtime/test_limits.py). A recorded run keeps, per step and
# position, its Trajectory's tokens, scores, proposals, confidence and flags (26 bytes) and the page's
# Frames of the same (38 bytes); a sweep keeps one table row per sample: its text (up to 4 bytes a
# character in a Python string) and about 40 numbers and labels.
RUN_BYTES_PER_CELL = 64
RUN_BYTES_PER_ROW = 2048  # per step: the arrays' own headers
SWEEP_BYTES_PER_SAMPLE = 1024
SWEEP_BYTES_PER_CHAR = 4
# Rows a dashboard sweep keeps under way (sampling.sample_many's tokens_in_flight, at the canvas's length):
# their logits and each step's copies are a sweep's working memory. The library's default (1,024 rows of
# 256) held 510 MB over the loaded Shakespeare model for a 19,328-call grid of 64 samples a cell; 256 rows
# held 170 MB, and finished as many samples in the same 45 s (cells still share their calls).
SWEEP_ROWS_IN_FLIGHT = 256
CALL_OVERHEAD_S = 0.0015  # fixed cost of one model call on a CPU (python, kernel launches), measured
FLOPS_GUESS = 5e10  # CPU FLOP/s until the server has timed a sweep of the checkpoint


class LimitExceeded(ValueError):
    """A request over one of the session's limits; its message is the page's notice."""


@dataclass(frozen=True)
class Limits:
    """The serving limits (module docstring); read with `Limits.from_env()`."""

    calls_per_request: int = 20_000
    auto_start_seconds: float = 5.0
    jobs_per_session: int = 4
    result_mb: int = 64

    @classmethod
    def from_env(cls, environ=None) -> "Limits":
        """The limits the server was started with (ENV); a value that is not a positive whole number
        is logged and the default used: a typo must not stop a served class."""
        environ = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            text = environ.get(ENV[f.name], "").strip()
            if not text:
                continue
            try:
                values[f.name] = parse_limit(text, f.type == "float")
            except ValueError as e:
                log.warning("%s=%r: %s; using %s", ENV[f.name], text, e, f.default)
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """{variable: value} that from_env reads back as these limits (serve sets them)."""
        return {ENV[f.name]: str(getattr(self, f.name)) for f in fields(self)}

    def check_calls(self, what: str, calls: int) -> None:
        """Refuse a request estimated at `calls` model calls (counted per sample) over the limit."""
        if calls > self.calls_per_request:
            raise LimitExceeded(f"{what} needs ≈ {calls:,} model calls (counted per sample); this server allows "
                                f"{self.calls_per_request:,} per request ({FLAGS['calls_per_request']}): ask for "
                                "fewer samples, steps or curves")

    def starts_by_itself(self, seconds: float) -> bool:
        """Whether a request estimated at `seconds` may start without a click (a link, a knob change)."""
        return seconds <= self.auto_start_seconds

    def waiting_note(self, calls: int, seconds: float, button: str = "Run") -> str:
        """What a request too large to start by itself says while it waits for its `button`."""
        return (f"{WAITING}: ≈ {calls:,} model calls counted per sample, {took(seconds)} here, "
                f"over the {self.auto_start_seconds:g} s a link or a change starts alone "
                f"({FLAGS['auto_start_seconds']}); press {button}")


# How a request too large to start by itself begins its note (waiting_note): `run.py rehearse` reads it to
# tell a figure waiting for its button from one that failed to draw
WAITING = "not started by itself"


def parse_limit(text: str, fraction: bool = False) -> int | float:
    """A limit's value: a positive whole number, or a positive number with `fraction` (ValueError with
    a readable reason otherwise)."""
    try:
        value = float(str(text).strip()) if fraction else int(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a {'number' if fraction else 'whole number'}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"must be a positive {'number' if fraction else 'whole number'}, got {text.strip()}")
    return value


def sweep_tokens_in_flight(length: int) -> int:
    """tokens_in_flight for a dashboard sweep of canvases of `length` (SWEEP_ROWS_IN_FLIGHT says why)."""
    return SWEEP_ROWS_IN_FLIGHT * max(length, 1)


def took(seconds: float) -> str:
    """An estimate of seconds as the page says it: 'under a second', 'about 40 s', 'about 2.5 min'."""
    return ("under a second" if seconds < 1 else f"about {seconds:.0f} s" if seconds < 90
            else f"about {seconds / 60:,.1f} min")


def call_seconds(n_params: int, length: int, rows: int = 1, rate: float | None = None) -> float:
    """Seconds one model call on `rows` canvases of `length` should take here: an overhead plus its
    tokens at `rate` s/token (measured by a sweep of the checkpoint, cache.SWEEP_RATES), else at
    2 FLOP per parameter per token."""
    return CALL_OVERHEAD_S + rows * length * (rate or 2.0 * n_params / FLOPS_GUESS)


def expected_cost(n_params: int, cells: list[dict], n: int, length: int, with_ar: bool, judge: bool,
                  rate: float | None = None, steps: int = 32) -> tuple[int, float]:
    """(model calls, seconds) a sweep should take: each call costs an overhead plus its tokens
    (batch x length) at `rate` s/token (as an earlier sweep on the server took, else 2 FLOP per parameter
    per token).
    `steps`: of cells that do not set their own. Threshold cells stop when confident: a quarter of the
    positions is the guess."""
    per_token = rate or 2.0 * n_params / FLOPS_GUESS
    batches, batch = math.ceil(n / 64), min(n, 64)
    calls = sum(min(length, max(1, length // 4) if c.get("threshold") is not None else c.get("steps", steps))
                for c in cells) * batches
    seconds = calls * (CALL_OVERHEAD_S + batch * length * per_token)
    if with_ar:  # one token per call thanks to the KV cache
        calls += length * batches
        seconds += length * batches * (CALL_OVERHEAD_S + 2 * batch * per_token)
    if judge:  # one scoring pass per sample
        seconds += (len(cells) + with_ar) * batches * (CALL_OVERHEAD_S + batch * length * per_token)
    return calls, seconds


def measured_rate(table) -> float | None:
    """Seconds per token per model call in a finished sweep (diffusion batches only), to calibrate
    the next estimate of this checkpoint on the server."""
    if table is None or not len(table) or "nfe" not in table:
        return None
    diff = table[table["sampler"] == "diffusion"].drop_duplicates(["seed", "nfe", "seconds"])
    tokens = float((diff["nfe"].astype(float) * diff["batch_size"].astype(float) * diff["length"].astype(float)).sum())
    busy = float(diff["seconds"].sum() - diff["nfe"].astype(float).sum() * CALL_OVERHEAD_S)
    return busy / tokens if tokens > 0 and busy > 0 else None


def run_calls(rows: int, cfg: bool) -> int:
    """Model calls of one sample's run of `rows` steps (classifier-free guidance calls twice a step)."""
    return rows * (2 if cfg else 1)


def sweep_size(vary: dict, samples: int, length: int, base, *, ar: bool = False) -> tuple[int, int]:
    """(model calls counted per sample, samples) of a sweep over `vary` ({knob: [values]}, as
    experiments.cells_from_vary takes it: a None among the thresholds keeps the scheduled cells), from
    the lists' lengths alone, so a link's huge grid is refused before its cells are built.

    base: the SamplerConfig the cells vary (its steps where `vary` has none; a Fast-dLLM factor makes
    every cell adaptive). A cell's calls: its steps (at most the canvas's `length`); a threshold or
    factor cell up to a call per position; twice with guidance. ar: the AR baseline's `samples` too,
    a call per position each."""
    others = 1
    for knob, values in vary.items():
        if knob not in ("steps", "threshold"):
            others *= len(values)
    steps = vary.get("steps", [base.steps])
    thresholds = vary.get("threshold", [None])
    adaptive = [t for t in thresholds if t is not None]
    scheduled = None in thresholds
    if base.replace(threshold=None).adaptive:  # every cell stops when confident: no step count holds
        per_cell = [length] * (len(steps) * scheduled + len(adaptive))
    else:
        per_cell = [min(s, length) for s in steps] * scheduled + [length] * len(adaptive)
    calls = run_calls(sum(per_cell) * others, base.cfg_scale > 0) * samples
    n = len(per_cell) * others * samples
    return calls + (length * samples if ar else 0), n + (samples if ar else 0)


def run_bytes(rows: int, length: int, samples: int = 1) -> int:
    """Memory a recorded run keeps: its trajectory and the page's frames, `rows` canvases of `length`."""
    return samples * rows * (length * RUN_BYTES_PER_CELL + RUN_BYTES_PER_ROW)


def table_bytes(samples: int, length: int) -> int:
    """Memory a sweep's table keeps for `samples` samples of `length` characters or tokens."""
    return samples * (SWEEP_BYTES_PER_SAMPLE + SWEEP_BYTES_PER_CHAR * length)


class SessionShare:
    """One session's share of the server: its limits, the jobs it has queued or running (counted by
    tasks.Worker through `admit`), its background work one task at a time (`turn`), and the result
    memory its tabs keep (`reserve`, `release`)."""

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits.from_env()
        self.turn = threading.RLock()  # re-entrant: a task may run a nested task on its own thread
        self._lock = threading.Lock()
        self._jobs: list = []
        self._held: dict[str, tuple[int, str]] = {}  # slot -> (bytes, what)

    def live_jobs(self) -> list:
        """Jobs queued or running and not cancelled (a cancelled one ends at its next step)."""
        with self._lock:
            self._jobs = [j for j in self._jobs if not (j.done.is_set() or j.cancel_requested)]
            return list(self._jobs)

    def admit(self, job, replacing=None) -> None:
        """Count `job` as queued, or raise LimitExceeded when the session has its share of jobs going
        already (`replacing`: the job it supersedes, cancelled next, so not counted)."""
        live = [j for j in self.live_jobs() if j is not replacing]
        limit = self.limits.jobs_per_session
        if len(live) >= limit:
            going = ", ".join(sorted({j.name for j in live}))
            raise LimitExceeded(f"this session already has {len(live)} runs or sweeps queued or running ({going}); "
                                f"this server allows {limit} at once ({FLAGS['jobs_per_session']}): wait for one "
                                "or stop it")
        with self._lock:
            self._jobs.append(job)

    def reserve(self, slot: str, nbytes: int, what: str) -> None:
        """Count `nbytes` of results for `slot` (a tab's result, replacing its previous one), or raise
        LimitExceeded when the session's results would pass the limit."""
        limit = self.limits.result_mb * MB
        with self._lock:
            others = sum(b for s, (b, _) in self._held.items() if s != slot)
            if others + nbytes > limit:
                held = f"; this session's other results hold ≈ {_mb(others)}" if others else ""
                raise LimitExceeded(f"{what} would keep ≈ {_mb(nbytes)} of results{held}; this server keeps at most "
                                    f"{self.limits.result_mb:,} MB per session ({FLAGS['result_mb']}): ask for "
                                    "fewer samples or steps")
            self._held[slot] = (nbytes, what)

    def release(self, slot: str) -> None:
        """The slot's result is gone (cleared, replaced by nothing, its tab closed)."""
        with self._lock:
            self._held.pop(slot, None)

    def held_bytes(self) -> int:
        with self._lock:
            return sum(b for b, _ in self._held.values())


def _mb(nbytes: int) -> str:
    return f"{nbytes / MB:,.1f} MB"
