"""`python run.py serve` (the default command): serve the dashboard on localhost and open the browser.

Everything the page needs (Bokeh, Panel and template assets) is served by this process, so it works
with no network. The same app is served by `panel serve explorer/dashboard/app.py`.
"""
from __future__ import annotations

import argparse
import os
import sys

from . import CLIError, int_in
from .models import add_model_arguments, hf_options

from ..names import DEVICES, PRECISIONS


def add_arguments(p: argparse.ArgumentParser):
    p.add_argument("--port", type=int, default=5006, help="port to listen on (0 = any free port); default 5006")
    p.add_argument("--address", default="localhost",
                   help="address to listen on; default localhost (use 0.0.0.0 to serve a lab network)")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint name in checkpoints/ to open first (default: shakespeare if present)")
    p.add_argument("--device", default="auto", choices=DEVICES, help="where the sampler runs; default auto")
    p.add_argument("--models", nargs="+", default=[], metavar="SPEC",
                   help="Hugging Face models sessions may open besides checkpoints/ (hf:ORG/NAME[@rev] or a model "
                        "directory); a session can open nothing else, so a student cannot make the server "
                        "download or run anything")
    add_model_arguments(p)
    p.add_argument("--data", action="append", default=None, metavar="FILE",
                   help="the text a served checkpoint was trained on, for its held-out figures (Inspect's "
                        "accuracy and confidence, Compare's reference scores); used only for the checkpoints "
                        "whose recorded sha256 it matches; repeatable. MDLM_EXPLORER_DATA does the same")
    p.add_argument("--offline", action="store_true",
                   help="download nothing: without it, the server fetches Tiny Shakespeare once at start "
                        "(sha256-checked, into ~/.cache/mdlm-explorer) when a served checkpoint was trained on "
                        "it and the server has no copy. Visitors' requests never download anything")
    p.add_argument("--no-show", action="store_true", help="do not open a browser")
    p.add_argument("--threads", type=int, default=0,
                   help="torch CPU threads (0 = one fewer than the cores: 1 on a 2-core laptop, leaving a core "
                        "for the browser). Use 1 when other jobs keep every core busy: oversubscribed threads "
                        "can make each model call many times slower")
    p.add_argument("--no-auto-sweep", action="store_true",
                   help="sessions start with 'compute quality vs steps after each run' off (a user can still "
                        "press Compute): each sweep costs many runs, so turn it off for a class on one CPU "
                        "(MDLM_EXPLORER_AUTO_SWEEP=0 does the same)")
    p.add_argument("--scrub", default=None, choices=("auto", "on", "off"),
                   help="sliders re-sample while they are dragged: each knob change waits for the run on its "
                        "way, then the newest knobs run (auto: on a GPU, where a run follows a hand). Default: "
                        "MDLM_EXPLORER_SCRUB or auto")
    p.add_argument("--precision", default=None, choices=PRECISIONS,
                   help="precision of the dashboard's model calls: fp32 (default; every figure as documented), "
                        "bf16 (torch.autocast: 2-3x faster batched on a CPU with AMX, texts differ from fp32), "
                        "auto (bf16 on CUDA and AMX/AVX512-BF16 CPUs). Default: MDLM_EXPLORER_PRECISION or fp32")
    p.add_argument("--allow-websocket-origin", action="append", default=None, metavar="HOST[:PORT]",
                   help="extra origins allowed to connect (needed when serving on a non-local address)")
    p.add_argument("--num-threads", type=int, default=None, metavar="N",
                   help="Panel's thread pool for session callbacks (0 = Python's default size; default: none). "
                        "Lets one session's slow callback not hold up the others")
    p.add_argument("--num-procs", type=int, default=1, metavar="N",
                   help="serve from N processes (Panel's --num-procs): forked once the port is bound, so they share "
                        "that one fixed port; each loads its own model and has its own device queue. Connections "
                        "are not balanced (the first idle process takes one). Unix only; default 1")
    p.add_argument("--liveness", action="store_true",
                   help="answer GET /liveness with 200 (a health check for a load balancer or a watchdog)")
    p.add_argument("--basic-auth", default=None, metavar="PASSWORD|USERS.json",
                   help="ask for a login: one shared password, or a JSON file of {\"user\": \"password\"} "
                        "(PANEL_BASIC_AUTH keeps it out of `ps`). Wrong passwords wait longer each time, per user "
                        "name and per address; /logout ends the login on the server")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the Sweep tab's sampler calls on the Dask cluster of this scheduler (e.g. "
                        "tcp://gpu-node:8786); checked at start. MDLM_EXPLORER_SCHEDULER does the same")
    p.add_argument("--allow-training", action="store_true",
                   help="let users train models from the browser (the Model tab); off by default, as each run "
                        "takes a core for minutes and saves a file on the server (MDLM_EXPLORER_ALLOW_TRAINING=1 "
                        "does the same). Each user then sees only their own browser-trained checkpoints")
    p.add_argument("--user-checkpoints", type=int_in(1), default=None, metavar="N",
                   help="with --allow-training: checkpoints each user may keep (a login's user name, else a "
                        "client address); default 3 (MDLM_EXPLORER_USER_CHECKPOINTS)")
    p.add_argument("--cookie-secret", default=None, metavar="SECRET",
                   help="signs login cookies (default with --basic-auth: a random one, so logins end when "
                        "the server restarts; PANEL_COOKIE_SECRET also works)")
    add_limit_arguments(p)


