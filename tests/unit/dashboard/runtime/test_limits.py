"""What one session may ask of a served dashboard (explorer/dashboard/runtime/limits.py): model calls per
request, what a link or a change starts by itself, jobs queued per session, result memory per session.
Every limit comes from `serve`'s flags (or their variables), refusals are notices with the estimate
and the limit, and links are read within the sidebar's own bounds."""
from __future__ import annotations

import argparse
import logging
import threading
import time

import numpy as np
import pandas as pd
import pytest
import torch

from explorer.cli import serve
from explorer.dashboard.runtime import limits as limits_module
from explorer.dashboard.runtime.limits import ENV, Limits, SessionShare, run_bytes, table_bytes
from explorer.dashboard.runtime.queue import device_queue
from explorer.dashboard.runtime.tasks import Worker
from explorer.dashboard.session import Session
from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs.sweep import state as sweep_state
from explorer.dashboard.urlstate import UrlState
from tests.support.dashboard import LENGTH, explore, wait_for

GRID = "1,2,4,8,16,24"  # 55 calls per sample on the tiny models' 24 positions
LO, HI = Session.param.steps.bounds  # the sidebar's Steps slider


@pytest.fixture
def limit(monkeypatch):
    """Set serving limits as `serve` hands them to sessions (its variables); the rest stay at their defaults."""
    for variable in ENV.values():  # set, then unset: monkeypatch then removes what a test (serve) sets
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)

    def set_limits(**values):
        for name, value in values.items():
            monkeypatch.setenv(ENV[name], str(value))
    return set_limits


@pytest.fixture
def opened(checkpoints, limit):
    """open(link) -> (session, its UrlState): a session with Explore, Compare and Sweep (their states, as
    a page builds them), a link applied as the app applies it, the tiny model loaded."""
    sessions = []

    def open_(link: dict | None = None):
        s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
        for name in ("Compare", "Sweep"):
            build_tab(name, s, lazy=True)
        url = UrlState(s, list(s.tabs))
        url.apply(link or {})
        s.load_hooks.append(url.hook)
        s.load(wait=True)
        assert s.model is not None
        sessions.append(s)
        return s, url
    yield open_
    for s in sessions:
        s.close()


# ---------------------------------------------------------------------------- the limits and serve's flags

