"""Served apps for the tests: the dashboard (or any page) served by a threaded pn.serve in this process on a
free port (`serving`, `serve_in_process`), the pn.serve options `serve`'s flags give (`serve_options`),
GETs that wait for a server (`get`, `check_page`), and an HTTP client from a loopback address of its own
that keeps its cookies (`Client`)."""
from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
import urllib.parse
import urllib.request

from tests.support.dashboard import wait_for

USERS = {"alice": "alice-password", "bob": "bob-password", "carol": "carol-password"}


def free_port() -> int:
    """A port nothing listens on now."""
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
    """The dashboard's page, its assets from this server, never from the network."""
    assert status == 200
    assert "<title>mdlm-explorer</title>" in page
    assert "static/js/bokeh" in page  # assets come from this server...
    assert "googleapis" not in page and "cdn.bokeh.org" not in page  # ...never from the network


@contextlib.contextmanager
def serving(app, **options):
    """Serve `app` (a function building one session's page) with a threaded pn.serve on a free port of this
    process (`options`: more pn.serve keywords); yields its URL once it listens, and stops it afterwards."""
    import panel as pn

    port = free_port()
    server = pn.serve({"/": app}, port=port, address="localhost", show=False, threaded=True, start=True, **options)
    try:
        # wait until it listens; not a GET of the page, which would build (and leave) a whole
        # session's app: 0.5 s of every browser test's set-up
        wait_for(lambda: _listening(port), timeout=60, message=f"nothing listens on port {port}")
        yield f"http://localhost:{port}/"
    finally:
        stop_server(server)


@contextlib.contextmanager
def serve_in_process(build, **options):
    """Serve `build()` (a template from create_app, made per session) on a free port in this process.
    Yields (url, the sessions' ExplorerStates); afterwards closes the sessions (their background work
    would slow the tests that follow) and stops the server."""
    states = []

    def app():
        template = build()
        states.append(template.explorer_state)
        return template

    with serving(app, **options) as url:
        try:
            yield url, states
        finally:
            for state in states:
                state.close()


def stop_server(server) -> None:
    """Stop a threaded pn.serve and wait for its thread: stop() only schedules the shutdown, and a loop still
    running ran an ended test's session callbacks under Bokeh's process-wide patched curdoc while the next
    test read it (a tab test failed now and then)."""
    server.stop()
    server.join(timeout=15)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("localhost", port)) == 0


def serve_options(monkeypatch, *argv) -> dict:
    """The pn.serve keywords `python run.py serve ARGV` gives (its checks first); Panel's process-wide
    cookie secret, which pn.serve sets, is put back after the test."""
    import argparse

    import panel as pn

    from explorer.cli import serve

    monkeypatch.setattr(pn.config, "_cookie_secret", pn.config._cookie_secret)
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args(["--no-show", "--port", "0", *argv])
    serve.check_args(args)
    return serve.server_options(args)


def users_file(directory) -> str:
    """USERS written as `serve --basic-auth`'s JSON file in `directory`; returns its path."""
    path = directory / "users.json"
    path.write_text(json.dumps(USERS))
    return str(path)


def serve_dashboard(monkeypatch, *argv):
    """The dashboard on the tiny checkpoint, served in this process with the options `python run.py serve
    ARGV` gives pn.serve (a context manager yielding its URL, as `serving`)."""
    from explorer.dashboard.app import create_app

    opts = serve_options(monkeypatch, *argv)
    return serving(lambda: create_app(checkpoint="tiny", device="cpu"), **opts)


class Client:
    """An HTTP client from one loopback address, keeping the cookies it is given."""

    def __init__(self, port: int, address: str = "127.0.0.1"):
        self.port, self.address, self.cookies = port, address, {}

    def request(self, method: str, path: str, form: dict | None = None, cookies: dict | None = None):
        """(status, body, headers, seconds taken); redirects are not followed."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60, source_address=(self.address, 0))
        jar = self.cookies if cookies is None else cookies
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())} if jar else {}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        t0 = time.monotonic()
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        text, took = r.read().decode("utf-8", "replace"), time.monotonic() - t0
        for header in r.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            value = rest.split(";", 1)[0]
            if value in ('""', ""):
                jar.pop(name, None)
            else:
                jar[name] = value
        conn.close()
        return r.status, text, r.headers, took

    def login(self, user: str, password: str):
        return self.request("POST", "/login", {"username": user, "password": password})