def add_limit_arguments(p: argparse.ArgumentParser) -> None:
    """What one session may ask of the server (explorer/dashboard/runtime/limits.py, where the defaults
    live; each also read from its MDLM_EXPLORER_* variable, as `panel serve` users set them)."""
    from ..dashboard.runtime.limits import ENV, Limits, parse_limit

    def positive(text: str, fraction: bool = False):
        try:
            return parse_limit(text, fraction)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    d = Limits()
    g = p.add_argument_group("limits per session (a shared link or a widget can ask for no more)")
    g.add_argument("--max-calls-per-request", type=positive, default=None, metavar="N",
                   help="model calls one request (a sweep, a comparison, samples, a run) may make, counted per "
                        f"sample: 64 samples x 32 steps = 2,048; a larger one is refused with a notice giving its "
                        f"estimate. Default {d.calls_per_request:,} ({ENV['calls_per_request']})")
    g.add_argument("--auto-start-seconds", type=lambda t: positive(t, True), default=None, metavar="S",
                   help="estimated seconds of model calls a request may cost and still start without a click (a "
                        "link opening the Sweep or Compare tab, a knob change, the quality sweep after a run); "
                        f"above it the page shows the estimate and waits for Run. Default {d.auto_start_seconds:g} "
                        f"({ENV['auto_start_seconds']})")
    g.add_argument("--max-jobs-per-session", type=positive, default=None, metavar="N",
                   help="runs and sweeps one session may have queued or running at once (a tab's new request "
                        f"replaces its own); the session's background work runs one at a time. Default "
                        f"{d.jobs_per_session} ({ENV['jobs_per_session']})")
    g.add_argument("--max-result-mb", type=positive, default=None, metavar="MB",
                   help="results one session keeps at once (trajectories, sweep tables, samples), estimated "
                        f"before a request starts. Default {d.result_mb} ({ENV['result_mb']})")


def _check_models(specs, options=None) -> None:
    """Each --models entry must pass the checks a load makes before it builds anything (hf/model.py's
    checked_config: its config.json read from the directory, the local Hugging Face cache or, when
    reachable, the hub; its sizes, family and remote code): otherwise every session that picked it would
    fail, on a server that said nothing at start. No weights are read here.

    Args: specs, the --models entries; options, the operator's HFOptions (remote code, family override)."""
    from ..errors import CheckpointError
    from ..hf.model import checked_config

    for spec in specs:
        try:
            checked_config(spec, options)
        except CheckpointError as e:
            raise CLIError(f"--models: {e}") from e


