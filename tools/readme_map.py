"""The README's package map, regenerated from each module's docstring: `python tools/readme_map.py` prints it.

`--write` rewrites the "## Package map" section of README.md in place; `--check` exits 1 when the README differs
(tests/test_readme_map.py runs that check, so a module moved or added without its map line fails the tests).
Each line is the whole first sentence of the module's docstring, however many lines it spans, never a cut.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Package map"
SOURCES = ("benchmarks", "explorer", "tools")  # every .py under these, and run.py
# Entries with no docstring to read: described here.
FIXED = ("- `tests/` — pytest suite (tiny models built in the tests; `test_shipped.py` checks the shipped "
         "checkpoints).",
         "- `checkpoints/` — the shipped models (safetensors + JSON metadata).",
         "- `assets/` — the dashboard screenshot and the README's figures with their CSVs.",
         "- `.ci/run` — CI: installs torch (CPU), the package with test extras and Chromium, then runs the tests.")
# A full stop after these does not end a sentence.
ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "cf.", "approx.")


class MapError(ValueError):
    """A module the map cannot describe; the message names the file and what to fix."""


def first_sentence(doc: str, where: str) -> str:
    """The first sentence of a docstring's first paragraph, its lines joined: a sentence ends at '.', '!'
    or '?' followed by a space or the paragraph's end (not inside `code`, not after an abbreviation)."""
    paragraph = " ".join(line.strip() for line in doc.strip().split("\n\n")[0].splitlines())
    outside_code = re.sub(r"`[^`]*`", lambda m: "_" * len(m.group()), paragraph)  # same length, no stops
    for stop in re.finditer(r"[.!?](?=\s|$)", outside_code):
        if not paragraph[:stop.end()].lower().endswith(ABBREVIATIONS):
            return paragraph[:stop.end()]
    raise MapError(f"{where}: the docstring's first paragraph is not a sentence (no full stop): {paragraph!r}; "
                   "end its first sentence with one")


def module_paths(root: Path = ROOT) -> list[Path]:
    """The files the map describes, relative to `root`, in the map's (alphabetical) order."""
    paths = [p for d in SOURCES for p in (root / d).rglob("*.py") if "__pycache__" not in p.parts]
    paths += [root / "run.py"] if (root / "run.py").exists() else []
    return sorted((p.relative_to(root) for p in paths), key=lambda p: p.as_posix())


def describe(root: Path, path: Path) -> str:
    doc = ast.get_docstring(ast.parse((root / path).read_text(encoding="utf-8")))
    if not doc:
        raise MapError(f"{path.as_posix()} has no module docstring; begin it with one sentence saying what it is")
    return first_sentence(doc, path.as_posix())


def package_map(root: Path = ROOT) -> list[str]:
    """The section's lines: one per module, then the fixed entries."""
    return [f"- `{p.as_posix()}` — {describe(root, p)}" for p in module_paths(root)] + list(FIXED)


def section_span(text: str) -> tuple[int, int]:
    """(start, end) of the map's lines in README text: after the heading's blank line, up to the next heading."""
    head = re.search(rf"^{re.escape(SECTION)}\n\n", text, flags=re.M)
    if head is None:
        raise MapError(f"README.md has no '{SECTION}' section")
    following = re.compile(r"^## ", flags=re.M).search(text, head.end())
    return head.end(), following.start() if following else len(text)


def readme_map(readme: Path) -> list[str]:
    """The map lines the README holds now."""
    text = readme.read_text(encoding="utf-8")
    start, end = section_span(text)
    return text[start:end].strip("\n").splitlines()


def write_map(readme: Path, lines: list[str]) -> bool:
    """Replace the section's lines; True when the file changed."""
    text = readme.read_text(encoding="utf-8")
    start, end = section_span(text)
    new = text[:start] + "\n".join(lines) + "\n" + ("\n" if end < len(text) else "") + text[end:]
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return new != text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="rewrite the section of README.md in place")
    p.add_argument("--check", action="store_true", help="exit 1 when README.md's map is out of date")
    p.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = p.parse_args(argv)
    try:
        lines, readme = package_map(args.root), args.root / "README.md"
        if args.write:
            print(f"{readme}: {'rewritten' if write_map(readme, lines) else 'already up to date'}")
        elif args.check:
            if readme_map(readme) != lines:
                print(f"{readme}: the package map is out of date; run: python tools/readme_map.py --write",
                      file=sys.stderr)
                return 1
        else:
            print("\n".join(lines))
    except MapError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
