"""`python run.py serve` (the default command): serve the dashboard on localhost and open the browser.

Everything the page needs (Bokeh, Panel and template assets) is served by this process, so it works
with no network. The same app is served by `panel serve explorer/dashboard/app.py`.
"""
from __future__ import annotations

import argparse
import sys

from . import CLIError

DEVICES = ("auto", "cpu", "cuda")


def add_arguments(p: argparse.ArgumentParser):
    p.add_argument("--port", type=int, default=5006, help="port to listen on (0 = any free port); default 5006")
    p.add_argument("--address", default="localhost",
                   help="address to listen on; default localhost (use 0.0.0.0 to serve a lab network)")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint name in checkpoints/ to open first (default: shakespeare if present)")
    p.add_argument("--device", default="auto", choices=DEVICES, help="where the sampler runs; default auto")
    p.add_argument("--no-show", action="store_true", help="do not open a browser")
    p.add_argument("--threads", type=int, default=0,
                   help="torch CPU threads (0 = torch's default). Use 1 when other jobs keep every core busy: "
                        "oversubscribed threads can make each model call many times slower")
    p.add_argument("--allow-websocket-origin", action="append", default=None, metavar="HOST[:PORT]",
                   help="extra origins allowed to connect (needed when serving on a non-local address)")


def check_args(args) -> None:
    """Refuse bad arguments before the server starts, with one readable line each."""
    from ..checkpoint import list_checkpoints
    from ..devices import resolve_device

    names = list_checkpoints()
    if args.checkpoint is not None and args.checkpoint not in names:
        raise CLIError(f"no checkpoint named {args.checkpoint!r} in checkpoints/; available: {names or 'none'}")
    if not names:
        print("warning: checkpoints/ is empty; the dashboard will say so. Train one with "
              "`python run.py train --out NAME ...`", file=sys.stderr)
    if not 0 <= args.port <= 65535:
        raise CLIError(f"--port must be in 0..65535, got {args.port}")
    if args.threads < 0:
        raise CLIError(f"--threads must be >= 0, got {args.threads}")
    try:
        resolve_device(args.device)
    except ValueError as e:
        raise CLIError(str(e)) from e


def main(args) -> int:
    check_args(args)
    import panel as pn
    import torch

    from ..dashboard.app import TITLE, create_app

    if args.threads:
        torch.set_num_threads(args.threads)
    origins = args.allow_websocket_origin or None
    print(f"serving the dashboard on http://{args.address}:{args.port}/ (Ctrl-C to stop)", file=sys.stderr)
    try:
        pn.serve({"/": lambda: create_app(checkpoint=args.checkpoint, device=args.device)}, port=args.port,
                 address=args.address, show=not args.no_show, title=TITLE, websocket_origin=origins,
                 start=True)
    except OSError as e:  # e.g. the port is taken
        raise CLIError(f"cannot serve on {args.address}:{args.port}: {e}") from e
    except KeyboardInterrupt:
        pass
    return 0