def check_args(args) -> None:
    """Refuse bad arguments before the server starts, with one readable line each."""
    from ..checkpoint import list_checkpoints
    from ..devices import resolve_device

    if args.basic_auth is None:  # pn.serve reads no PANEL_BASIC_AUTH (only `panel serve` does)
        args.basic_auth = os.environ.get("PANEL_BASIC_AUTH")
    names = list_checkpoints() + list(args.models)
    _check_models(args.models, hf_options(args))
    if args.checkpoint is not None and args.checkpoint not in names:
        raise CLIError(f"no checkpoint named {args.checkpoint!r} in checkpoints/; available: {names or 'none'}")
    if not names:
        print("warning: checkpoints/ is empty; the dashboard will say so. Train one with "
              "`python run.py train --out NAME ...`", file=sys.stderr)
    if not 0 <= args.port <= 65535:
        raise CLIError(f"--port must be in 0..65535, got {args.port}")
    check_origins(args.allow_websocket_origin)
    if args.precision is None:
        args.precision = os.environ.get("MDLM_EXPLORER_PRECISION", "").strip().lower() or "fp32"
        if args.precision not in PRECISIONS:
            raise CLIError(f"MDLM_EXPLORER_PRECISION must be one of {', '.join(PRECISIONS)}, got {args.precision!r}")
    if args.threads < 0:
        raise CLIError(f"--threads must be >= 0, got {args.threads}")
    if args.num_threads is not None and args.num_threads < 0:
        raise CLIError(f"--num-threads must be >= 0, got {args.num_threads}")
    check_num_procs(args)
    check_scrub(args)
    if args.basic_auth is not None:
        check_basic_auth(args.basic_auth)
    if args.scheduler is None:
        args.scheduler = os.environ.get("MDLM_EXPLORER_SCHEDULER", "").strip() or None
    if args.scheduler is not None:
        check_scheduler(args.scheduler)
    check_user_checkpoints(args)
    if args.cookie_secret is not None and not args.cookie_secret.strip():
        raise CLIError("--cookie-secret is empty")
    from ..dashboard.checkpoints import DATA_ENV, data_files
    from ..data.corpus import CorpusError, read_text_file

    # the variable's files as the flag's: a typo in either leaves Inspect without its held-out text, unsaid
    for flag, paths in (("--data", args.data or []), (DATA_ENV, data_files())):
        for path in paths:
            if not os.path.isfile(path) or not os.access(path, os.R_OK):
                raise CLIError(f"{flag} {path}: no such readable file")
            try:  # a file no checkpoint can be split from is never used: said now, not by a missing figure
                read_text_file(path)
            except CorpusError as e:
                raise CLIError(f"{flag} {path}: {str(e).replace(str(path) + ' ', '', 1)}") from None
    try:
        resolve_device(args.device)
    except ValueError as e:
        raise CLIError(str(e)) from e


def check_origins(origins) -> None:
    """Each --allow-websocket-origin must be HOST or HOST:PORT with a port in 1..65535 (or Bokeh's `*`):
    Bokeh itself checks them only while the server starts, with a traceback."""
    for origin in origins or []:
        if origin == "*":  # Bokeh's "any origin"
            continue
        host, colon, port = origin.partition(":")
        if not host or ":" in port or any(c.isspace() for c in origin):
            raise CLIError(f"--allow-websocket-origin {origin!r}: expected HOST or HOST:PORT")
        if colon and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise CLIError(f"--allow-websocket-origin {origin!r}: the port must be a number in 1..65535")


