"""Sweeps on a Dask cluster: every sampler call of a sweep is a task on a worker.

    from explorer import cluster, experiments
    with cluster.open_client(workers=2) as client:          # or open_client(scheduler="tcp://host:8786")
        table, summary = experiments.sweep(model, config, vary, n_samples=30, client=client)

The table is the in-process sweep's, row for row (the same jobs, seeds and scoring; only the
timing columns differ). Models never travel pickled: a task names its checkpoint file (ModelRef) and
each worker loads it once and keeps it, keyed by (path, mtime, device). Progress is reported as
tasks finish; `cancel` cancels the queued tasks and sets a Dask Event that running tasks poll
between sampler steps. A worker that dies loses only its tasks: the scheduler reruns them on
another worker (up to distributed.scheduler.allowed-failures times), and a task that raises is
retried RETRIES times.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dask
import pandas as pd
from distributed import Client, Event, KilledWorker, LocalCluster

from . import experiments as ex
from . import names
from .checkpoint import load_checkpoint, resolve_checkpoint
from .devices import resolve_device
from .sampling import SamplerConfig

SCHEDULER_ENV = names.SCHEDULER_ENV  # `run.py serve --scheduler` hands the address to the app here
CONNECT_TIMEOUT_S = 10.0
RETRIES = 2  # a task that raises (say a transient CUDA error) runs again, up to this many times
POLL_S = 0.05  # how often the client looks at its futures and at `cancel`
CANCEL_CHECK_S = 0.2  # how often a running task asks the scheduler whether its sweep was cancelled


class ClusterError(RuntimeError):
    """The cluster cannot be reached or used; the message says what to fix."""


# ---- models by reference -------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelRef:
    """A loadable checkpoint: its path as the client resolved it, its name (workers that do not share
    the client's file system look it up in their own checkpoints/), and a digest of its metadata so a
    worker holding another version of the file says so instead of sampling from other weights."""

    path: str
    name: str
    meta_digest: str

    @classmethod
    def of(cls, model) -> "ModelRef | None":
        if model is None:
            return None
        path = getattr(model, "path", None)
        if path is None:
            raise ClusterError("a model swept on a Dask cluster must come from a checkpoint file (explorer."
                               "load_checkpoint): workers load it by name or path, never as a pickled object")
        return cls(str(Path(path).resolve()), Path(path).stem, meta_digest(getattr(model, "meta", None) or {}))

    def resolve(self) -> Path:
        path = Path(self.path)
        return path if path.exists() else resolve_checkpoint(self.name)  # a directory: a Hugging Face model


def meta_digest(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode()).hexdigest()[:16]


_MODELS: dict[tuple, object] = {}  # worker side: (path, mtime_ns, device) -> model, kept between tasks
_WARMED: set[tuple] = set()
_LOCK = threading.Lock()
_JOBS_STARTED = 0  # tasks this process has started (read by client.run(jobs_started) in the tests)


def worker_model(ref: ModelRef, device):
    """The model `ref` names on `device`, loaded once per process (again only if the file changed)."""
    path = ref.resolve()
    key = (str(path), path.stat().st_mtime_ns, str(device))
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            for old in [k for k in _MODELS if k[0] == key[0] and k[2] == key[2]]:
                del _MODELS[old]  # an older save of the same file
            model = load_checkpoint(path, device)
            if meta_digest(model.meta) != ref.meta_digest:
                raise ClusterError(f"the worker's {path} is another version of {ref.name!r} than the client's "
                                   "(its metadata differs): share the checkpoints directory or copy the file")
            _MODELS[key] = model
    return model


def jobs_started() -> int:
    return _JOBS_STARTED


# ---- worker side: one sampler call of a sweep ----------------------------------------------------

@dataclass(frozen=True)
class _Spec:
    """What every task of one sweep shares; all by value or by reference, nothing heavier."""

    model: ModelRef
    ar: ModelRef | None
    judge: ModelRef | None
    words: frozenset | None
    base: SamplerConfig
    seed: int
    length: int
    template: object
    cancel_name: str | None
    device: str = "auto"  # resolved on each worker: its GPU when it has one (dask-cuda: one per worker)


def _stop_checker(name: str | None):
    """should_stop for the sampler: the sweep's Dask Event, asked at most every CANCEL_CHECK_S (each
    question is a round trip to the scheduler, and a step can take well under a millisecond)."""
    if name is None:
        return None
    event, state = Event(name), {"at": -CANCEL_CHECK_S, "set": False}

    def stop() -> bool:
        now = time.monotonic()
        if not state["set"] and now - state["at"] >= CANCEL_CHECK_S:
            state["at"], state["set"] = now, event.is_set()
        return state["set"]
    return stop


def run_job(spec: _Spec, job) -> pd.DataFrame | None:
    """The task: one batch of one cell, sampled and scored as the in-process sweep does it; None when
    the sweep was cancelled before or during the call."""
    global _JOBS_STARTED
    _JOBS_STARTED += 1
    stop = _stop_checker(spec.cancel_name)
    if stop is not None and stop():
        return None
    device = resolve_device(spec.device)
    model = worker_model(spec.model, device)
    ar = worker_model(spec.ar, device) if spec.ar is not None else None
    judge = worker_model(spec.judge, device) if spec.judge is not None else None
    warm = (id(model), id(ar), spec.length, spec.template)
    if warm not in _WARMED:  # one-time costs stay out of the first task's timing, as in-process
        ex._warm_up(model, ar, spec.base, spec.length, spec.template)
        _WARMED.add(warm)
    traj = ex._run_job(job, model, ar, spec.base, spec.seed, spec.length, spec.template, stop)
    if traj is None:
        return None
    scoring = ex._Scoring.for_model(model, judge, spec.words)
    return scoring.rows(traj.final, ex._job_columns(job, traj, spec.seed))


# ---- client side ---------------------------------------------------------------------------------

def sweep(model, base_config: SamplerConfig | None = None, vary=None, n_samples: int = 30, seed: int = 0, *,
          client=None, **kwargs):
    """experiments.sweep, on `client`'s Dask cluster when there is one (sweep_on), else in this
    process. Callers that may have a cluster call this; experiments itself never loads Dask."""
    if client is None:
        return ex.sweep(model, base_config, vary, n_samples, seed, **kwargs)
    kwargs.pop("pack", None)  # (the cluster runs each batch as its own task)
    return sweep_on(client, model, base_config, vary, n_samples, seed, **kwargs)


def sweep_on(client, model, base_config: SamplerConfig | None = None, vary=None, n_samples: int = 30,
             seed: int = 0, *, length=None, template=None, judge=None, words=None, batch_size=None,
             progress=None, cancel=None, include_ar=None, reference=None, retries: int = RETRIES):
    """experiments.sweep with every sampler call a task on `client`'s cluster; same arguments, same
    table (timings apart), same SweepCancelled. Models go by reference (ModelRef), so each must have
    been loaded from a checkpoint file."""
    base = base_config or SamplerConfig()
    cells = ex.sweep_cells(base, vary or {"steps": [base.steps]})
    knobs = list(cells[0])
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    length = ex.canvas_length(model, length, template)
    ar_model = ex._ar_model(include_ar, judge)
    if template is not None and (ar_model is not None or model.config.kind == "ar"):
        raise ValueError("an AR model cannot fill a template; sweep without include_ar")
    scoring = ex._Scoring.for_model(model, judge, words)
    jobs = ex._plan(cells, n_samples, batch_size or min(n_samples, 64), ar_model is not None)
    spec = _Spec(ModelRef.of(model), ModelRef.of(ar_model), ModelRef.of(scoring.judge),
                 None if words is None else frozenset(words),  # None: each worker reads the checkpoint's
                 base, seed, length, template, None if cancel is None else f"mdlm-cancel-{uuid.uuid4().hex}")
    attrs = dict(base=base.to_dict(), knobs=knobs, kind=scoring.kind)
    parts = _run_tasks(client, spec, jobs, progress, cancel, retries, attrs)
    if reference is not None:
        parts.append(ex.reference_rows(scoring, reference, length))
    table = ex._concat(parts, **attrs)
    return table, ex.aggregate(table, knobs)


def _run_tasks(client, spec: _Spec, jobs: list, progress, cancel, retries: int, attrs: dict) -> list:
    """One task per job; their rows in plan order (the in-process table's order). Raises
    SweepCancelled with the finished tasks' rows when `cancel` fires."""
    prefix = f"mdlm-sweep-{uuid.uuid4().hex[:12]}"
    futures = client.map(run_job, [spec] * len(jobs), jobs, key=[f"{prefix}-{i}" for i in range(len(jobs))],
                         retries=retries, pure=False)  # one message to the scheduler, not one per task
    try:
        rows, done, cancelled = _collect(futures, jobs, progress, cancel)
        if cancelled:  # running tasks see it at their next check; queued ones are cancelled below
            Event(spec.cancel_name, client=client).set()
    finally:
        client.cancel(futures)  # cancels what is queued or running, releases what is finished
    if cancelled:
        finished = [r for r in rows if r is not None]
        raise ex.SweepCancelled(ex._concat(finished, **attrs), done, sum(j.n for j in jobs))
    return rows


def _collect(futures: list, jobs: list, progress, cancel) -> tuple[list, int, bool]:
    """(rows per job, samples done, cancelled?), calling progress(done, total) as tasks finish."""
    rows, pending = [None] * len(futures), dict(enumerate(futures))
    done, total = 0, sum(j.n for j in jobs)
    while pending:
        if ex._is_cancelled(cancel):
            return rows, done, True
        finished = [i for i, f in pending.items() if f.done()]
        for i in finished:
            future = pending.pop(i)
            rows[i] = _result(future)
            future.release()  # else the scheduler would recompute it if its worker died later
            done += jobs[i].n
            if progress is not None:
                progress(done, total)
        if not finished:
            time.sleep(POLL_S)
    return rows, done, False


def _result(future):
    """A task's rows; a task that kept killing its workers is the cluster's problem, said plainly."""
    try:
        return future.result()
    except KilledWorker as e:
        raise ClusterError(f"a sweep task died with every worker it ran on ({e}); the workers may be "
                           "running out of memory") from e


# ---- connecting ----------------------------------------------------------------------------------

def connect(address: str, timeout: float = CONNECT_TIMEOUT_S) -> Client:
    """A client of the scheduler at `address` that has at least one worker, or ClusterError within
    about `timeout` seconds (twice that at most: reaching it, then waiting for a worker)."""
    check_scheduler(address, timeout)
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, ValueError) as e:
        raise ClusterError(f"cannot connect to the Dask scheduler at {address}: {e}") from e
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        client.close()
        raise ClusterError(f"the Dask scheduler at {address} has no workers (waited {timeout:g} s); "
                           f"start some with `dask worker {address}`") from None
    return client


