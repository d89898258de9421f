"""Panel's component-file route (/components/<module>/<class>/<attribute>/<file>) on the served dashboard
(runtime/auth.ComponentHandler, wired by `serve`): Panel's own handler imported any module a URL named,
before the login check and on the server's event loop. Now a module not already imported, or not of the
page's packages, is refused and never imported, before and after a login; a stranger gets nothing; the
app's own files still come (and a real browser still renders the page after logging in:
tests/browser/test_login_page.py)."""
from __future__ import annotations

import urllib.parse
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.serving import USERS, Client, serve_dashboard, users_file

# a file of the page's own template (panel/template/bootstrap/bootstrap.css), as Panel links it
TEMPLATE_CSS = "/components/panel.template.bootstrap/BootstrapTemplate/_css/bootstrap.css"


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """(name, marker) of an importable module no one has imported: importing it writes `marker`."""
    name = f"never_imported_{uuid.uuid4().hex}"
    marker = tmp_path / f"{name}.imported"
    (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass Widget:\n    _css = ['x.css']\n")
    (tmp_path / "x.css").write_text("body {}")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    sys.modules.pop(name, None)


def template_css() -> str:
    import panel

    return (Path(panel.__file__).parent / "template" / "bootstrap" / "bootstrap.css").read_text(encoding="utf-8")


def test_unlisted_modules_are_refused_and_never_imported(checkpoints, tmp_path, monkeypatch, fresh_module):
    name, marker = fresh_module
    probe = f"/components/{name}/Widget/_css/x.css"
    with serve_dashboard(monkeypatch, "--basic-auth", users_file(tmp_path)) as url:
        port = urllib.parse.urlsplit(url).port
        stranger = Client(port)
        assert stranger.request("GET", probe)[0] == 403  # no login: nothing, whatever the module
        assert stranger.request("GET", TEMPLATE_CSS)[0] == 403
        user = Client(port)
        assert user.login("alice", USERS["alice"])[0] == 302
        assert user.request("GET", probe)[0] == 404  # logged in, but not a module the page is made of
        assert user.request("GET", "/components/json/JSONDecoder/_css/x.css")[0] == 404  # imported, not served
        status, body, headers, _ = user.request("GET", TEMPLATE_CSS)  # the page's own file still comes
        assert status == 200 and body == template_css() and "css" in headers["Content-Type"]
    assert name not in sys.modules and not marker.exists()


def test_without_a_login_only_served_modules_are_read(checkpoints, tmp_path, monkeypatch, fresh_module):
    name, marker = fresh_module
    with serve_dashboard(monkeypatch) as url:
        client = Client(urllib.parse.urlsplit(url).port)
        assert client.request("GET", f"/components/{name}/Widget/_css/x.css")[0] == 404
        assert client.request("GET", TEMPLATE_CSS)[1] == template_css()
    assert name not in sys.modules and not marker.exists()
