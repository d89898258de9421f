"""An open page whose server goes away (ui/connection.py), in a real headless Chromium: the real
`run.py serve` in a subprocess is killed, the page says so at once, and once a server answers again
on the same port the page offers a reload that brings back a working dashboard."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from explorer.dashboard.ui.connection import BACK_TEXT, LOST_TEXT
from tests.support import ROOT
from tests.support.dashboard import save_tiny_checkpoints, wait_for
from tests.support.serving import free_port

pytestmark = pytest.mark.slow


def start_server(port: int, checkpoints: Path, log: Path) -> subprocess.Popen:
    """`python run.py serve` on `port`, as a lecturer starts it; returns once it listens."""
    cmd = [sys.executable, str(ROOT / "run.py"), "serve", "--no-show", "--port", str(port), "--checkpoint", "tiny",
           "--device", "cpu", "--threads", "1", "--no-auto-sweep"]
    env = {**os.environ, "MDLM_EXPLORER_CHECKPOINTS": str(checkpoints), "OMP_NUM_THREADS": "1"}
    with open(log, "a") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: proc.poll() is not None or _listening(port), timeout=120, interval=0.2,
                 message="the server did not listen within 120 s")
        assert proc.poll() is None, f"the server exited:\n{log.read_text()[-3000:]}"
    except BaseException:
        stop(proc)
        raise
    return proc


def stop(proc: subprocess.Popen, crash: bool = False) -> None:
    """This test's own server, by its pid: SIGKILL for a crash (nothing says goodbye), else SIGTERM."""
    if proc.poll() is None:
        proc.kill() if crash else proc.terminate()
    proc.wait(timeout=30)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("localhost", port)) == 0


def header(page) -> str:
    """The header line as shown (inside the pane's shadow root, which the locator looks into)."""
    line = page.locator(".dashboard-header .hdr")
    return line.inner_text() if line.count() else ""


def test_a_lost_server_is_shown_and_the_page_reloads_once_it_is_back(browser, tmp_path):
    checkpoints = save_tiny_checkpoints((tmp_path / "checkpoints").mkdir() or tmp_path / "checkpoints")
    port, log = free_port(), tmp_path / "server.log"
    server = start_server(port, checkpoints, log)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"http://localhost:{port}/?seed=7")
        wait_for(lambda: "tiny" in header(page) and "ms" in header(page), timeout=90, message="no first run")
        assert page.locator(".connection-notice").count() == 0  # nothing to say while connected

        stop(server, crash=True)
        notice = page.locator(".connection-notice")
        notice.wait_for(state="visible", timeout=15_000)
        assert notice.inner_text() == LOST_TEXT and page.locator(".connection-reload").count() == 0
        time.sleep(3)  # the page keeps asking while nothing answers: still the lost notice, no reload
        assert notice.inner_text() == LOST_TEXT and page.locator(".connection-reload").count() == 0

        server = start_server(port, checkpoints, log)
        page.locator(".connection-reload").wait_for(state="visible", timeout=30_000)
        assert notice.inner_text().startswith(BACK_TEXT)
        page.locator(".connection-reload").click()
        # the reloaded page is a new session of the new server: its own first run, the link's seed kept
        wait_for(lambda: "tiny" in header(page) and "ms" in header(page), timeout=90,
                 message="the reloaded page did not run")
        assert page.locator(".connection-notice").count() == 0 and "seed=7" in page.url
        assert page.locator(".knob-seed input").input_value() == "7"
    finally:
        stop(server)
