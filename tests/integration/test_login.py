"""The served dashboard's login (explorer/dashboard/runtime/auth.py, wired by `serve --basic-auth`): wrong
passwords get slower per user name and per client address, without holding up anyone else's login, and
logout ends the session on the server, so a copy of its cookies is refused afterwards. The real app,
served in this process with the options `serve` gives pn.serve, and real HTTP clients; each address is a
loopback address of its own (127.0.0.N), which the server sees as a different client."""
from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse

import pytest
from bokeh.util.token import get_token_payload

from explorer.dashboard.runtime import auth
from tests.support.serving import USERS, Client, serve_options, serving


@pytest.fixture
def login_server(checkpoints, tmp_path, monkeypatch):
    """The dashboard behind `serve --basic-auth USERS.json`'s login; yields its port. The delays are
    a fifth of the real ones (the same doubling), to keep the test short."""

    from explorer.dashboard.app import create_app

    monkeypatch.setattr(auth, "BASE_DELAY", 0.05)
    users = tmp_path / "users.json"
    users.write_text(json.dumps(USERS))
    opts = serve_options(monkeypatch, "--basic-auth", str(users))
    with serving(lambda: create_app(checkpoint="tiny", device="cpu"), **opts) as url:
        yield urllib.parse.urlsplit(url).port


def test_wrong_passwords_get_slower_per_user_name(login_server):
    attacker = Client(login_server, "127.0.0.2")
    took = []
    for _ in range(4):
        status, _, headers, seconds = attacker.login("alice", "guess")
        assert status == 302 and "error=Invalid" in headers["Location"]
        took.append(seconds)
    # each answer waits for its delay: 0.05, 0.1, 0.2, 0.4 s here (doubling)
    assert all(t >= auth.delay_after(i + 1) for i, t in enumerate(took)), took
    # the same name from another address waits as long as the name's count says (5th failure: 0.8 s)
    status, _, _, seconds = Client(login_server, "127.0.0.3").login("alice", "guess-again")
    assert status == 302 and seconds >= auth.delay_after(5)


def test_wrong_passwords_get_slower_per_address(login_server):
    guesser = Client(login_server, "127.0.0.4")
    took = [guesser.login(name, "guess")[3] for name in ("x1", "x2", "x3", "x4", "x5")]
    # a new name each time (its own count is 1), but the address's count grows: 0.05 ... 0.8 s
    assert took[-1] >= auth.delay_after(5) and took[-1] > 2 * auth.delay_after(1), took


def test_a_guess_while_waiting_is_refused_unchecked_and_others_log_in_meanwhile(login_server):
    guesser = Client(login_server, "127.0.0.5")
    for _ in range(5):
        guesser.login("bob", "guess")
    slow = {}  # the sixth failure waits 1.6 s: meanwhile ...
    thread = threading.Thread(target=lambda: slow.update(answer=guesser.login("bob", "guess")))
    thread.start()
    time.sleep(0.3)
    # ... a second guess for bob, even the right password, is refused without being checked ...
    status, body, headers, _ = Client(login_server, "127.0.0.6").login("bob", USERS["bob"])
    assert status == 429 and "Too many failed logins" in body and int(headers["Retry-After"]) >= 1
    # ... and another user logs in at once: the wait blocks no one else
    carol = Client(login_server, "127.0.0.7")
    status, _, headers, _ = carol.login("carol", USERS["carol"])
    assert status == 302 and headers["Location"] == "/" and "mdlm_session" in carol.cookies
    assert thread.is_alive()  # bob's guesser is still waiting for its answer
    thread.join(30)
    assert slow["answer"][0] == 302 and slow["answer"][3] >= auth.delay_after(6)


def test_logout_revokes_a_copied_cookie(login_server):
    alice = Client(login_server)
    assert alice.request("GET", "/")[0] == 302  # no login: sent to the login page
    assert alice.login("alice", USERS["alice"])[0] == 302
    status, body, _, _ = alice.request("GET", "/")
    assert status == 200 and "<title>mdlm-explorer</title>" in body
    # the page's Bokeh session token carries the request's cookies, readable by the page's scripts:
    # not the session's (an httponly cookie)
    payload = get_token_payload(re.search(r'"token": ?"([^"]+)"', body).group(1))
    assert "user" in payload["cookies"] and "mdlm_session" not in json.dumps(payload)
    copy = dict(alice.cookies)  # what someone copying the browser's cookies has
    other = Client(login_server, "127.0.0.8")  # alice logged in on another machine too
    other.login("alice", USERS["alice"])
    assert alice.request("GET", "/", cookies=copy)[0] == 200
    assert alice.request("GET", "/logout")[0] == 200
    status, _, headers, _ = alice.request("GET", "/", cookies=copy)
    assert status == 302 and "login" in headers["Location"]  # the copy no longer lets anyone in
    assert other.request("GET", "/")[0] == 200  # the other login is another session: it stays
    # the signed user cookie alone (a copy from before the session token) is not a login either
    only_user = {k: v for k, v in other.cookies.items() if k != "mdlm_session"}
    assert other.request("GET", "/", cookies=only_user)[0] == 302