def check_scheduler(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Reach `address` once (a Dask handshake), before any Client exists: a Client that fails to
    connect leaves a half-made object that complains again when the process exits."""
    from distributed.comm import connect as comm_connect

    async def probe():
        comm = await comm_connect(address, timeout=timeout)
        await comm.close()

    if not str(address).strip():
        raise ClusterError("the Dask scheduler address is empty; give one like tcp://HOST:8786")
    try:  # in a thread of its own: asyncio.run refuses to run inside a thread's running loop (a server's)
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, probe()).result()
    # Whatever answers at a wrong address can fail the handshake in any way (one case seen: a service on
    # the port sent bytes that Dask read as a 3 EiB frame length, a MemoryError): all mean "not a scheduler".
    except Exception as e:
        raise ClusterError(f"cannot reach a Dask scheduler at {address!r} within {timeout:g} s "
                           f"({type(e).__name__}: {e})") from None


def local_cluster(n_workers: int, threads: int = 0) -> LocalCluster:
    """n_workers worker processes on the local host, one task at a time each. threads: torch threads per
    worker (0: Dask's default of 1, which keeps n workers from oversubscribing the cores)."""
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise ClusterError(f"a local cluster needs at least 1 worker process, got {n_workers!r}")
    env = {"OMP_NUM_THREADS": str(threads)} if threads else None
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ in its workers (memory goes back to the OS sooner); glibc
    # then maps every large tensor afresh, and one sampler call took 0.50 s in a worker vs 0.26 s in-process.
    spawn = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
             if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": spawn}):  # read when the nannies are made
        return LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1, dashboard_address=None,
                            env=env)


@contextmanager
def open_client(scheduler: str | None = None, workers: int | None = None, *, threads: int = 0,
                timeout: float = CONNECT_TIMEOUT_S):
    """A client of an existing scheduler, or of a LocalCluster of `workers` processes started on the local host
    (and shut down on exit); None when neither is given, so callers can always write `with`."""
    if scheduler is not None and workers is not None:
        raise ClusterError("give a scheduler address or a number of local workers, not both")
    if scheduler is None and workers is None:
        yield None
        return
    cluster = local_cluster(workers, threads) if workers is not None else None
    try:
        client = Client(cluster, set_as_default=False) if cluster is not None else connect(scheduler, timeout)
        try:
            yield client
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


_ENV_CLIENTS: dict[str, Client] = {}
_ENV_LOCK = threading.Lock()


def client_from_env() -> Client | None:
    """The dashboard's client: connected to MDLM_EXPLORER_SCHEDULER (set by `run.py serve --scheduler`),
    one per process and address, shared by every session; None when the variable is unset. Pass it to
    experiments.sweep(..., client=...). Raises ClusterError when the scheduler cannot be reached."""
    address = os.environ.get(SCHEDULER_ENV, "").strip()
    if not address:
        return None
    with _ENV_LOCK:
        client = _ENV_CLIENTS.get(address)
        if client is None or client.status in ("closing", "closed"):
            client = _ENV_CLIENTS[address] = connect(address)
    return client
