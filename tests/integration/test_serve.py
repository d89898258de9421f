"""Serving a class (issue 7): a login in front of the app, a health endpoint that answers while the
model is busy, one model per process shared by every session, a session's memory freed when its tab
closes. Real servers on free ports; only the processes a test starts are stopped, by their handles."""
from __future__ import annotations

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
from explorer.dashboard.tabs.explore import open_session
from tests.dashboard_support import explore, wait_for, save_tiny_checkpoints
from tests.test_dashboard_served import ROOT, check_page, free_port, get

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


@pytest.mark.parametrize("auth", ["password", "users-file"])
def test_basic_auth_refuses_strangers_and_lets_a_login_in(checkpoints, tmp_path, auth):
    access = ["--basic-auth", PASSWORD, "--cookie-secret", "a-long-random-cookie-secret"]
    if auth == "users-file":  # and no --cookie-secret: the CLI makes a random one
        users = tmp_path / "users.json"
        users.write_text(json.dumps({"alice": PASSWORD, "bob": "other"}))
        access = ["--basic-auth", str(users)]
    port = free_port()
    base = f"http://localhost:{port}"
    proc = serve_cli(port, *access, "--liveness", "--num-threads", "2", "--allow-websocket-origin", f"localhost:{port}")
    try:
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
    finally:
        stop(proc)


@pytest.mark.parametrize("argv, needle", [
    (["--basic-auth", ""], "--basic-auth is empty"),
    (["--basic-auth", "missing-users.json"], "--basic-auth: no file 'missing-users.json'"),
    (["--basic-auth", "{users}"], "must hold a JSON object of user names"),
    (["--cookie-secret", " "], "--cookie-secret is empty"),
    (["--num-threads", "-2"], "--num-threads must be >= 0, got -2"),
    (["--allow-training", "--user-checkpoints", "0"], "argument --user-checkpoints: expected an integer"),
    (["--checkpoint", "../tiny"], "no checkpoint named '../tiny' in checkpoints/"),
])
def test_serve_refuses_bad_arguments_before_starting(checkpoints, tmp_path, capsys, argv, needle):
    from explorer.cli import main

    users = tmp_path / "users.json"
    users.write_text('["alice", "secret"]')
    argv = [a.format(users=users) for a in argv]
    assert main(["serve", "--no-show", "--port", "0", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]


# ---------------------------------------------------------------------------------- in process


@pytest.fixture
def serve_app(checkpoints):
    """Serves the app in this process, as `python run.py serve --liveness`; returns its URL and the
    states of the sessions it makes. `lifetime_s`: how long Bokeh keeps a session no browser has
    connected to (these tests connect none: they make sessions by page requests)."""
    import panel as pn

    from explorer.dashboard.app import create_app

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


def test_model_cache_is_one_per_process_and_thread_safe(checkpoints):
    from explorer.dashboard.runtime import checkpoints

    got, threads = [], [threading.Thread(target=lambda: got.append(checkpoints.load("tiny", torch.device("cpu"))))
                         for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 4 and all(m is got[0] for m in got)  # four sessions loading at once: one model
    s1 = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    s2 = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    s1.load(wait=True)
    s2.load(wait=True)
    assert s1.model is s2.model is got[0]


# ---------------------------------------------------------------------------------- class defaults

@pytest.fixture
def fresh_defaults(monkeypatch):
    """The environment a served session reads its defaults from, restored after the test, and no
    device queue yet (the precision is read when the first one is made)."""
    from explorer.dashboard.runtime import queue as jobs

    for name in ("MDLM_EXPLORER_AUTO_SWEEP", "MDLM_EXPLORER_PRECISION"):
        # setenv first: monkeypatch then remembers the variable's original state, so what `serve`
        # writes into os.environ during the test is undone (delenv of a missing one records nothing)
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(jobs, "_QUEUES", {})


def serve_args(*argv):
    import argparse

    from explorer.cli import serve

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args(["--no-show", "--port", "0", *argv])
    serve.check_args(args)
    serve.session_defaults(args)
    return args


def test_no_auto_sweep_and_bf16_are_every_new_sessions_defaults(checkpoints, fresh_defaults):
    from explorer.dashboard.ui.header import HeaderView

    args = serve_args("--no-auto-sweep", "--precision", "bf16")
    assert args.precision == "bf16"
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    try:
        assert explore(s).sweep_auto is False and "bf16 autocast" in s.device_name
        s.load(wait=True)
        header = HeaderView(state=s).pane.object
        assert "device <b>cpu, bf16 autocast</b>" in header
        s.steps = 4
        explore(s).param.update(sweep_samples=1, sweep_strategies=["confidence"])
        assert explore(s).start_run(wait=True) and explore(s).trajectory is not None
        time.sleep(0.2)
        assert explore(s).quality.result is None and not explore(s).quality.running  # no sweep after the run ...
        assert explore(s).start_sweep(wait=True) and explore(s).quality.result is not None  # ... but Compute still works
        assert explore(open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=True)).sweep_auto
    finally:
        s.close()


def test_the_defaults_stay_fp32_with_auto_sweeps(checkpoints, fresh_defaults):
    args = serve_args()
    assert args.precision == "fp32" and not args.no_auto_sweep
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    assert explore(s).sweep_auto is True and s.device_name == "cpu"


def test_the_environment_sets_the_same_defaults(checkpoints, fresh_defaults, monkeypatch):
    """Under `panel serve explorer/dashboard/app.py` the environment is the only way in."""
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    monkeypatch.setenv("MDLM_EXPLORER_PRECISION", "bf16")
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False)
    assert explore(s).sweep_auto is False and "bf16" in s.device_name
    assert serve_args().precision == "bf16"


