"""One queue per device for every session's sampler runs, and the turns other work takes with them.

The UI thread must never run the model (a 32-step run takes about a second on a CPU), so runs,
sweeps and model loads happen on daemon threads. Results come back through a `dispatch` function
that runs a callback on the UI side: in a served session it schedules the callback on the Bokeh
document's event loop (where Bokeh models may be changed safely); in scripts and tests it simply
calls it.

Sharing the machine: a class of students on one server. A device is one resource however many sessions a server holds:
  * Sampler runs of every session go through one `DeviceQueue` per device (process-wide, one worker
    thread). Requests waiting together with the same model object, the same SamplerConfig except
    the seed and the same canvas (the plan's, or template + length) run as ONE batched `sample` call with one
    generator per row, so each session gets exactly its solo result (sampler.py: every random draw
    is per row) at far less than the cost of serial runs. Each request sees only its own row of
    every step and its own Trajectory (`StepRecord.row`, `Trajectory.row`). A request cancelled
    (superseded, stopped, tab closed) while waiting is dropped at once; one cancelled while its
    batch runs gets no more callbacks, and a batch whose rows are all cancelled stops. AR models
    and lone requests run unbatched, exactly as a solo run.
  * On a GPU, waiting requests whose knobs differ in what merged runs may (steps, strategy, schedule,
    temperature, seed) also step as one merged batch (`sample_many`), each run ending when its own
    steps do; on a CPU they run one after another (DeviceQueue.merge says why).
  * Other heavy work (quality sweeps, mean confidence, the tabs' Workers) takes turns with the runs
    through the device's `DeviceTurns`: a Worker made with `device=` holds a background turn while
    its task runs, and hands the device over whenever its task checks `job.cancelled` (which tasks
    do between chunks: the sweep after every sampler step) and a run is waiting. The queue holds
    the device for one batch at a time; when both kinds wait they alternate, so a run waits at most
    one chunk of background work, and a long sweep still progresses between runs.
    Why turns and not queue items: a sweep is one long call into experiments.sweep, which already
    polls its cancel hook per step; turning that poll into a yield point interleaves it with the
    runs without splitting it into queue items or changing how it samples. Why per batch and not
    per model call for the runs themselves: a batch is all the interactive work that was waiting,
    so handing the device over inside it would only make every waiting session slower.
  * Precision: a queue runs its batches, and the device's background Workers their tasks, under
    torch.autocast when its precision resolves to bf16 (`serve --precision`, env
    MDLM_EXPLORER_PRECISION; default fp32, so every figure stays the fp32 one). bf16 on a CPU with
    AMX is 2-3x faster for batched rows, but it gives up the identity above: bf16 kernels are not
    batch-invariant (the blocking oneDNN picks depends on the batch), so a batched row may differ
    from the same seed run solo under bf16. Measured on shakespeare, 16-32 steps, batches of 2-8:
    0/35 rows differ at 64 and 256 characters, 23/35 at 128. Texts also differ from fp32 ones.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Callable

from ... import names

log = logging.getLogger(__name__)

MAX_BATCH = 64  # default rows per batched call (more wait for the next batch); DeviceQueue.max_batch
PRECISION_ENV = "MDLM_EXPLORER_PRECISION"
PRECISIONS = names.PRECISIONS


def precision_from_env() -> str:
    """The precision new device queues use: MDLM_EXPLORER_PRECISION, default fp32 (a bad value is
    logged and ignored: a typo must not stop a served class)."""
    value = os.environ.get(PRECISION_ENV, "").strip().lower() or "fp32"
    if value not in PRECISIONS:
        log.warning("%s=%r is not one of %s: using fp32", PRECISION_ENV, value, PRECISIONS)
        return "fp32"
    return value


# ---------------------------------------------------------------------------------- device turns

class DeviceTurns:
    """Who uses a device next: the run queue ("run") or background work ("background").

    One holder at a time (re-entrant per thread: a task that submits a nested task with wait=True
    runs it on its own turn). When both kinds wait, the kind that did not have the last turn goes."""

    KINDS = ("run", "background")

    def __init__(self):
        self._cond = threading.Condition()
        self._holder: int | None = None  # thread id
        self._depth = 0
        self._waiting = Counter()
        self._last: str | None = None
        self._grants = 0  # turns given so far: pause() waits until the device went to someone else

    def _may_take(self, kind: str) -> bool:
        other = self.KINDS[1 - self.KINDS.index(kind)]
        return self._holder is None and (not self._waiting[other] or self._last != kind)

    def acquire(self, kind: str) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._holder == me:
                self._depth += 1
                return
            self._waiting[kind] += 1
            try:
                self._cond.wait_for(lambda: self._may_take(kind))
            finally:
                self._waiting[kind] -= 1
            self._holder, self._depth, self._last = me, 1, kind
            self._grants += 1

    def release(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._holder = None
                self._cond.notify_all()

    @contextmanager
    def turn(self, kind: str):
        self.acquire(kind)
        try:
            yield
        finally:
            self.release()

    def runs_waiting(self) -> bool:
        return self._waiting["run"] > 0

    def pause(self) -> None:
        """From a background holder between chunks: let whoever waits go first (a run batch, or other
        background work such as a checkpoint load, which would otherwise wait for a whole sweep), then
        go on. Waits until the device was handed over, so this thread cannot take it straight back."""
        if not (self._waiting["run"] or self._waiting["background"]):  # cheap check: after every step
            return
        with self._cond:
            if self._holder != threading.get_ident() or self._depth != 1:
                return  # not ours, or nested: keep it (the outer level pauses)
            self._holder, grants = None, self._grants
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._grants != grants or not any(self._waiting.values()), timeout=5)
        self.acquire("background")


# ---------------------------------------------------------------------------------- the run queue

@dataclass(eq=False)
class SampleRequest:
    """One session's sampler run and where its results go (all callbacks run on the device thread).

    on_start(): the run is starting; on_step(StepRecord): this request's row of a step;
    on_done(Trajectory): its own trajectory, as a solo run returns it; on_stopped(): cancelled
    (dropped from the queue or stopped mid-run); on_failed(exception). Exactly one of the last
    three is called, then `job.done` is set. The run starts from `plan` (a sampling RunPlan of this
    model and config: the canvas the session drew), else from `length` and `template`."""

    job: object  # a runtime.tasks.Job (not imported: tasks.py builds on this module)
    model: object
    config: object  # SamplerConfig
    length: int | None = None
    template: str | None = None
    plan: object = None  # sampling.plan.RunPlan
    on_step: Callable = lambda record: None
    on_start: Callable = lambda: None
    on_done: Callable = lambda traj: None
    on_stopped: Callable = lambda: None
    on_failed: Callable = lambda error: None
    owner: object = None  # who asked (a session's id): a lone owner never waits for batch partners
    _finished: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def key(self):
        """Requests with equal keys can share a batched call; None: always alone."""
        if getattr(self.model.config, "kind", "diffusion") != "diffusion":
            return None
        if getattr(self.model.config, "process", None) == "uniform" or (getattr(self.model, "meta", None) or {}).get(
                "process") == "uniform":  # a uniform-state run draws the batch's noise from one generator
            return None
        canvas = ("plan", self.plan.canvas_key) if self.plan is not None else (self.length, self.template)
        return (id(self.model), self.config.replace(seed=0), *canvas)

    @property
    def canvas(self) -> dict:
        """The sampler's keywords for where the run starts: its plan, else its length and template."""
        return dict(plan=self.plan) if self.plan is not None else dict(length=self.length, template=self.template)

    @property
    def merge_key(self):
        """Requests with equal merge keys can step as one merged batch (sampling/merged.py: runs that
        differ in steps, strategy, schedule, temperature and seed); None: only with equal `key`s."""
        if self.key is None:
            return None
        from ...sampling import merge_key

        key = merge_key(dict(config=self.config, **self.canvas))
        return None if key is None else (id(self.model), key)

    def finish(self, outcome: str, value=None) -> None:
        """Report the outcome once (later calls are ignored), then mark the job done."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
        try:
            if outcome == "done":
                self.on_done(value)
            elif outcome == "failed":
                self.on_failed(value)
            else:
                self.on_stopped()
        except Exception:  # a broken callback must not take the device thread (and every session) down
            log.exception("a run's %s callback failed", outcome)
        finally:
            self.job.done.set()

    @property
    def finished(self) -> bool:
        return self._finished


@dataclass
class QueueStats:
    """What the queue did (for tests and benchmarks): every count since the queue started."""

    requests: int = 0  # submitted
    dropped: int = 0  # cancelled while waiting: never ran
    batches: int = 0  # sampler calls made
    rows: int = 0  # requests served by those calls
    batch_sizes: Counter = field(default_factory=Counter)  # batch size -> number of calls
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, **added) -> None:
        with self._lock:
            for name, n in added.items():
                setattr(self, name, getattr(self, name) + n)

    def count_batch(self, size: int) -> None:
        with self._lock:
            self.batches, self.rows = self.batches + 1, self.rows + size
            self.batch_sizes[size] += 1

    def snapshot(self) -> dict:
        with self._lock:
            return {"requests": self.requests, "dropped": self.dropped, "batches": self.batches,
                    "rows": self.rows, "batch_sizes": dict(self.batch_sizes)}


class DeviceQueue:
    """The sampler runs of every session on one device: one worker thread, compatible waiting
    requests batched (module docstring). Get it with `device_queue(device)`."""

    def __init__(self, name: str, gather_s: float = 0.01, max_batch: int = MAX_BATCH, precision: str = "fp32",
                 merge: bool | None = None):
        import torch

        self.name = name
        self.kind = torch.device(name).type  # 'cpu', 'cuda', ...: what merging and autocast go by
        # Runs whose knobs differ step as one merged batch (sampling/merged.py) where a step costs
        # more around the model than in it: a GPU, where one step then serves the whole class. On a
        # CPU the forward is most of a step and a batch of B rows costs nearly B rows' time, so a
        # merged batch mostly makes each session wait for the others' rows: eight `shakespeare` runs
        # of 256 characters ran 1.05-1.12x faster merged than one after another, yet their mean
        # wait grew by a quarter, and a class of 8 got fewer answers (54 against 58 a minute) at a
        # longer p95 (15.3 against 12.0 s). None: merge on any device but the CPU.
        self.merge = self.kind != "cpu" if merge is None else merge
        self.gather_s = gather_s  # an idle queue waits this long for more requests to batch with
        # Rows per call. A batch pays off when the device does B rows in less time than B calls (a
        # GPU; tiny models on a CPU: patterns 8 rows 3.5x faster). Where it does not, every row
        # of a batch waits for the whole batch: lower this to serve those sessions first come first.
        self.max_batch = max_batch
        self.turns = DeviceTurns()
        self.stats = QueueStats()
        self.set_precision(precision)
        self._cond = threading.Condition()
        self._waiting: list[SampleRequest] = []
        self._last_asked: dict = {}  # owner -> when it last submitted (see _gather_wait)
        self._thread: threading.Thread | None = None

    def submit(self, request: SampleRequest) -> None:
        with self._cond:
            self._waiting.append(request)
            self._last_asked[request.owner] = time.monotonic()
            self.stats.count(requests=1)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=f"device-queue-{self.name}", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        request.job.on_cancel(lambda: self._drop(request))

    def set_precision(self, precision: str) -> None:
        """auto|fp32|bf16 (auto: bf16 on CUDA and on CPUs with AMX/AVX512-BF16, as training picks).
        Takes effect from the next batch."""
        import torch

        from ...devices import autocast_dtype

        self.precision = precision
        self.dtype = autocast_dtype(torch.device(self.name), precision)  # None: plain fp32

    @property
    def precision_label(self) -> str:
        """'bf16' or 'fp32': what the queue actually runs at (for the page's header)."""
        return "fp32" if self.dtype is None else str(self.dtype).removeprefix("torch.").replace("bfloat", "bf")

    def autocast(self):
        """The context the device's model calls run in: torch.autocast at bf16, or nothing (autocast
        state is per thread, so this touches only the calling thread)."""
        if self.dtype is None:
            return nullcontext()
        import torch

        return torch.autocast(self.kind, dtype=self.dtype)

    def on_worker_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    def _drop(self, request: SampleRequest) -> None:
        """A cancelled request leaves the queue at once (a running one is left to its batch)."""
        with self._cond:
            if request not in self._waiting:
                return
            self._waiting.remove(request)
            self.stats.count(dropped=1)
        request.finish("stopped")

    def _gather_wait(self, recent_s: float = 10.0) -> float:
        """gather_s when another owner asked within `recent_s` seconds, else 0: a session alone on
        the server (a laptop, a lecturer's demo) does not wait for partners that will not come."""
        with self._cond:
            now = time.monotonic()
            for owner, when in list(self._last_asked.items()):
                if now - when > recent_s:
                    del self._last_asked[owner]
            return self.gather_s if len(self._last_asked) > 1 else 0.0

    def _take_batch(self) -> list[SampleRequest]:
        """The oldest waiting request and every compatible one behind it (up to max_batch): the same
        knobs but the seed, or knobs merged runs may differ in (run_batch says how each is run)."""
        with self._cond:
            if not self._waiting:
                return []
            first = self._waiting[0]
            key, merge = first.key, first.merge_key if self.merge else None
            if key is None:
                batch = [first]
            elif merge is None:
                batch = [r for r in self._waiting if r.key == key][:self.max_batch]
            else:
                batch = [r for r in self._waiting if r.merge_key == merge][:self.max_batch]
            for r in batch:
                self._waiting.remove(r)
            return batch

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._waiting))
            time.sleep(self._gather_wait())  # sessions that asked together are served together
            with self.turns.turn("run"), self.autocast():
                batch = self._take_batch()  # taken with the device in hand: late arrivals join
                if batch:
                    try:
                        run_batch(batch, self.stats)
                    except Exception as e:  # never let the thread die: every session needs it
                        log.exception("device queue %s: batch failed", self.name)
                        for r in batch:
                            r.finish("failed", e)
            if batch and not self.waiting():
                release_free_memory()


