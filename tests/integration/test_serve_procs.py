"""`python run.py serve --num-procs N`: the server forks N processes after binding its port;
each answers pages and runs samples through a device queue of its own (made after the fork, its worker
thread in that process), sessions of a process share its model, and stopping the server stops them all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.dashboard import save_tiny_checkpoints
from tests.support.serving import check_page, free_port, get

# The real `run.py serve` entry, with each session reporting from inside its server process: its pid,
# its process's device queue and the queue's worker thread, once the session's first run is done.
PROBE = textwrap.dedent('''
    import json, os, sys, threading, time
    from explorer.cli import main
    from explorer.dashboard import app
    from explorer.dashboard.runtime.queue import device_queue  # the queues the sessions' state runs on

    real, report_path = app.create_app, sys.argv.pop(1)

    def report(state):
        state.load(wait=True)
        deadline = time.monotonic() + 60
        while state.tabs["Explore"].trajectory is None and time.monotonic() < deadline:
            time.sleep(0.05)
        queue = device_queue(state.device)
        thread = queue._thread
        line = {"pid": os.getpid(), "ppid": os.getppid(), "ran": state.tabs["Explore"].trajectory is not None,
                "queue": id(queue), "requests": queue.stats.requests, "model": id(state.model),
                "worker_tid": thread.native_id if thread else None,
                "worker_here": bool(thread) and os.path.isdir(f"/proc/self/task/{thread.native_id}")}
        with open(report_path, "a") as f:
            f.write(json.dumps(line) + "\\n")

    def probed(**kwargs):
        template = real(**kwargs)
        threading.Thread(target=report, args=(template.explorer_state,), daemon=True).start()
        return template

    app.create_app = probed
    sys.exit(main(sys.argv[1:]))
''')


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    return save_tiny_checkpoints(d)


def reports(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").glob("*") for c in (task / "children").read_text().split()]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"  # a zombie has stopped
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; fork-based serving")
def test_two_processes_each_serve_sessions_with_their_own_queue(checkpoints, tmp_path):
    probe, out = tmp_path / "probe.py", tmp_path / "sessions.jsonl"
    probe.write_text(PROBE)
    port = free_port()
    cmd = [sys.executable, str(probe), str(out), "serve", "--no-show", "--port", str(port), "--num-procs", "2",
           "--checkpoint", "tiny", "--device", "cpu", "--threads", "1", "--no-auto-sweep", "--liveness"]
    log = open(tmp_path / "server.log", "w")
    # PYTHONPATH: the probe script lies outside the repository, and must import this working tree's package
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log)
    url, pages, forked = f"http://localhost:{port}/", [], []
    try:
        try:
            assert get(url + "liveness")[0] == 200
        except OSError:  # it never answered: say why, from its own log
            raise AssertionError(f"the server did not come up:\n{(tmp_path / 'server.log').read_text()[-3000:]}")
        for _ in range(8):  # pairs of page requests at once, until both processes have made sessions
            pair = [threading.Thread(target=lambda: pages.append(get(url))) for _ in range(2)]
            for t in pair:
                t.start()
            for t in pair:
                t.join(60)
            deadline = time.monotonic() + 60
            while len(reports(out)) < len(pages) and time.monotonic() < deadline:
                time.sleep(0.1)
            if len({r["pid"] for r in reports(out)}) == 2:
                break
        forked = children(proc.pid)
        proc.terminate()  # SIGTERM to the parent alone, as `kill` or a service manager sends
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in forked) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(forked) == 2 and not any(alive(pid) for pid in forked), "a server process outlived the server"
    finally:
        for pid in [proc.pid, *forked]:  # this test's own processes only, by pid, if still there
            if alive(pid):
                os.kill(pid, 9)
        log.close()
    err = (tmp_path / "server.log").read_text()
    for page in pages:
        check_page(*page)
    got = reports(out)
    assert len(got) == len(pages) >= 2, err[-3000:]
    by_pid = {}
    for r in got:
        by_pid.setdefault(r["pid"], []).append(r)
    assert len(by_pid) == 2 and proc.pid not in by_pid, got  # two forked server processes answered
    for pid, rs in by_pid.items():
        assert all(r["ppid"] == proc.pid and r["ran"] and r["worker_here"] for r in rs), rs
        assert len({r["queue"] for r in rs}) == 1 and len({r["model"] for r in rs}) == 1  # one per process
    assert sorted(by_pid) == sorted(forked) and all(r["requests"] >= 1 for r in got)
