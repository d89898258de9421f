"""Make a checkpoint's recorded training commands runnable from a fresh clone before it is shipped in
checkpoints/: the Model tab and the model card show them, and a reader reruns them.

    python tools/ship_checkpoint.py NAME [NAME ...]

A run records its commands as typed, with the paths of the machine that trained it: the data file where
it lay there, an --out or --resume file in a scratch folder. Each command keeps its flags and values;
`--data PATH` becomes the file's name (run.py takes it from the working folder, or downloads Tiny
Shakespeare when the flag is left out), and `--out` / `--resume` name the checkpoint itself (a run and its
resumptions are one checkpoint, whatever file they went through). train_config's `data` becomes the file's
name too. The weights are copied bit for bit (checkpoint.update_metadata).
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path, PurePath

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

OWN = ("--out", "--resume")  # flags whose value is the checkpoint being made


def portable_command(command: str, name: str) -> str:
    """`command` (one `python run.py train ...` line) with --data's path cut to the file's name and --out /
    --resume naming checkpoint `name`; every other word as it was."""
    words = shlex.split(command)
    for i, word in enumerate(words[:-1]):
        if word == "--data":
            words[i + 1] = PurePath(words[i + 1]).name
        elif word in OWN:
            words[i + 1] = name
    return shlex.join(words)


def portable_metadata(meta: dict, name: str) -> dict:
    """The metadata changes that make checkpoint `name`'s commands and data portable (update_metadata's)."""
    changes = {"commands": [portable_command(c, name) for c in meta.get("commands") or []]}
    data = (meta.get("train_config") or {}).get("data")
    if data:
        changes["train_config"] = {"data": PurePath(data).name}
    return changes


def main(argv=None) -> int:
    from explorer.checkpoint import read_metadata, resolve_checkpoint, update_metadata

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="+", help="checkpoints in checkpoints/, by name")
    args = p.parse_args(argv)
    for name in args.names:
        path = resolve_checkpoint(name)
        update_metadata(path, portable_metadata(read_metadata(path), name))
        for command in read_metadata(path)["commands"]:
            print(f"{name}: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