def release_free_memory() -> None:
    """Give the C heap's free pages back to the OS (glibc malloc_trim; elsewhere nothing).

    Why: a batch of B rows allocates B-sized activations (attention B x heads x L x L) that glibc
    keeps after they are freed, in the arena of the thread that made them; RSS then tracks the
    largest batch seen, not what is live (measured: +50 MB after 60 s of 8 sessions, all of it
    returned by a trim; Python objects did not grow). Called when the queue goes idle: about
    0.1 ms, and nothing waits for it."""
    global _malloc_trim
    if _malloc_trim is None:
        import ctypes
        import ctypes.util

        try:
            _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc (macOS, musl): the allocator does its own thing
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None  # libc's malloc_trim once looked up; False where there is none


def run_batch(batch: list[SampleRequest], stats: QueueStats | None = None) -> None:
    """Run `batch` (compatible requests) as one sampler call and hand each request its own row."""
    from ...sampling import SamplingCancelled

    for r in batch:
        if r.job.cancelled:  # cancelled between leaving the queue and now
            r.finish("stopped")
    batch = [r for r in batch if not r.finished]
    if not batch:
        return
    if stats is not None:
        stats.count_batch(len(batch))
    for r in batch:
        r.on_start()
    try:
        results = _sample_rows(batch)
    except SamplingCancelled:
        for r in batch:
            r.finish("stopped")
        return
    except Exception as e:
        log.exception("sampling failed")
        for r in batch:
            r.finish("failed", e)
        return
    for r, traj in zip(batch, results):
        r.finish("stopped" if r.job.cancelled or traj is None else "done", traj)


