"""Command-line entry: `python run.py [serve|train|sample|sweep|evaluate|rehearse] ...`.

Each subcommand lives in its own module with `add_arguments(parser)` and `main(args) -> int`;
modules are imported lazily so `python run.py --help` stays fast. With no subcommand, `serve`
(the dashboard) runs.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import struct
import sys
import tempfile
from pathlib import Path

SUBCOMMANDS = {
    "serve": "Serve the dashboard (the default when no command is given).",
    "train": "Train a diffusion model or the AR baseline and save a checkpoint.",
    "sample": "Generate text from a checkpoint with any sampler knobs.",
    "sweep": "Quality and speed vs steps / strategy, as a CSV table and a plot.",
    "evaluate": "NELBO, accuracy vs masking ratio and sample quality of a checkpoint.",
    "rehearse": "Open every lesson figure's link in Chromium, twice and three at once, and report each.",
}


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one `error: ...` line like every other CLI error, not the whole
    usage block (which, with all the sampler knobs, pushes the actual message off the screen)."""

    def error(self, message):
        self.exit(2, f"error: {one_line(message)} (see `{self.prog} --help`)\n")


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
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse's own error line (or --help): its status, like every other outcome
        return e.code if isinstance(e.code, int) else 0
    return report_errors(importlib.import_module(f"explorer.cli.{args.command}").main, args)


def report_errors(main, args) -> int:
    """main(args), a CLIError printed as one `error: ...` line with exit status 2 (the tools' scripts too)."""
    try:
        return main(args)
    except CLIError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2


def one_line(text) -> str:
    """`text` with every character that is not printable escaped (newlines, control characters, line
    separators): a message quoting a user's input, or a path holding such characters, stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


# ---------------------------------------------------------------------------------- argument types
# Every command's numeric flags are parsed by these, so a value out of range is argparse's one
# `error: argument --flag: ...` line (exit 2) before anything is loaded, never a traceback mid-run.

def _span(lo: int, hi: int | None) -> str:
    return f">= {lo}" if hi is None else f"in [{lo}, {hi}]"


def int_in(lo: int, hi: int | None = None):
    """An argparse `type`: a whole number in [lo, hi] (no upper end when hi is None).

    Args:
        lo, hi: the bounds, both included.
    Returns:
        a function str -> int raising argparse.ArgumentTypeError with the range in its message.
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected an integer {_span(lo, hi)}, got {text!r}")
        return value

    return parse


def float_in(lo: float = -math.inf, hi: float = math.inf, brackets: str = "[]"):
    """An argparse `type`: a finite number between lo and hi; `brackets` says which ends are included
    ("[]", "(]", "[)" or "()"). NaN, infinities and subnormal numbers (|x| < 2.2e-308, which no setting
    means, and which turn a division into an overflow) are refused whatever the bounds.

    Returns:
        a function str -> float raising argparse.ArgumentTypeError with the range in its message.
    """
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        above = value > lo if brackets[0] == "(" else value >= lo
        below = value < hi if brackets[1] == ")" else value <= hi
        subnormal = _is_subnormal(value)
        if not (math.isfinite(value) and above and below) or subnormal:
            what = "a finite number" + ("" if math.isinf(lo) and math.isinf(hi) else
                                        f" in {brackets[0]}{lo:g}, {hi:g}{brackets[1]}")
            note = " (too close to 0 to compute with: write 0)" if subnormal else ""
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}{note}")
        return value

    return parse


def _is_subnormal(value: float) -> bool:
    # from the bits (zero exponent, non-zero fraction), not `0 < abs(value) < 2.2e-308`: torch's flush-denormal
    # mode (training on the CPU sets it) makes the processor read a subnormal operand as 0 in that comparison
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return (bits >> 52) & 0x7FF == 0 and bits & ((1 << 52) - 1) != 0


def boolean(text: str) -> bool:
    """An argparse `type`: true/false, yes/no, on/off or 1/0 (anything else is refused, not read as false)."""
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def is_out_of_memory(error: BaseException) -> bool:
    """torch's allocation failures (CPU or CUDA), which the user fixes with smaller sizes, not a bug."""
    return type(error).__name__ == "OutOfMemoryError" or "can't allocate memory" in str(error)


def check_writable(path, flag: str) -> Path:
    """Fail now, not after a long run, when `path` cannot be written: its folder (or the nearest one
    that exists: the missing ones are made when the file is written) must take a new file.

    Args:
        path: the output file.
        flag: the option that named it, for the message.
    Returns:
        path as a Path.
    Raises:
        CLIError naming the flag and why.
    """
    path = Path(path).expanduser()
    if not str(path).strip() or path.name in ("", ".", ".."):
        raise CLIError(f"{flag} {str(path)!r}: not a file name")
    if path.is_dir():
        raise CLIError(f"{flag} {path}: is a directory; give a file name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise CLIError(f"{flag} {path}: {folder} is a file, not a folder")
    try:  # os.access says yes to root even on a read-only file system: try the real thing
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CLIError(f"{flag} {path}: cannot write in {folder} ({e.strerror or e})") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise CLIError(f"{flag} {path}: the file exists and is not writable")
    return path