def test_serve_refuses_a_bad_precision_in_the_environment(checkpoints, fresh_defaults, monkeypatch, capsys):
    from explorer.cli import main

    monkeypatch.setenv("MDLM_EXPLORER_PRECISION", "fp16")
    assert main(["serve", "--no-show", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: MDLM_EXPLORER_PRECISION must be one of auto, fp32, bf16, got 'fp16'"]


def test_a_server_leaves_a_core_for_the_browser_unless_told(monkeypatch):
    """Issue 15, item 3: `serve` without --threads runs torch on one fewer thread than the cores (a
    2-core laptop also runs the browser); --threads N is taken as given."""
    import torch

    from explorer.cli.serve import main as serve_main
    from explorer.devices import serving_threads

    assert [serving_threads(n) for n in (1, 2, 4, 16)] == [1, 1, 3, 15]
    assert serving_threads() >= 1
    seen = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    monkeypatch.setattr("explorer.cli.serve.session_defaults", lambda args: (_ for _ in ()).throw(SystemExit(0)))
    from explorer.cli import build_parser

    for argv, expected in ((["serve"], serving_threads()), (["serve", "--threads", "3"], 3)):
        args = build_parser().parse_args(argv)
        with pytest.raises(SystemExit):
            serve_main(args)
        assert seen[-1] == expected


def test_patches_queued_while_an_earlier_batch_finishes_are_still_sent():
    """Panel's write queue (ui/internals.mend_panel_write_queue): a sending task that finishes drops its
    document's write flag even when another batch was queued meanwhile, and that batch's task then
    returned without sending it. Seen under load as a page that kept "sampling …" after its run had
    ended. Here the queue is left in that state, and the batch must still go out, in order."""
    import asyncio

    from bokeh.document import Document
    from panel.io import document as panel_document

    from explorer.dashboard.ui.internals import mend_panel_write_queue

    mend_panel_write_queue()
    sent = []

    class Socket:  # a socket type Panel hands to a registered writer
        pass

    class Connection:
        _socket = Socket()

    panel_document.extra_socket_handlers[Socket] = lambda conn, msg=None: sent.append(msg) or []
    doc = Document()

    async def stranded():
        panel_document._WRITE_MSGS[doc] = {Connection(): ["first", "second"]}  # queued, flag dropped
        await panel_document._dispatch_msgs(doc)
        for _ in range(50):
            if sent:
                break
            await asyncio.sleep(0.01)

    try:
        asyncio.run(stranded())
    finally:
        del panel_document.extra_socket_handlers[Socket]
        panel_document._WRITE_MSGS.pop(doc, None)
        panel_document._WRITE_BLOCK.pop(doc, None)
    assert sent == ["first", "second"]
