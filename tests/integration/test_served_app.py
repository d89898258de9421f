"""The dashboard served for real (in-process and by `panel serve`), and its CLI, without a browser."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from tests.dashboard_support import explore, serving



ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 60.0) -> tuple[int, str]:
    """GET with retries until the server answers (it may still be starting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def check_page(status: int, page: str) -> None:
    assert status == 200
    assert "<title>mdlm-explorer</title>" in page
    assert "static/js/bokeh" in page  # assets come from this server...
    assert "googleapis" not in page and "cdn.bokeh.org" not in page  # ...never from the network


def test_served_in_process_on_a_free_port(checkpoints):
    from explorer.dashboard import create_app

    with serving(lambda: create_app(checkpoint="tiny", device="cpu")) as url:
        check_page(*get(url))


def test_panel_serve_runs_the_app_file(checkpoints):
    port = free_port()
    env = {**os.environ, "MDLM_EXPLORER_CHECKPOINT": "tiny", "MDLM_EXPLORER_DEVICE": "cpu"}
    proc = subprocess.Popen([sys.executable, "-m", "panel", "serve", "explorer/dashboard/app.py", "--port",
                             str(port), "--address", "localhost"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        check_page(*get(f"http://localhost:{port}/app"))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_create_app_outside_a_server_loads_in_the_background(checkpoints):
    from explorer.dashboard import create_app

    template = create_app(checkpoint="tiny", device="cpu")
    state = template.explorer_state
    try:
        deadline = time.monotonic() + 120
        while explore(state).trajectory is None and not state.error and time.monotonic() < deadline:
            time.sleep(0.05)  # loading, then the auto-run, on worker threads
        import panel as pn
        assert state.error == "" and state.model_info.get("name") == "tiny" and explore(state).trajectory is not None, (
            state.status, state.model_info, pn.state.curdoc, state.dispatch)
    finally:
        state.close()


def test_cli_serve_is_the_default_command_and_refuses_bad_arguments(checkpoints, capsys):
    from explorer.cli import build_parser, main

    args = build_parser().parse_args(["serve", "--no-show", "--port", "0"])
    assert args.command == "serve" and args.no_show and args.checkpoint is None and args.device == "auto"
    assert main(["--checkpoint", "nope", "--no-show"]) == 2  # no subcommand: serve
    assert "no checkpoint named 'nope'" in capsys.readouterr().err
    assert main(["serve", "--checkpoint", "../tiny", "--no-show"]) == 2
    assert main(["serve", "--threads", "-1", "--no-show"]) == 2
