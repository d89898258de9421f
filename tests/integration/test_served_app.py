"""The dashboard served for real, in-process and by `panel serve explorer/dashboard/app.py`, without a
browser: the page and its assets come from the server, never from the network."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ROOT
from tests.support.serving import check_page, free_port, get, serving


def test_served_in_process_on_a_free_port(checkpoints):
    from explorer.dashboard import create_app

    with serving(lambda: create_app(checkpoint="tiny", device="cpu")) as url:
        check_page(*get(url))


def test_a_session_made_by_its_websocket_has_no_stylesheet_from_a_cdn(checkpoints):
    """Bokeh discards a session whose page's websocket has not connected within 15 s (a page opened with
    others on a loaded server), and the late websocket makes a new session, which has no HTML page
    rendered. Its Panel stylesheets must still come from this server: offline, a CDN URL fails."""
    from bokeh.client import pull_session
    from bokeh.models import ImportedStyleSheet

    from explorer.dashboard import create_app

    with serving(lambda: create_app(checkpoint="tiny", device="cpu", autoload=False)) as url:
        with pull_session(url=url) as session:  # a new session id: the server makes the session for this socket
            sheets = {str(s.url) for s in session.document.select({"type": ImportedStyleSheet})}
    assert any("static/extensions/panel/css/loading.css" in u for u in sheets), sheets  # Panel's own, found
    assert [u for u in sheets if "://" in u] == []


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
