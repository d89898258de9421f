"""The load test's clients (benchmarks/load_test.py) against a served app on a tiny checkpoint:
real Bokeh websocket sessions turn knobs, get results, no errors, and the text each shows for its
identity seed is the solo API run's."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

from tests.support import ROOT
from tests.support.dashboard import LENGTH, save_tiny_checkpoints
from tests.support.serving import serving

_spec = importlib.util.spec_from_file_location("benchmarks_load_test", ROOT / "benchmarks" / "load_test.py")
load_test = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # its dataclass looks itself up
_spec.loader.exec_module(load_test)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The dashboard served in this process on the tiny checkpoint; yields its URL."""
    from explorer.dashboard import create_app

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    torch.set_num_threads(1)
    save_tiny_checkpoints(tmp_path)
    with serving(lambda: create_app(checkpoint="tiny", device="cpu")) as url:
        yield url


@pytest.fixture
def no_auto_sweep(monkeypatch):
    """Sessions made meanwhile start without the quality sweep after each run, as under `serve
    --no-auto-sweep`: for the tests of the client's own reading of one session's page, where the sweep
    (about as much CPU as the rest of such a test) is not the point. The two students above keep it."""
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")


def test_two_sessions_turn_knobs_without_errors_and_match_solo_runs(served, tmp_path):
    opts = load_test.parse_args(["--length", str(LENGTH), "--steps", "8", "--think", "0.2", "--timeout", "30",
                                 "--load-timeout", "60"])
    out = load_test.run_sessions(served, 2, 2.0, opts)  # two seconds of knob changes: several each
    sessions = out["sessions"]
    assert [s.errors for s in sessions] == [[], []]
    assert sum(s.completed for s in sessions) > 0
    assert all(0 < x < 30 for s in sessions for _, x, _ in s.latencies)
    load_test.solo_texts("tiny", tmp_path, sessions)
    assert [s.identity_match for s in sessions] == [True, True]
    assert sessions[0].identity_knobs["seed"] != sessions[1].identity_knobs["seed"]
    row = load_test.summarise(2, 2.0, opts, {**out, "server_tracebacks": [], "server_alive": True, "server_cpu_s": 0.0})
    assert row["errors"] == 0 and row["requests"] == sum(s.completed for s in sessions)


def test_a_round_that_never_got_going_reports_no_cpu_share():
    """Sessions refused at load (a length beyond the checkpoint's) made no changes: the table says n/a for the
    CPU shares, not the round's CPU over a window of a millisecond (it said 858000%)."""
    opts = load_test.parse_args(["--sessions", "2"])
    refused = [load_test.SessionResult(i, errors=["length=64 is beyond the widget's range (at most 24)"])
               for i in range(2)]
    out = {"sessions": refused, "server_tracebacks": [], "server_alive": True, "server_cpu_s": 8.6,
           "client_cpu_s": 4.5, "wall_s": 1e-3, "probe_loaded": 385.0, "probe_start": 386.0, "probe_end": 386.0}
    row = load_test.summarise(2, 20.0, opts, out)
    assert row["requests"] == 0 and row["errors"] == 2
    assert load_test.cell(row, "server_cpu_pct", "{:.0f}%") == "n/a"
    assert load_test.cell(row, "client_cpu_pct", "{:.0f}%") == "n/a"


# A child that holds 200 MB and has used 0.6 s of CPU, then waits to be measured (/proc counts CPU in
# clock ticks: it may say a little less).
CHILD = """import time
held = bytearray(200 * 2**20)
held[::4096] = b"x" * len(held[::4096])  # touch every page: resident, not just reserved
while time.process_time() < 0.6:
    pass
print("ready", flush=True)
time.sleep(60)
"""


def test_rss_and_cpu_of_a_process_tree():
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        rss, cpu = load_test.rss_mb(child.pid), load_test.cpu_seconds(child.pid)
        assert 200 <= rss < 300 and 0.5 <= cpu < 5  # its own memory and CPU time, read from /proc
        assert load_test.rss_mb(os.getpid()) >= rss + 10 and load_test.cpu_seconds(os.getpid()) >= cpu + 0.1
        # ... and the parent's tree counts the child on top of itself (pytest alone: > 10 MB, > 0.1 s)
    finally:
        child.kill()
        child.wait()


def test_a_notice_in_the_page_counts_as_an_error(no_auto_sweep, served):
    """A student's bad input shows a notice: the client counts it (and the run it blocks) as errors."""
    import time

    from bokeh.events import DocumentReady

    opts = load_test.parse_args(["--timeout", "30"])
    load_test.register_client_models()
    clock = load_test.Clock()
    student = load_test.Student(0, served, opts, clock)
    outcome = {}

    async def script():
        student.page = load_test.Page(student.session.document)
        student._watch()
        student.session.document.callbacks.send_event(DocumentReady())
        outcome["load"] = await student._wait_done(0, time.perf_counter(), 60)
        outcome["bad"] = await student._change("template", "AB[___")  # characters the model does not know

    student._script = script
    student.start()
    assert student.finished.wait(90)
    clock.close.set()
    student.join(30)
    assert outcome["load"] is not None and outcome["bad"] is None
    assert len(student.result.errors) == 1 and "notice" in student.result.errors[0]
    assert "does not know" in student.result.errors[0]