def check_scrub(args) -> None:
    """--scrub, else MDLM_EXPLORER_SCRUB (a bad value is refused here, before any session reads it); and
    MDLM_EXPLORER_RESIDENT, which every run reads (sampling/resident.py)."""
    from ..dashboard.tabs.explore.state.run import SCRUB_CHOICES, SCRUB_ENV
    from ..sampling import resident

    if args.scrub is None:
        args.scrub = os.environ.get(SCRUB_ENV, "").strip().lower() or "auto"
        if args.scrub not in SCRUB_CHOICES:
            raise CLIError(f"{SCRUB_ENV} must be one of {', '.join(SCRUB_CHOICES)}, got {args.scrub!r}")
    try:
        resident.mode()
    except ValueError as e:
        raise CLIError(str(e)) from e


def check_user_checkpoints(args) -> None:
    """MDLM_EXPLORER_USER_CHECKPOINTS, when --user-checkpoints is not given, must be a count of at least
    1 (as the flag): 0 would allow training but refuse every run."""
    from ..dashboard.runtime.owners import QUOTA_ENV

    value = os.environ.get(QUOTA_ENV, "").strip()
    if args.user_checkpoints is None and value:
        try:
            args.user_checkpoints = int_in(1)(value)
        except argparse.ArgumentTypeError as e:
            raise CLIError(f"{QUOTA_ENV}: {e}") from None


def check_scheduler(address: str) -> None:
    """A wrong address fails at start, not at every sweep of every session."""
    from ..cluster import ClusterError, check_scheduler as reach

    try:
        reach(address)
    except ClusterError as e:
        raise CLIError(f"--scheduler: {e}") from e


def check_num_procs(args) -> None:
    """Panel's own 0 (one process per core) is refused: it oversubscribes a machine that is shared."""
    if args.num_procs < 1:
        raise CLIError(f"--num-procs must be >= 1 (the number of server processes), got {args.num_procs}")
    if args.num_procs > 1 and sys.platform == "win32":
        raise CLIError("--num-procs above 1 needs fork (Linux, macOS); run one server per port behind a proxy")
    if args.num_procs > 1 and args.port == 0:
        # Bokeh binds before forking, so every process would share the free port it picked, but the
        # address printed here, the --allow-websocket-origin list and a proxy all need the port known.
        raise CLIError("--num-procs needs a fixed --port (the processes share one port); got --port 0")


def looks_like_a_file(value: str) -> bool:
    """A path (a separator, ~ or a leading dot) or a name with an extension of up to 5 letters or digits:
    users.jsn, users.JSON and users.txt were taken for passwords."""
    import re

    return bool(re.search(r"[/\\]|^[~.]", value) or re.fullmatch(r"\S+\.[A-Za-z0-9]{1,5}", value))


def check_basic_auth(value: str) -> None:
    """Panel takes a password, or the path of a JSON file of users; a mistyped file name would
    silently become the password, so a value that looks like a file must be one."""
    import json
    from pathlib import Path

    if not value.strip():
        raise CLIError("--basic-auth is empty; give a password or a JSON file of users")
    path = Path(value)
    if not path.is_file():
        if looks_like_a_file(value):
            raise CLIError(f"--basic-auth: no file {value!r} (a JSON file of {{\"user\": \"password\"}}); a "
                           "shared password may not look like a file name (NAME.EXT or a path)")
        return  # a shared password
    try:
        users = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CLIError(f"--basic-auth: {value} is not a readable JSON file ({e})") from e
    if not (isinstance(users, dict) and users and all(isinstance(k, str) and isinstance(v, str) and v
                                                      for k, v in users.items())):
        raise CLIError(f"--basic-auth: {value} must hold a JSON object of user names to non-empty passwords")


# Bokeh drops a session whose page has not opened its websocket within 15 s. Pages opened together on a
# busy server (a class following one link) can take longer than that; the late websocket then builds the
# whole app a second time for a session no page was rendered for. A minute covers a loaded server's
# first paint; an abandoned page load holds its session that long.
UNUSED_SESSION_MS = 60_000


