"""Who may reach a served dashboard (`python run.py serve --basic-auth`): a login that slows down
guessing and ends for good at logout, and Panel's component-file route closed to strangers.

Panel's own basic auth (panel/auth.py) answers a wrong password at once, as often as asked, and its
login is a signed cookie alone: /logout clears the browser's copy, but a copy taken earlier stays
valid for the cookie's whole life. Here a login also opens a session on the server, a random token
in its own signed cookie; a request is let in only while that token is live, and logout ends it.
Failed logins are counted per user name and per client address; after each, that name and that
address wait twice as long as before (BASE_DELAY, doubling, at most MAX_DELAY, forgotten FORGET_S
after the last failure). The wait is asynchronous: the server answers everyone else meanwhile, and a
login attempt made before the wait is over is refused without its password being checked.

Panel's component route (/components/<module>/<class>/<attribute>/<file>) imports whatever module a
URL names, before any login check and on the server's event loop, so any visitor could make the
server import (and run the top level of) any installed package. ComponentHandler serves only
modules already imported, of the packages the page is made of, and only to a logged-in user.

Sessions and failure counts live in SQLite: in memory for one process, in a file shared by the
processes of `serve --num-procs` (the browser's requests reach any of them).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import math
import os
import secrets
import sqlite3
import sys
import threading
import time
from pathlib import Path

import tornado.escape
from panel.auth import BasicAuthProvider, BasicLoginHandler, LogoutHandler as PanelLogoutHandler, _validate_next_url
from panel.config import config
from panel.io.resources import CDN_DIST
from panel.io.server import ComponentResourceHandler
from panel.io.state import state
from tornado.web import HTTPError

log = logging.getLogger(__name__)

SESSION_COOKIE = "mdlm_session"
BASE_DELAY = 0.25  # seconds after a first failure; it doubles with each further one
MAX_DELAY = 60.0  # at most a minute per guess, per user name and per address
FORGET_S = 15 * 60.0  # failures this long ago no longer count
MAX_NAME = 200  # characters of a typed user name kept as a throttling key
SERVED_PACKAGES = ("panel", "explorer")  # whose components the page links (its template, themes, widgets)


def delay_after(failures: int) -> float:
    """Seconds a user name or address waits after its `failures`-th failed login in a row."""
    return 0.0 if failures < 1 else min(MAX_DELAY, BASE_DELAY * 2 ** min(failures - 1, 30))


class LoginStore:
    """Live login sessions (a token's hash -> user, expiry) and failed-login counts (key -> count,
    last failure, blocked until), in SQLite: `path` None keeps them in this process's memory; a file
    path shares them between forked processes (each opens its own connection on first use)."""

    def __init__(self, path: str | Path | None = None):
        self.path = str(path) if path is not None else ":memory:"
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._pid: int | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None or self._pid != os.getpid():  # a connection never crosses a fork
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
            if self.path != ":memory:":  # readers of the shared file do not wait for a writer
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS sessions (token TEXT PRIMARY KEY, user TEXT, expires REAL)")
            db.execute("CREATE TABLE IF NOT EXISTS failures "
                       "(key TEXT PRIMARY KEY, count INTEGER, last REAL, blocked_until REAL)")
            self._db, self._pid = db, os.getpid()
        return self._db

    def _run(self, work):
        """work(connection) in one transaction, under this process's lock (the processes' writes are
        serialized by SQLite's own lock: BEGIN IMMEDIATE)."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

    @staticmethod
    def _hash(token: str) -> str:
        return hashlib.sha256(token.encode("utf-8")).hexdigest()  # a copy of the file holds no usable token

    def open_session(self, user: str, lifetime_s: float) -> str:
        """A new session for `user`: its token (random, for the cookie)."""
        token, now = secrets.token_urlsafe(32), time.time()

        def work(db):
            db.execute("DELETE FROM sessions WHERE expires < ?", (now,))
            db.execute("INSERT INTO sessions VALUES (?, ?, ?)", (self._hash(token), user, now + lifetime_s))
        self._run(work)
        return token

    def session_user(self, token: str | None) -> str | None:
        """The user of a live session's token; None for an unknown, ended or expired one."""
        if not token:
            return None
        row = self._run(lambda db: db.execute("SELECT user, expires FROM sessions WHERE token = ?",
                                              (self._hash(token),)).fetchone())
        return row[0] if row and row[1] >= time.time() else None

    def close_session(self, token: str) -> None:
        self._run(lambda db: db.execute("DELETE FROM sessions WHERE token = ?", (self._hash(token),)))

    def wait_s(self, keys: list[str]) -> float:
        """Seconds until a login under all of `keys` may be tried (0: now)."""
        now = time.time()
        marks = ",".join("?" * len(keys))
        row = self._run(lambda db: db.execute(f"SELECT MAX(blocked_until) FROM failures WHERE key IN ({marks})",
                                              keys).fetchone())
        return max(0.0, (row[0] or 0.0) - now)

    def failed(self, keys: list[str]) -> float:
        """Count a failed login against each key; returns the wait it earned (the longest of the keys')."""
        now = time.time()

        def work(db):
            db.execute("DELETE FROM failures WHERE last < ?", (now - FORGET_S,))
            longest = 0.0
            for key in keys:
                row = db.execute("SELECT count FROM failures WHERE key = ?", (key,)).fetchone()
                count = (row[0] if row else 0) + 1
                wait = delay_after(count)
                db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?, ?)", (key, count, now, now + wait))
                longest = max(longest, wait)
            return longest
        return self._run(work)

    def succeeded(self, key: str) -> None:
        """A right password for this user name: its failures are forgotten (its address's are not: a
        guesser who owns one account must not clear their address's count by logging in to it)."""
        self._run(lambda db: db.execute("DELETE FROM failures WHERE key = ?", (key,)))