def _sample_rows(batch: list[SampleRequest]) -> list:
    """One sampler call for the batch; each request's Trajectory exactly as its solo run returns it."""
    import torch

    from ...sampling import sample, sample_any

    if len({r.key for r in batch}) > 1:  # knobs that differ beyond the seed: a merged batch
        return _sample_merged(batch)
    first = batch[0]
    args = dict(first.canvas, on_step=_fan_out(batch))
    if len(batch) == 1:  # alone: exactly the solo call (AR models always come here)
        return [sample_any(first.model, first.config, **args)]
    gens = [torch.Generator().manual_seed(r.config.seed) for r in batch]
    traj = sample(first.model, first.config, generator=gens, **args)
    return [replace(traj.row(i), config=r.config, seed=r.config.seed) for i, r in enumerate(batch)]


def _sample_merged(batch: list[SampleRequest]) -> list:
    """Requests whose knobs differ in what merged runs may (steps, strategy, schedule, temperature, seed)
    stepped as one batch by sample_many: each its solo run's Trajectory (None where it was cancelled),
    each step handed to its own on_step as it is made. One sampler step serves every session (on a GPU
    the steps, not the model, took most of a run)."""
    from ...sampling import sample_many

    runs = [dict(config=r.config, record=True, on_step=_own_steps(r), **r.canvas) for r in batch]

    def ended(i: int, traj) -> None:  # each run reaches its page as it ends, not with the batch's longest
        r = batch[i]
        r.finish("stopped" if r.job.cancelled or traj is None else "done", traj)

    return sample_many(batch[0].model, runs, on_finish=ended)