def test_the_limits_come_from_the_serve_flags_or_their_variables(limit, monkeypatch, caplog):
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    help_text = parser.format_help()
    for flag in limits_module.FLAGS.values():
        assert flag in help_text  # shown in --help, with its default
    args = parser.parse_args(["--max-calls-per-request", "500", "--auto-start-seconds", "2.5"])
    args.precision = "fp32"
    monkeypatch.setenv("MDLM_EXPLORER_PRECISION", "fp32")
    limit(jobs_per_session=3)  # set as `panel serve` users do: kept where no flag is given
    serve.session_defaults(args)
    assert Limits.from_env() == Limits(calls_per_request=500, auto_start_seconds=2.5, jobs_per_session=3,
                                       result_mb=Limits().result_mb)
    assert SessionShare().limits == Limits.from_env()  # what every new session reads
    for bad in (["--max-jobs-per-session", "0"], ["--max-result-mb", "lots"], ["--auto-start-seconds", "inf"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
    limit(calls_per_request="many")  # a typo in a variable: logged, the default kept, the class goes on
    with caplog.at_level(logging.WARNING):
        assert Limits.from_env().calls_per_request == Limits().calls_per_request
    assert "MDLM_EXPLORER_MAX_CALLS='many'" in caplog.text


# ---------------------------------------------------------------------------- one bound: the sidebar's

def test_a_compare_link_beyond_the_steps_slider_is_refused_like_the_slider(opened):
    bound = f"outside the range {LO} to {HI}"
    s, url = opened({"tab": "Compare", "compare.columns": "steps=4096 | steps=8", "steps": "4096"})
    compare = s.tabs["Compare"]
    assert f"compare.columns=steps=4096 | steps=8 (column 1: steps=4096: 4096 is {bound}" in url.notice
    assert f"steps=4096 (4096 is {bound})" in url.notice  # the same bound as the sidebar's own knob
    assert compare.columns == "strategy=confidence | strategy=random"  # the default kept
    assert not compare.set_column(0, f"steps={HI + 1}") and bound in compare.error
    assert compare.set_column(0, f"steps={HI}") and compare.error == ""  # the slider's top is fine
    assert not compare.set_column(0, "temperature=5") and "outside the range 0.0 to 2.0" in compare.error


def test_a_sweep_link_beyond_the_sidebar_is_refused(opened):
    s, url = opened({"tab": "Sweep", "sweep.steps_grid": "1,4096", "sweep.temperatures": "0.5,5"})
    assert f"sweep.steps_grid=1,4096 (Steps grid: 4096 is outside the range {LO} to {HI}" in url.notice
    assert "sweep.temperatures=0.5,5 (Temperatures: 5.0 is outside the range 0.0 to 2.0" in url.notice
    sweep = s.tabs["Sweep"]
    assert (sweep.steps_grid, sweep.temperatures) == ("1,2,4,8,16,32", "1.0")
    sweep.temp_steps = HI
    with pytest.raises(ValueError):
        sweep.temp_steps = HI + 1  # the temperature comparison's steps: the sidebar's bounds too


# ---------------------------------------------------------------------------- links start only small work

def test_a_large_sweep_link_waits_for_run_and_shows_its_estimate(opened, limit):
    limit(auto_start_seconds=0.1)  # below any 100-call sweep (each call costs at least 1.5 ms)
    s, _ = opened({"tab": "Sweep", "sweep.steps_grid": GRID, "sweep.samples": "64"})
    sweep = s.tabs["Sweep"]
    sweep.on_shown()  # what opening the tab does (app.watch_shown)
    work = (1 + 2 + 4 + 8 + 16 + 24) * 2 * 64 + LENGTH * 64  # 2 strategies, 64 samples each, and the AR baseline's
    assert not sweep.main.running and sweep.main.result is None and sweep.main.worker.current is None
    assert f"not started by itself: ≈ {work:,} model calls" in sweep.main.estimate
    assert "over the 0.1 s a link or a change starts alone" in sweep.main.estimate
    assert sweep.main.estimate.endswith("press Run")
    sweep.main.run = True  # the click starts it
    assert sweep.main.running and sweep.main.worker.current is not None
    sweep.main.stop = True
    small, _ = opened({"tab": "Sweep", "sweep.steps_grid": "1,2", "sweep.samples": "1", "sweep.include_ar": "false"})
    small.tabs["Sweep"].on_shown()  # a small link starts by itself, as before
    wait_for(lambda: small.tabs["Sweep"].main.status.startswith("done"), message=small.tabs["Sweep"].main.status)


@pytest.mark.slow
def test_a_large_compare_link_waits_for_run(opened, limit):
    limit(auto_start_seconds=0.1)
    columns = " | ".join([f"steps={LENGTH}"] * 5)
    s, url = opened({"tab": "Compare", "compare.columns": columns})
    compare = s.tabs["Compare"]
    assert url.notice == "" and compare.columns == columns
    compare.on_shown()
    assert not compare.running and compare.results == []
    assert f"≈ {5 * LENGTH:,} model calls" in compare.error and "press Run" in compare.error
    from explorer.dashboard.tabs import spec

    view = spec("Compare").make_view(compare)  # its notice: waiting for Run is not a failure
    assert view.notice.visible and view.notice.alert_type == "info"
    compare.run = True
    assert compare.running or compare.results
    compare.error = "a column failed"  # a failure is still said as one
    wait_for(lambda: view.notice.alert_type == "danger" and view.notice.object == "a column failed")


def test_the_quality_sweep_a_link_or_a_knob_asks_for_waits_for_compute(opened, limit):
    limit(auto_start_seconds=0.01)  # the tiny model's 64 samples share their batched calls: under a second
    s, _ = opened()
    e = explore(s)
    e.sweep_auto = True
    e.sweep_samples = 64  # as `?sweep_samples=64` sets it
    assert not e.quality.running and e.quality.result is None
    assert "not started by itself" in e.quality.status and "press Compute" in e.quality.status
    e.compute_sweep = True
    assert e.quality.running
    e.stop_sweep = True


# ---------------------------------------------------------------------------- model calls per request

def test_a_request_over_the_calls_limit_is_refused_with_its_estimate(opened, limit):
    limit(calls_per_request=100)
    s, _ = opened()
    sweep, compare, e = s.tabs["Sweep"], s.tabs["Compare"], explore(s)
    sweep.param.update(steps_grid=GRID, samples=4)
    expected = f"this sweep needs ≈ {55 * 2 * 4 + LENGTH * 4:,} model calls (counted per sample); this server " \
               "allows 100 per request (--max-calls-per-request)"
    assert sweep.main.error.startswith(expected)  # said as the knobs change, before any click
    assert not sweep.start_sweep() and sweep.main.error.startswith(expected) and sweep.main.worker.current is None
    assert not compare.set_columns(" | ".join([f"steps={LENGTH}"] * 5)) or not compare.start()
    assert f"this comparison needs ≈ {5 * LENGTH} model calls" in compare.error and compare.results == []
    assert compare.set_columns("steps=8 | steps=8") and compare.start(wait=True) and compare.error == ""
    s.steps = 8
    e.param.update(samples=8, prompts="A | B")  # 2 prompts x 8 seeds
    assert not e.sample_several() and "16 samples needs ≈ 128 model calls" in e.samples_notice
    e.param.update(samples=4, prompts="")
    assert e.sample_several(wait=True)
    wait_for(lambda: e.samples_task.result is not None)
    assert len(e.samples_task.result["rows"]) == 4
    e.param.update(sweep_strategies=["confidence", "random"], sweep_samples=2)
    assert not e.start_sweep() and "this quality sweep needs ≈ 172 model calls" in e.quality.error


def test_a_huge_grid_is_refused_before_its_cells_are_built(opened, limit, monkeypatch):
    built = []
    monkeypatch.setattr(sweep_state, "sweep_cells", lambda *a: built.append(a) or [])
    s, _ = opened()
    sweep = s.tabs["Sweep"]
    temps = ",".join(f"{t / 1000:g}" for t in range(1, 2001))  # 2,000 temperatures, each within the sidebar's
    built.clear()  # (the other sections' plans, made as the model loaded)
    sweep.param.update(steps_grid=GRID, temperatures=temps, samples=4)
    assert f"needs ≈ {55 * 2 * 2000 * 4 + LENGTH * 4:,} model calls" in sweep.main.error and not built


# ---------------------------------------------------------------------------- queued work per session

def test_a_session_cannot_queue_more_than_its_share(opened, limit):
    limit(jobs_per_session=2)
    s, _ = opened()
    other, _ = opened()
    sweep, compare = s.tabs["Sweep"], s.tabs["Compare"]
    sweep.param.update(steps_grid="1,2", samples=1, include_ar=False)
    queue = device_queue(s.device)
    with queue.turns.turn("background"):  # the device is busy: what the session starts stays queued
        assert sweep.start_sweep() and compare.start()
        assert not explore(s).start_run()
        assert "already has 2 runs or sweeps queued or running (compare, sweep); this server allows 2" in s.error
        assert compare.start() and compare.error == ""  # a tab's new request replaces its own: still 2
        assert explore(other).start_run() and other.error == ""  # another session has its own share
        compare.stop_run()
        assert explore(s).start_run() and s.error == ""
        assert not compare.start() and "this server allows 2 at once (--max-jobs-per-session)" in compare.task.error
        jobs = [sweep.main.worker.current, explore(s)._runs.current, explore(other)._runs.current]
    for job in jobs:
        assert job.done.wait(60)
    assert compare.start(wait=True) and compare.task.error == ""


@pytest.mark.slow
@pytest.mark.parametrize("same_session", [True, False])
def test_a_sessions_background_work_runs_one_task_at_a_time(same_session):
    """Each task lends the device between its chunks (job.cancelled); another session's task takes those
    turns, but the same session's waits: a session holds one sweep's working memory, not one per tab."""
    shares = [SessionShare(Limits())] * 2 if same_session else [SessionShare(Limits()), SessionShare(Limits())]
    lock, active, peak = threading.Lock(), [0], [0]

    def work(job):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        deadline = time.monotonic() + 0.4
        while time.monotonic() < deadline:
            job.cancelled  # noqa: B018  where a task lends the device to waiting work
            time.sleep(0.005)
        with lock:
            active[0] -= 1

    first = Worker("first", torch.device("cpu"), shares[0]).submit(work)
    time.sleep(0.05)
    second = Worker("second", torch.device("cpu"), shares[1]).submit(work)
    assert first.done.wait(10) and second.done.wait(10)
    assert peak[0] == (1 if same_session else 2)


# ---------------------------------------------------------------------------- result memory per session

def test_result_memory_per_session_is_bounded(opened, limit):
    limit(result_mb=1)
    s, _ = opened()
    sweep, compare = s.tabs["Sweep"], s.tabs["Compare"]
    sweep.param.update(steps_grid=GRID + ",3,5", samples=64)  # 1,024 samples and the AR baseline's 64
    assert not sweep.start_sweep()
    assert sweep.main.error.startswith(f"this sweep would keep ≈ {table_bytes(1088, LENGTH) / 2**20:.1f} MB of "
                                       "results; this server keeps at most 1 MB per session (--max-result-mb)")
    assert compare.set_columns(" | ".join([f"steps={LENGTH}"] * 5)) and compare.start(wait=True)
    assert s.share.held_bytes() == 5 * run_bytes(LENGTH + 1, LENGTH)
    sweep.param.update(steps_grid="1,2,4,8,16", samples=64)  # 704 samples: under 1 MB alone, not with Compare's
    assert not sweep.start_sweep() and "this session's other results hold ≈ 0.4 MB" in sweep.main.error
    s.load("tiny-training", wait=True)  # a model change clears the comparison: its memory is free again
    assert s.share.held_bytes() == 0
    assert sweep.start_sweep() and sweep.main.error == ""
    sweep.main.stop = True


def nbytes(obj) -> int:
    """Bytes of the numpy arrays an object holds (in attributes, or lists of them)."""
    total = 0
    for value in vars(obj).values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, np.ndarray):
                total += item.nbytes
    return total


@pytest.mark.slow
def test_the_result_estimates_bound_real_results(opened):
    s, _ = opened()
    sweep, compare = s.tabs["Sweep"], s.tabs["Compare"]
    sweep.param.update(steps_grid="1,4", samples=3)
    assert sweep.start_sweep(wait=True), sweep.main.error
    table, summary = sweep.main.result
    kept = table.memory_usage(deep=True).sum() + summary.memory_usage(deep=True).sum()
    assert kept <= table_bytes(len(table), LENGTH) == s.share.held_bytes()
    assert compare.set_columns(f"steps={LENGTH} | strategy=random, steps=5") and compare.start(wait=True)
    for r in compare.results:
        rows = r["traj"].tokens.shape[0]
        assert nbytes(r["traj"]) + nbytes(r["frames"]) <= run_bytes(rows, LENGTH)


def test_dashboard_sweeps_keep_a_bounded_number_of_rows_under_way(opened, monkeypatch):
    """Their working memory (limits.SWEEP_ROWS_IN_FLIGHT): the Sweep tab's and Explore's quality sweep hand
    sample_many the bound, and the bounded sweep's samples are the unbounded one's."""
    from explorer import experiments

    seen, real = [], experiments.sample_many

    def spy(model, runs, **kwargs):
        seen.append(kwargs.get("tokens_in_flight"))
        return real(model, runs, **kwargs)
    monkeypatch.setattr(experiments, "sample_many", spy)
    s, _ = opened()
    sweep, e = s.tabs["Sweep"], explore(s)
    sweep.param.update(steps_grid="1,4", samples=3, include_ar=False)
    assert sweep.start_sweep(wait=True), sweep.main.error
    e.param.update(sweep_strategies=["confidence"], sweep_samples=1)
    assert e.start_sweep(wait=True), e.quality.error
    assert seen == [limits_module.SWEEP_ROWS_IN_FLIGHT * LENGTH] * 2
    plan = sweep.sweep_plan()
    unbounded, _ = experiments.sweep(plan.model, plan.base, plan.cells, plan.n_samples, plan.base.seed,
                                     length=plan.length)
    timing = ["seconds", "solo_seconds", "tokens_per_s", "ms_per_sample"]
    pd.testing.assert_frame_equal(sweep.main.result[0].drop(columns=timing), unbounded.drop(columns=timing))
