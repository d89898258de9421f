"""Every background worker of a session is bound to its device: Compare runs, the Sweep
tab's sweeps and browser training take turns with the sampler runs of every session and run at the
device queue's precision, instead of competing with them for the cores."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from explorer.dashboard.runtime.queue import device_queue
from explorer.dashboard.runtime.tasks import Task, Worker
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs import TAB_NAMES, build_tab
from tests.support.dashboard import save_tiny_checkpoints


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    return save_tiny_checkpoints(tmp_path)


@pytest.fixture
def state(checkpoints):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    for name in TAB_NAMES:
        build_tab(name, s)
    s.load(wait=True)
    assert s.model is not None, s.error
    yield s
    s.close()


def workers_of(obj, depth: int = 5, seen=None) -> list[Worker]:
    """Every Worker reachable from obj's attributes (tabs, their tasks...)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth < 0:
        return []
    seen.add(id(obj))
    if isinstance(obj, Worker):
        return [obj]
    values = obj.values() if isinstance(obj, dict) else getattr(obj, "__dict__", {}).values()
    return [w for v in list(values) for w in workers_of(v, depth - 1, seen)]


def test_a_worker_without_a_device_is_refused():
    with pytest.raises(ValueError, match="needs a device"):
        Worker("unbound", None)


@pytest.mark.slow
def test_every_worker_of_a_session_and_its_tabs_is_bound_to_the_session_device(state):
    found = workers_of(state)
    names = {w.name for w in found}
    # every kind of work a session starts: runs, loads, Compare, the Sweep tab's three sweeps, browser training
    assert {"run", "load", "sweep", "compare", "train", "sweep", "quality grid", "temperature comparison"} <= names
    assert {"validation text", "predictions", "accuracy vs t", "per-position confidence"} <= names  # Inspect's
    assert all(w.device == state.device for w in found), [(w.name, w.device) for w in found]


def held_by_run(device):
    """Hold the device's run turn in another thread (as a long batch would) until released."""
    turns, release, holding = device_queue(device).turns, threading.Event(), threading.Event()

    def hold():
        with turns.turn("run"):
            holding.set()
            release.wait(30)

    threading.Thread(target=hold, daemon=True).start()
    assert holding.wait(10)
    return release


def waits_for_the_device(state, start, finished) -> None:
    """`start()` must not finish while a run holds the device, and must finish once it is free."""
    release = held_by_run(state.device)
    start()
    time.sleep(0.5)
    assert not finished(), "background work ran while a run held the device"
    release.set()
    deadline = time.monotonic() + 60
    while not finished() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert finished()


@pytest.mark.slow
def test_compare_takes_turns_with_runs(state):
    tab = state.tabs["Compare"]
    tab.param.update(columns="steps=2 | steps=4")
    waits_for_the_device(state, tab.start, lambda: not tab.running and len(tab.results) == 2
                         and all(r is not None for r in tab.results))


@pytest.mark.slow
def test_sweep_tab_sweeps_take_turns_with_runs(state):
    tab = state.tabs["Sweep"]
    tab.param.update(steps_grid="1,2", samples=2, include_ar=False, strategies=["confidence"])
    waits_for_the_device(state, tab.start_sweep, lambda: tab.main.result is not None and not tab.main.running)


@pytest.mark.slow
def test_browser_training_takes_turns_and_uses_the_queue_precision(state, monkeypatch):
    queue = device_queue(state.device)
    monkeypatch.setattr(queue, "precision", "bf16")
    tab = state.tabs["Model"]
    assert tab.train_config(find_data=False).precision == "bf16"


def test_a_task_reports_progress_result_and_errors_on_its_device(checkpoints):
    task = Task("demo", torch.device("cpu"), dispatch=lambda callback: callback())

    def work(job, report):
        report(1, 2)
        return "ok"

    task.start(work, wait=True)
    assert (task.result, task.progress, task.status, task.running) == ("ok", 100, "done", False)

    def broken(job, report):
        raise RuntimeError("boom")

    task.start(broken, wait=True)
    assert task.error == "demo failed: boom" and not task.running and task.result == "ok"


def held_task():
    """(Task on the CPU that dispatches in place, start(result) -> (job, release)): start() runs work that
    waits for release() and then hands in `result`; it returns once that work has begun."""
    task = Task("demo", torch.device("cpu"), dispatch=lambda callback: callback())

    def start(result):
        started, release = threading.Event(), threading.Event()

        def slow(job, report):
            started.set()
            release.wait(10)
            return result

        job = task.start(slow)
        assert started.wait(10)
        return job, release.set

    return task, start


def test_a_problem_set_while_a_task_runs_outlives_the_run(checkpoints):
    """The Sweep tab starts its sweep when shown; a steps grid typed wrong while it ran ("1,x") set the
    task's error, and the run's end wiped it: the notice never showed (a CI browser test under load)."""
    task, start = held_task()
    job, release = start("swept")
    task.error = "Steps grid: 'x' is not a whole number"  # what SweepTabState._refresh sets meanwhile
    release()
    assert job.done.wait(10)
    assert task.result == "swept" and task.status == "done" and "'x'" in task.error
    task.start(lambda job, report: "again", wait=True)  # a new start clears it
    assert task.error == "" and task.result == "again"


def test_a_closed_task_drops_what_its_work_hands_in_later(checkpoints):
    """A session closes while a task's work is still running (Inspect's validation text, which never
    checks its cancel flag): the late result must not reach the closed session's watchers, which read
    the model the session has already let go of (seen as a thread exception in a loaded full run)."""
    task, start = held_task()
    seen = []
    task.param.watch(lambda event: seen.append(event.new), "result")
    job, release = start("late")
    task.close()
    assert (task.running, task.status) == (False, "closed") and job.cancelled
    release()
    assert job.done.wait(10)
    assert seen == [] and task.result is None


def test_a_late_result_of_a_superseded_job_does_not_replace_a_shown_one(checkpoints):
    """Task.show (a cache hit) and clear() forget the job they cancel: its work may still finish and
    hand in a result, which must not replace the one shown (or cleared) since."""
    task, start = held_task()
    job, release = start("stale")
    task.show("cached", "from cache")
    release()
    assert job.done.wait(10)
    assert (task.result, task.status, task.running) == ("cached", "from cache", False)
    job, release = start("stale")
    task.clear()
    release()
    assert job.done.wait(10)
    assert (task.result, task.status, task.running) == (None, "", False)
