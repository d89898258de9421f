"""Serving a class: a login in front of the app, a health endpoint that answers while the model is busy,
sessions that share one model and keep their own knobs, a session's memory freed when its tab closes.
Real servers on free ports; only the processes a test starts are stopped, by their handles. (`serve`'s
checks and the defaults it gives sessions: tests/unit/cli/test_serve.py.)"""
from __future__ import annotations

import contextlib
import functools
import http.cookiejar
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import torch

from explorer.dashboard.session import Session
from tests.support import ROOT
from tests.support.dashboard import explore, save_tiny_checkpoints, wait_for
from tests.support.serving import check_page, free_port, get, serve_options, stop_server

PASSWORD = "lecture-7-password"


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    torch.set_num_threads(1)  # tiny models; and the machine's cores are shared
    return save_tiny_checkpoints(d)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # let the test see the 302 itself


def opener(*handlers):
    return urllib.request.build_opener(*handlers)


def fetch(client, url, data=None) -> tuple[int, str, dict]:
    """(status, body, headers) without raising for 3xx/4xx."""
    try:
        with client.open(url, data=data, timeout=30) as r:
            return r.status, r.read().decode("utf-8", "replace"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace"), dict(e.headers)


def serve_cli(port: int, *extra: str) -> subprocess.Popen:
    """`python run.py serve` in a subprocess (the command the README gives a lab)."""
    cmd = [sys.executable, "run.py", "serve", "--no-show", "--port", str(port), "--checkpoint", "tiny",
           "--device", "cpu", "--threads", "1", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def served_cli(port: int, *argv: str):
    """`python run.py serve ARGV` on `port` in a subprocess, stopped afterwards."""
    proc = serve_cli(port, *argv)
    try:
        yield
    finally:
        stop(proc)


@contextlib.contextmanager
def served_here(monkeypatch, port: int, *argv: str):
    """What `python run.py serve --checkpoint tiny --device cpu ARGV` serves, in this process on `port`: its
    checks and pn.serve options (serve_options: check_args, server_options) and its app (served_args)."""
    import panel as pn

    from explorer.dashboard.app import create_app, served_args

    monkeypatch.setattr(pn.config, "nthreads", pn.config.nthreads)  # --num-threads sets it for the process
    opts = serve_options(monkeypatch, "--checkpoint", "tiny", "--device", "cpu", *argv)
    server = pn.serve({"/": lambda: create_app(**served_args("tiny", "cpu"))}, port=port, address="localhost",
                      show=False, threaded=True, start=True, **opts)
    try:
        yield
    finally:
        stop_server(server)


@pytest.mark.parametrize("auth", ["password", "users-file"])
def test_basic_auth_refuses_strangers_and_lets_a_login_in(checkpoints, tmp_path, monkeypatch, auth):
    """The shared password through the command itself (`python run.py serve`, a process of its own); the
    users file (and no --cookie-secret: the CLI makes a random one) served in this process with the
    options the command gives pn.serve, the same code but for the command's process and imports."""
    access = ["--basic-auth", PASSWORD, "--cookie-secret", "a-long-random-cookie-secret"]
    server = served_cli
    if auth == "users-file":
        users = tmp_path / "users.json"
        users.write_text(json.dumps({"alice": PASSWORD, "bob": "other"}))
        access = ["--basic-auth", str(users)]
        server = functools.partial(served_here, monkeypatch)
    port = free_port()
    base = f"http://localhost:{port}"
    with server(port, *access, "--liveness", "--num-threads", "2", "--allow-websocket-origin", f"localhost:{port}"):
        assert get(f"{base}/liveness")[0] == 200  # answers without a login (for a watchdog), once up
        status, body, headers = fetch(opener(_NoRedirect), f"{base}/")
        assert status == 302 and "login?next=" in headers["Location"]  # refused: sent to log in
        status, body, _ = fetch(opener(), f"{base}/")  # followed, as a browser would
        assert status == 200 and 'name="password"' in body and "<title>mdlm-explorer</title>" not in body
        jar = http.cookiejar.CookieJar()
        client = opener(urllib.request.HTTPCookieProcessor(jar))
        fetch(client, f"{base}/login?next=%2F")
        wrong = urllib.parse.urlencode({"username": "alice", "password": "guess"}).encode()
        status, body, _ = fetch(client, f"{base}/login", wrong)
        assert "Invalid username or password" in body and "<title>mdlm-explorer</title>" not in body
        right = urllib.parse.urlencode({"username": "alice", "password": PASSWORD}).encode()
        status, body, _ = fetch(client, f"{base}/login", right)  # the login form's POST, then its redirect
        check_page(status, body)
        check_page(*fetch(client, f"{base}/")[:2])  # the signed cookie keeps the login


# ---------------------------------------------------------------------------------- in process


@pytest.fixture
def serve_app(checkpoints, monkeypatch):
    """Serves the app in this process, as `python run.py serve --liveness --no-auto-sweep`; returns its URL
    and the states of the sessions it makes. `lifetime_s`: how long Bokeh keeps a session no browser has
    connected to (these tests connect none: they make sessions by page requests). The quality sweep
    after each run (as much CPU as a test's runs) is not what these tests are about."""
    import panel as pn

    from explorer.dashboard.app import create_app

    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    servers, states = [], []

    def app():
        template = create_app(checkpoint="tiny", device="cpu")
        states.append(template.explorer_state)
        return template

    def start(lifetime_s: float = 120.0):
        port = free_port()
        servers.append(pn.serve({"/": app}, port=port, address="localhost", show=False, threaded=True, start=True,
                                liveness=True, check_unused_sessions_milliseconds=200,
                                unused_session_lifetime_milliseconds=int(lifetime_s * 1000)))
        return f"http://localhost:{port}/", states

    yield start
    for server in servers:
        server.stop()
    for s in states:
        s.close()


def session_of_page(url, states) -> Session:
    """A page request makes a session; load its model as the browser's onload would."""
    check_page(*get(url))
    state = states[-1]
    state.load(wait=True)
    wait_for(lambda: explore(state).trajectory is not None)  # loaded, then its auto-run finished
    return state


def test_liveness_answers_while_sampling(serve_app):
    url, states = serve_app()
    state = session_of_page(url, states)
    state.dispatch(lambda: state.param.update(steps=24, seed=1))  # rows stream back to the server loop
    stop, runs = threading.Event(), []

    def keep_sampling():  # back-to-back runs in the session, as a student clicking "New seed"
        while not stop.is_set():
            before = explore(state).trajectory
            state.dispatch(explore(state).roll_seed)
            # `is`, not `in`: dataclass == compares arrays; None while it runs
            wait_for(lambda: (explore(state).trajectory is not before and explore(state).trajectory is not None) or stop.is_set())
            runs.append(explore(state).trajectory)

    driver = threading.Thread(target=keep_sampling, daemon=True)
    driver.start()
    latencies, busy = [], 0
    deadline = time.monotonic() + 60
    try:  # at least 15 probes, and on until two runs have ended (a loaded machine samples slower)
        while len(latencies) < 15 or (len(runs) < 2 and time.monotonic() < deadline):
            busy += explore(state).running
            t0 = time.monotonic()
            status, body = get(url + "liveness", timeout=5)
            latencies.append(time.monotonic() - t0)
            assert status == 200 and json.loads(body) == {"/liveness": True}
            time.sleep(0.05)
    finally:
        stop.set()
        driver.join(30)
    assert len(runs) >= 2 and busy >= 1, (len(runs), busy)  # the model really was busy meanwhile
    assert max(latencies) < 2.0, latencies


def test_sessions_share_one_model_and_keep_their_own_knobs(serve_app):
    url, states = serve_app()
    a, b = session_of_page(url, states), session_of_page(url, states)
    assert a is not b and a.model is b.model  # loaded once, for every session of the process
    a.dispatch(lambda: a.param.update(seed=11, steps=3))
    wait_for(lambda: explore(a).trajectory is not None and explore(a).trajectory.config.seed == 11)  # None while it runs
    assert b.seed == 0 and explore(b).trajectory.config.seed == 0 and explore(b).trajectory.config.steps == 32


def test_closing_the_tab_releases_the_session(serve_app, monkeypatch):
    """Bokeh destroys a session whose browser has gone (here: never connected, so after a short
    unused lifetime); on_session_destroyed then calls state.close()."""
    url, states = serve_app(lifetime_s=3.0)
    closed = []
    real_close = Session.close
    # noted once close() has returned: noted first, the check below raced the close (seen under load)
    monkeypatch.setattr(Session, "close", lambda self: (real_close(self), closed.append(self)))
    state = session_of_page(url, states)
    wait_for(lambda: state in closed, timeout=20)
    assert state.model is None and explore(state).frames is None  # its rows freed; the model stays in the cache