def server_options(args) -> dict:
    """pn.serve keywords for access control, health checks and origins (the `panel serve` flags).
    The login and Panel's component route are the dashboard's own (runtime/auth.py): Panel's login
    lets guesses through at full speed and cannot be logged out of for good."""
    import secrets

    import panel as pn

    from ..dashboard.runtime import auth

    opts = {"websocket_origin": args.allow_websocket_origin or None, "liveness": args.liveness,
            "unused_session_lifetime_milliseconds": UNUSED_SESSION_MS}
    if args.num_threads is not None:
        pn.config.nthreads = args.num_threads  # pn.serve has no keyword; `panel serve` sets this too
    opts.update(auth.server_options(args.basic_auth, login_store(args) if args.basic_auth else None))
    if args.basic_auth:
        # Login cookies are signed; without a secret the login page itself would fail.
        opts["cookie_secret"] = args.cookie_secret or pn.config.cookie_secret or secrets.token_urlsafe(32)
    elif args.cookie_secret:
        opts["cookie_secret"] = args.cookie_secret
    return opts


def login_store(args):
    """Where logins and failed-login counts live: this process's memory, or with --num-procs a file the
    forked processes share (a browser's requests reach any of them), removed when the server stops."""
    import atexit
    import shutil
    import tempfile

    from ..dashboard.runtime.auth import LoginStore

    if args.num_procs <= 1:
        return LoginStore()
    folder, owner = tempfile.mkdtemp(prefix="mdlm-explorer-logins-"), os.getpid()  # mode 0700
    # the forked processes inherit this handler: only the process that made the folder removes it
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(folder, ignore_errors=True))
    return LoginStore(os.path.join(folder, "logins.sqlite"))


def session_defaults(args) -> None:
    """Hand --no-auto-sweep, --precision, --scrub and --scheduler to every session through the environment the
    app reads (as `panel serve` users set it), before any session or device queue exists."""
    os.environ["MDLM_EXPLORER_PRECISION"] = args.precision
    if getattr(args, "scrub", None) is not None:  # (check_args sets it: the flag, else the variable's)
        os.environ["MDLM_EXPLORER_SCRUB"] = args.scrub
    limit_env(args)
    if args.no_auto_sweep:
        os.environ["MDLM_EXPLORER_AUTO_SWEEP"] = "0"
    if args.scheduler is not None:  # read by explorer.cluster.client_from_env()
        os.environ["MDLM_EXPLORER_SCHEDULER"] = args.scheduler
    if args.allow_training:  # read by tabs/model/state.py: unset, a served session trains nothing
        os.environ["MDLM_EXPLORER_ALLOW_TRAINING"] = "1"
    if args.user_checkpoints is not None:  # read by runtime/owners.py
        os.environ["MDLM_EXPLORER_USER_CHECKPOINTS"] = str(args.user_checkpoints)
    if args.data:  # read by dashboard/checkpoints.py (held-out text); the flag's files come first
        from ..dashboard.checkpoints import DATA_ENV, data_files

        os.environ[DATA_ENV] = os.pathsep.join([os.path.abspath(path) for path in args.data] + data_files())


def fetch_held_out(args):
    """Tiny Shakespeare, downloaded once at start on a daemon thread, when a served checkpoint was trained on
    it and the server has no verified copy; never --offline. The server does not wait for it, unless it
    forks into --num-procs processes, which must not copy a thread mid-download. The operator's start
    fetches it, never a visitor's request. One line says how it went. Returns the thread, or None when
    there is nothing to fetch."""
    import threading

    from ..dashboard import checkpoints

    if args.offline or not checkpoints.needs_shakespeare() or checkpoints.local_shakespeare() is not None:
        return None

    def fetch():
        from ..data.corpus import CorpusError, fetch_shakespeare

        try:
            path = fetch_shakespeare()
        except (CorpusError, OSError) as e:
            print(f"warning: no held-out text for the Shakespeare checkpoints, so Inspect's validation figures "
                  f"stay empty: {e}", file=sys.stderr)
            return
        print(f"downloaded Tiny Shakespeare's held-out text to {path} (sha256 checked)", file=sys.stderr)

    thread = threading.Thread(target=fetch, name="fetch-held-out", daemon=True)
    thread.start()
    if args.num_procs > 1:  # the processes fork once the port is bound: never with a thread mid-download
        thread.join()
    return thread