def check_password(credentials: str, user: str, password: str) -> bool:
    """Whether `password` is right for `user`: `credentials` is one shared password, or the path of a
    JSON file of {"user": "password"} (read at each login, so an edited file counts at once).
    Compared in constant time."""
    if not user:
        return False
    expected = credentials
    if os.path.isfile(credentials):
        try:
            with open(credentials, encoding="utf-8") as f:
                users = json.load(f)
        except (OSError, ValueError) as e:  # edited while serving: no one gets in until it is fixed
            log.error("cannot read the users file %s: %s", credentials, e)
            users = {}
        expected = users.get(user) if isinstance(users, dict) else None
    if not isinstance(expected, str):
        hmac.compare_digest(password.encode("utf-8"), password.encode("utf-8"))  # the same time either way
        return False
    return hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8"))


def _signed(handler, name: str) -> str | None:
    value = handler.get_secure_cookie(name, max_age_days=config.oauth_expiry)
    return value.decode("utf-8", "replace") if value else None


class LoginHandler(BasicLoginHandler):
    """Panel's login page and form, with the wait after failures and a server-side session."""

    provider: LoginProvider  # set on each provider's own subclass (LoginProvider.login_handler)

    async def post(self):
        user = self.get_argument("username", "")[:MAX_NAME]
        password = self.get_argument("password", "")
        keys = [f"user {user}", f"address {self.request.remote_ip}"]
        store = self.provider.store
        wait = store.wait_s(keys)
        if wait > 0:  # still waiting after a failure: refused unchecked, so parallel guesses gain nothing
            self._refuse(f"Too many failed logins: try again in {math.ceil(wait)} s.", wait)
            return
        if check_password(self.provider.credentials, user, password):
            store.succeeded(keys[0])
            self.set_current_user(user)  # Panel's signed user cookie (pn.state.user reads it)
            token = store.open_session(user, config.oauth_expiry * 86400)
            self.set_secure_cookie(SESSION_COOKIE, token, expires_days=config.oauth_expiry, httponly=True,
                                   path=config.cookie_path, samesite="Lax")
            self.redirect(_validate_next_url(self.get_cookie("next_url", state.base_url)) or "/")
            return
        await asyncio.sleep(store.failed(keys))  # this client waits; the server answers others meanwhile
        self.redirect(f"{self.request.path}?error=" + tornado.escape.url_escape("Invalid username or password!"))

    def _refuse(self, message: str, wait: float) -> None:
        self.set_status(429)
        self.set_header("Retry-After", str(math.ceil(wait)))
        # the template escapes the message (basic_login.html: errormessage|escape)
        self.write(self._login_template.render(login_endpoint=self._login_endpoint, errormessage=message,
                                               PANEL_CDN=CDN_DIST))  # (LocalAssets puts the server's own)


