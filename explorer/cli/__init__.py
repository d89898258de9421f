"""Command-line entry: `python run.py [serve|train|sample|sweep|evaluate] ...`.

Each subcommand lives in its own module with `add_arguments(parser)` and `main(args) -> int`;
modules are imported lazily so `python run.py --help` stays fast. With no subcommand, `serve`
(the dashboard) runs.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

SUBCOMMANDS = {
    "serve": "Serve the dashboard (the default when no command is given).",
    "train": "Train a diffusion model or the AR baseline and save a checkpoint.",
    "sample": "Generate text from a checkpoint with any sampler knobs.",
    "sweep": "Quality and speed vs steps / strategy, as a CSV table and a plot.",
    "evaluate": "NELBO, accuracy vs masking ratio and sample quality of a checkpoint.",
}


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one `error: ...` line like every other CLI error, not the whole
    usage block (which, with all the sampler knobs, pushes the actual message off the screen)."""

    def error(self, message):
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def _available() -> list[str]:
    return [n for n in SUBCOMMANDS if importlib.util.find_spec(f"explorer.cli.{n}") is not None]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python run.py", description="mdlm-explorer: masked diffusion LMs, live.")
    sub = parser.add_subparsers(dest="command")
    for name in _available():
        p = sub.add_parser(name, help=SUBCOMMANDS[name], description=SUBCOMMANDS[name])
        importlib.import_module(f"explorer.cli.{name}").add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    available = _available()
    default = "serve" if "serve" in available else "sample"
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv = [default, *argv]
    args = build_parser().parse_args(argv)
    return report_errors(importlib.import_module(f"explorer.cli.{args.command}").main, args)


def report_errors(main, args) -> int:
    """main(args), a CLIError printed as one `error: ...` line with exit status 2 (the tools' scripts too)."""
    try:
        return main(args)
    except CLIError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