def limit_env(args) -> None:
    """Every session's limits (add_limit_arguments), in the variables limits.Limits.from_env reads: a
    flag wins over the variable already set, which wins over the default."""
    from dataclasses import replace

    from ..dashboard.runtime.limits import FLAGS, Limits

    given = {name: getattr(args, flag[2:].replace("-", "_"), None) for name, flag in FLAGS.items()}
    limits = replace(Limits.from_env(), **{k: v for k, v in given.items() if v is not None})
    os.environ.update(limits.to_env())


def main(args) -> int:
    check_args(args)
    import panel as pn
    import torch

    from ..dashboard.app import TITLE, create_app, served_args

    from ..devices import serving_threads

    from ..dashboard import checkpoints

    torch.set_num_threads(args.threads or serving_threads())
    session_defaults(args)
    fetch_held_out(args)
    if args.models:
        checkpoints.list_models(args.models, hf_options(args))
    opts = server_options(args)
    forked, parent = args.num_procs > 1, os.getpid()
    try:
        # served_args: a ?checkpoint= in the URL picks the model, as under `panel serve`. Not started here:
        # pn.serve binds the port (or fails) and returns, so the line below is printed only once it listens.
        server = pn.serve({"/": lambda: create_app(**served_args(args.checkpoint, args.device))}, port=args.port,
                          address=args.address, show=not args.no_show and not forked, title=TITLE,
                          start=False, num_procs=args.num_procs, **opts)
        if forked:  # this is one of the forked server processes (the parent waits inside pn.serve)
            run_forked(server, parent, show="" if args.no_show else ("/login" if args.basic_auth else "/"),
                       listening=lambda: announce(args, server.port))
        else:
            announce(args, server.port)
            run_server(server)
    except OSError as e:  # e.g. the port is taken
        raise CLIError(f"cannot serve on {args.address}:{args.port}: {e}") from e
    except KeyboardInterrupt:
        pass
    return 0


def announce(args, port: int) -> None:
    """The "serving ..." line, with the port actually bound (--port 0 picks a free one): printed only once
    the server listens, so a taken port or a bad address is the only line, not a claim then an error."""
    login = " (login required)" if args.basic_auth else ""
    procs = f" from {args.num_procs} processes" if args.num_procs > 1 else ""
    print(f"serving the dashboard on http://{args.address}:{port}/{procs}{login} (Ctrl-C to stop)", file=sys.stderr)


def run_server(server) -> None:
    """Serve in this process until Ctrl-C: what pn.serve(start=True) does after binding (its SIGINT
    handler stops the loop)."""
    server.start()
    try:
        server.io_loop.start()
    except RuntimeError:  # the loop is already running (as pn.serve, which ignores it too)
        pass


def run_forked(server, parent: int, show: str, listening=None) -> None:
    """Serve in one forked process until Ctrl-C. It dies with the parent: Tornado's parent waits for
    its children and restarts a crashed one, but a `kill` of the parent alone would leave them
    serving, holding the port. The first process opens the browser (`show`: the path, "" for none)
    and calls `listening` (the port is bound before the fork, and the parent never returns to say so).

    No model, device queue or worker thread exists before the fork: the dashboard makes each on a
    process's first session (tests/integration/test_serve_procs.py)."""
    import signal

    from tornado.process import task_id

    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent:  # the parent died before prctl took effect
        sys.exit(0)
    if task_id() == 0 and listening is not None:
        listening()
    if show and task_id() == 0:
        server.io_loop.add_callback(server.show, show)
    server.start()
    server.io_loop.start()  # until pn.serve's SIGINT handler stops it