class LogoutHandler(PanelLogoutHandler):
    """Panel's logout page; the session ends on the server too, so a copy of the cookies is useless."""

    provider: LoginProvider

    def get(self):
        token = _signed(self, SESSION_COOKIE)
        if token:
            self.provider.store.close_session(token)
        self.clear_cookie(SESSION_COOKIE, path=config.cookie_path)
        super().get()


class LocalAssets:
    """Panel's login or logout template, its logo and icon linked from this server's copy of Panel's files
    (/static/extensions/panel/, served before the login) instead of Panel's CDN: offline, the page showed a
    broken image and the browser reported two failed requests."""

    def __init__(self, template):
        self.template = template

    def render(self, **values) -> str:
        return self.template.render(**{**values, "PANEL_CDN": f"{state.base_url}static/extensions/panel/"})


class LoginProvider(BasicAuthProvider):
    """Panel's BasicAuthProvider with LoginHandler and LogoutHandler, letting in a request only with a
    user cookie and a live session of that same user."""

    def __init__(self, credentials: str, store: LoginStore | None = None, **kwargs):
        """credentials: a shared password or the path of a JSON users file (serve --basic-auth);
        store: where sessions and failures live (default: this process's memory)."""
        super().__init__(**kwargs)
        self.credentials = credentials
        self.store = store or LoginStore()

    @property
    def get_user(self):
        panel_get_user = super().get_user  # reads the user cookie, counts a page's connections

        def get_user(handler):
            user = _signed(handler, "user")
            if not user or self.store.session_user(_signed(handler, SESSION_COOKIE)) != user:
                return None
            return panel_get_user(handler)
        return get_user

    @property
    def login_handler(self):
        return type("LoginHandler", (LoginHandler,), {"provider": self, "_login_endpoint": self._login_endpoint,
                                                      "_login_template": LocalAssets(self._login_template)})

    @property
    def logout_handler(self):
        return type("LogoutHandler", (LogoutHandler,), {"provider": self, "_login_endpoint": self._login_endpoint,
                                                        "_logout_template": LocalAssets(self._logout_template)})


def served_module(name: str) -> bool:
    """Whether /components/ may read files of module `name`: already imported (so nothing is imported
    for a URL) and one of the packages the page is made of."""
    return name in sys.modules and name.split(".")[0] in SERVED_PACKAGES


class ComponentHandler(ComponentResourceHandler):
    """Panel's component-file route, for logged-in users only (when the server asks for a login: 403
    otherwise) and for served modules only (404 otherwise), checked before Panel's handler imports."""

    def get_current_user(self):
        provider = self.application.auth_provider
        return provider.get_user(self) if provider.get_user is not None else "default_user"

    def prepare(self):
        if not self.current_user:
            raise HTTPError(403, "log in first")

    def parse_url_path(self, path: str) -> str:
        if not served_module(path.split("/", 1)[0]):
            raise HTTPError(404, "Module not found")
        return super().parse_url_path(path)


def server_options(credentials: str | None, store: LoginStore | None = None) -> dict:
    """pn.serve keywords: the guarded component route, and with `credentials` (serve --basic-auth) the
    login. Given instead of pn.serve's basic_auth, which would install Panel's own provider. The
    component route comes first among the extra patterns, so Tornado picks it over Panel's."""
    from panel.io.resources import COMPONENT_PATH

    opts: dict = {"extra_patterns": [(f"/{COMPONENT_PATH}(.*)", ComponentHandler)]}
    if credentials:
        opts["auth_provider"] = LoginProvider(credentials, store)
        # Bokeh copies the request's cookies into the session token it writes into the page, where
        # the page's scripts could read them: the session token stays in its httponly cookie
        opts["exclude_cookies"] = [SESSION_COOKIE]
    return opts