def _own_steps(r: SampleRequest):
    """A merged request's on_step: its own records; False (its run stops, the others go on) once it is
    cancelled or its callback fails."""
    return lambda record: not _gone(r) and _hand(r, record)


def _gone(r: SampleRequest) -> bool:
    """Whether r takes no more steps: it has finished, or it was cancelled (then told it stopped, once)."""
    if r.finished:
        return True
    if r.job.cancelled:
        r.finish("stopped")
        return True
    return False


def _hand(r: SampleRequest, record) -> bool:
    """r.on_step(record); False, r failed with the error, when the callback raises (this session's bug:
    the other runs go on)."""
    try:
        r.on_step(record)
    except Exception as e:
        log.exception("a run's on_step callback failed")
        r.finish("failed", e)
        return False
    return True


def _fan_out(batch: list[SampleRequest]):
    """The batch's on_step: each live request gets its own row; cancelled ones are told they
    stopped (once) and get nothing more; False (stop the batch) once no row is live."""
    def on_step(record) -> bool:
        live = False
        for i, r in enumerate(batch):
            if _gone(r):
                continue
            live = True
            if len(batch) == 1:
                _hand(r, record)
            elif record.row_active is None or record.row_active[i]:  # a finished threshold row waits
                _hand(r, record.row(i))
        return live
    return on_step


_QUEUES: dict[str, DeviceQueue] = {}
_QUEUES_LOCK = threading.Lock()


def device_queue(device=None) -> DeviceQueue:
    """The process-wide queue of `device` (a torch.device or its name; None = cpu), made on first
    use with the precision of MDLM_EXPLORER_PRECISION."""
    name = "cpu" if device is None else str(device)
    with _QUEUES_LOCK:
        if name not in _QUEUES:
            _QUEUES[name] = DeviceQueue(name, precision=precision_from_env())
        return _QUEUES[name]
