"""Whose checkpoints are whose: a served dashboard's users each see the checkpoints they trained in the
browser, never another user's, and may keep only so many.

A served session's owner is its login's user name, or its address when the server asks for no login
(a laptop's own user keeps their checkpoints across page reloads; a class without logins shares
per machine). Outside a served session (a script, a notebook, a test driving a session) there is
no owner: that user runs the process and sees every file.

Which user trained which checkpoint is kept in checkpoints/.owners.json ({name: owner}), next to the
files, so a restarted server or its other processes (serve --num-procs) agree. Checkpoints it does
not name (shipped, or trained with `run.py train`) are everyone's.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from pathlib import Path

from ...checkpoint import SUFFIX, checkpoints_dir

log = logging.getLogger(__name__)

OWNERS_FILE = ".owners.json"  # a dot file: never a checkpoint name (resolve_checkpoint refuses them)
QUOTA_ENV = "MDLM_EXPLORER_USER_CHECKPOINTS"
DEFAULT_QUOTA = 3  # "Training with the ELBO" compares three schedules: one saved run each
_LOCK = threading.Lock()
_PENDING: dict[str, str] = {}  # checkpoint name -> owner, of the trainings running in this process


def session_owner() -> str | None:
    """The owner of the served session whose page is being built now: 'user NAME' from its login
    cookie, else 'address IP'; None outside a served session. Reads Panel's context variable only
    (pn.state.curdoc falls back to a process-wide document another server thread left set)."""
    if "panel" not in sys.modules:  # nothing is served without Panel: spare a script importing it
        return None
    import panel as pn
    from tornado.web import decode_signed_value

    doc = pn.state._curdoc.get()
    request = getattr(getattr(doc, "session_context", None), "request", None)
    if request is None:
        return None
    cookie, secret = request.cookies.get("user"), pn.config.cookie_secret
    if cookie and secret:
        # signed by the login (runtime/auth.py), which checked the session before this page was built
        user = decode_signed_value(secret, "user", cookie, max_age_days=pn.config.oauth_expiry)
        if user:
            return "user " + user.decode("utf-8", "replace")
    return f"address {getattr(request, 'remote_ip', None) or 'unknown'}"


def quota() -> int:
    """Checkpoints one owner may keep (MDLM_EXPLORER_USER_CHECKPOINTS, set by `serve --user-checkpoints`)."""
    value = os.environ.get(QUOTA_ENV, "").strip()
    try:
        return max(0, int(value)) if value else DEFAULT_QUOTA
    except ValueError:
        log.warning("%s=%r is not a whole number: using %d", QUOTA_ENV, value, DEFAULT_QUOTA)
        return DEFAULT_QUOTA


def _path(directory: Path | None = None) -> Path:
    return (directory or checkpoints_dir()) / OWNERS_FILE


def recorded(directory: Path | None = None) -> dict[str, str]:
    """{checkpoint name: owner} as recorded ({} when none is, or the file is unreadable: then every
    checkpoint is everyone's, as before any was trained in a browser)."""
    try:
        data = json.loads(_path(directory).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("ignoring %s: %s", _path(directory), e)
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def record(name: str, owner: str | None, directory: Path | None = None) -> None:
    """Note `owner` as the owner of checkpoint `name` (None: everyone's). Written to a new file and
    renamed, so a reader never sees half of it."""
    if owner is None and name not in recorded(directory):
        return  # nothing to forget: a script's or notebook's save writes no file here
    with _LOCK, _file_lock(_path(directory)):
        owners = recorded(directory)
        if owner is None:
            owners.pop(name, None)
        else:
            owners[name] = owner
        path = _path(directory)
        tmp = path.with_name(f"{OWNERS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(owners, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


@contextlib.contextmanager
def _file_lock(path: Path):
    """Hold an exclusive lock on a file beside `path` (Unix): serve --num-procs runs processes that
    may record at once, and each rewrites the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: one process only (serve refuses --num-procs above 1 there)
        yield
        return
    with open(path.with_name(OWNERS_FILE + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def visible(names: list[str], owner: str | None) -> list[str]:
    """`names` less the checkpoints of other owners (owner None: all of them)."""
    if owner is None:
        return list(names)
    owners = recorded()
    return [n for n in names if owners.get(n, owner) == owner]


def kept_by(owner: str) -> list[str]:
    """The checkpoints `owner` has saved (files still there) or is training in this process."""
    d = checkpoints_dir()
    saved = [n for n, o in recorded().items() if o == owner and (d / f"{n}{SUFFIX}").is_file()]
    with _LOCK:
        running = [n for n, o in _PENDING.items() if o == owner and n not in saved]
    return sorted(saved + running)


def quota_problem(owner: str | None) -> str:
    """Why `owner` may not start another training ('' = they may): they keep their quota already."""
    if owner is None:
        return ""
    kept, limit = kept_by(owner), quota()
    if len(kept) < limit:
        return ""
    return (f"you keep {len(kept)} checkpoint(s) on this server ({', '.join(kept)}), its limit per user "
            f"is {limit}: ask its operator to remove one (or to raise serve --user-checkpoints)")


def start(name: str, owner: str | None) -> None:
    """A training of `name` for `owner` has started in this process (it counts against the quota)."""
    if owner is not None:
        with _LOCK:
            _PENDING[name] = owner


def finish(name: str) -> None:
    """That training has ended (its checkpoint, if saved, is recorded by then)."""
    with _LOCK:
        _PENDING.pop(name, None)