def scripted_student(url: str, timeout: float, script) -> tuple:
    """A load-test client on `url` that loads the page (its first run), then runs `script(student)`;
    returns (seconds to the first run, what the script returned, the client's errors)."""
    import time

    from bokeh.events import DocumentReady

    opts = load_test.parse_args(["--timeout", str(timeout)])
    load_test.register_client_models()
    clock = load_test.Clock()
    student = load_test.Student(0, url, opts, clock)
    outcome = {}

    async def main():
        student.page = load_test.Page(student.session.document)
        student._watch()
        student.session.document.callbacks.send_event(DocumentReady())
        outcome["load"] = await student._wait_done(0, time.perf_counter(), 60)
        outcome["script"] = await script(student)

    student._script = main
    student.start()
    assert student.finished.wait(90 + 3 * timeout)
    clock.close.set()
    student.join(30)
    return outcome.get("load"), outcome.get("script"), student.result.errors


SAME_STATUS = "4 steps, 4 model calls (1.0 per call), 1 ms"  # what the header says of every run below


@pytest.fixture
def same_status(monkeypatch):
    """Every run's status, while it runs and when it ends, is one and the same text: the header's text
    never changes from run to run, as when two runs end alike and the second's "sampling …" was
    merged into its end's patch."""
    from explorer.dashboard.tabs.explore.state import run as explore_run

    monkeypatch.setattr(explore_run, "run_summary", lambda traj: SAME_STATUS)
    monkeypatch.setattr(explore_run, "run_status", lambda model, config, frames: SAME_STATUS)


def test_runs_that_end_with_the_same_status_are_each_seen(same_status, no_auto_sweep, served):
    """Each change's run is told by its number in the header, not by a status that differs."""
    async def two_changes(student):
        first = await student._change("seed", 5)
        return first, await student._change("seed", 6), student.page.run()

    load, (first, second, run), errors = scripted_student(served, 10, two_changes)
    assert errors == [] and load is not None and first is not None and second is not None
    assert run == 3  # the first run, then one per change


def test_a_run_whose_end_never_reaches_the_page_is_an_error(same_status, no_auto_sweep, served, monkeypatch):
    """A lost update is still caught: the run starts (the header drops the last run's number) but
    its end is never sent, so no run after the one shown before the change ever finishes."""
    from explorer.dashboard.tabs.explore.state import ExploreState

    real_end = ExploreState._end
    monkeypatch.setattr(ExploreState, "_end", lambda self, job, traj, message:
                        real_end(self, job, traj, message) if self.run_id == 1 else None)

    async def one_change(student):
        return await student._change("seed", 5)

    load, changed, errors = scripted_student(served, 3, one_change)
    assert load is not None and changed is None
    assert errors == ["seed=5: no result after 3 s (status '4 steps, 4 model calls (1.0 per call), 1 ms', "
                      "no finished run shown, waiting for a run after 1)"]


def test_the_solo_reference_reads_the_servers_threads_and_precision(monkeypatch):
    monkeypatch.delenv("MDLM_EXPLORER_PRECISION", raising=False)
    default = load_test.serve_options()
    assert default.threads == 2 and default.precision == "fp32" and not default.no_auto_sweep  # the README's
    served = load_test.serve_options("--threads 1 --no-auto-sweep --precision bf16")
    assert served.threads == 1 and served.precision == "bf16" and served.no_auto_sweep


def test_a_run_of_the_knobs_before_a_change_is_not_its_answer(no_auto_sweep, served, monkeypatch):
    """A lost update whose page still ends runs: the server samples the step count it had before the
    change (its sampler_config reads a stale value), so runs finish after the change, none of them at
    the value set. The client waits for the change's own run and counts the change as never answered,
    apart from runs that never finish."""
    from explorer.dashboard.session import Session

    real = Session.sampler_config
    monkeypatch.setattr(Session, "sampler_config", lambda self: real(self).replace(steps=4))

    async def changes(student):
        first = await student._change("seed", 5)  # answered: its run is at the seed set
        return first, await student._change("steps", 6), student.result.unanswered

    load, (first, steps, unanswered), errors = scripted_student(served, 5, changes)
    assert load is not None and first is not None and steps is None
    assert unanswered == ["steps=6"] and len(errors) == 1
    assert errors[0].startswith("steps=6: never answered: 1 run(s) finished after it within 5 s, none at its value")
