"""The package map of docs/design.md, regenerated from each module's docstring: `python tools/package_map.py` prints it.

`--write` rewrites the "## Package map" section of docs/design.md in place; `--check` exits 1 when the page
differs (tests/unit/tools/test_package_map.py runs that check, so a module moved or added without its map line fails the
tests). The map is a tree: run.py, then explorer/ with one line per module and per package (a package's line is
its `__init__.py`'s), then the other top-level folders. Each line is the whole first sentence of the docstring,
however many lines it spans, never a cut.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = Path("docs") / "design.md"
SECTION = "## Package map"
PACKAGE = "explorer"  # the tree's package; run.py is listed above it
INDENT = "    "  # Python-Markdown nests a list item indented by four spaces
# Entries with no docstring to read: described here.
FIXED = ("- `benchmarks/` — speed and memory figures, each a script that prints a table (see Benchmarks).",
         "- `tools/` — scripts that choose a checkpoint's sampler defaults, make a checkpoint's recorded commands "
         "rerunnable before it is shipped, retake the tour's screenshots, write the teaching page and the README's lesson index from the lessons, and write this map.",
         "- `tests/` — pytest suite: `unit/` mirrors the package, `integration/` starts processes, clusters and "
         "servers, `browser/` drives Chromium, `support/` holds what they share (tiny models built in the tests; "
         "`unit/test_shipped_checkpoints.py` checks the shipped checkpoints).",
         "- `checkpoints/` — the shipped models (safetensors + JSON metadata).",
         "- `assets/` — the dashboard screenshot, the tour's screenshots and the figures with their CSVs.",
         "- `docs/` — this site (`mkdocs build --strict`).",
         "- `.ci/run` — CI: installs torch (CPU), the package with test extras and Chromium, then runs the tests.")
# A full stop after these does not end a sentence.
ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "cf.", "approx.")


class MapError(ValueError):
    """A module the map cannot describe; the message names the file and what to fix."""


def first_sentence(doc: str, where: str) -> str:
    """The first sentence of a docstring's first paragraph, its lines joined.

    Args:
        doc: the docstring.
        where: the file it comes from, for the error message.
    Returns:
        The text up to the first '.', '!' or '?' followed by a space or the paragraph's end (not inside
        `code`, not after an abbreviation).
    Raises:
        MapError: the first paragraph has no such stop.
    """
    paragraph = " ".join(line.strip() for line in doc.strip().split("\n\n")[0].splitlines())
    outside_code = re.sub(r"`[^`]*`", lambda m: "_" * len(m.group()), paragraph)  # same length, no stops
    for stop in re.finditer(r"[.!?](?=\s|$)", outside_code):
        if not paragraph[:stop.end()].lower().endswith(ABBREVIATIONS):
            return paragraph[:stop.end()]
    raise MapError(f"{where}: the docstring's first paragraph is not a sentence (no full stop): {paragraph!r}; "
                   "end its first sentence with one")


def module_paths(root: Path = ROOT) -> list[Path]:
    """The files the map describes, relative to `root`: run.py (if present), then every module of the package
    in alphabetical order of their paths."""
    paths = sorted((p.relative_to(root) for p in (root / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts),
                   key=lambda p: p.as_posix())
    return ([Path("run.py")] if (root / "run.py").exists() else []) + paths


def describe(root: Path, path: Path) -> str:
    """The first sentence of the module docstring of `root / path`."""
    doc = ast.get_docstring(ast.parse((root / path).read_text(encoding="utf-8")))
    if not doc:
        raise MapError(f"{path.as_posix()} has no module docstring; begin it with one sentence saying what it is")
    return first_sentence(doc, path.as_posix())


def tree_line(path: Path, text: str) -> str:
    """One item of the tree: indented by its depth, a package named by its folder (its `__init__.py`)."""
    parts = path.parts[:-1] if path.name == "__init__.py" else path.parts
    name = parts[-1] + ("/" if path.name == "__init__.py" else "")
    return f"{INDENT * (len(parts) - 1)}- `{name}` — {text}"


def package_map(root: Path = ROOT) -> list[str]:
    """The section's lines: run.py, the package as a tree (each folder's line before its contents), then the
    fixed entries.

    Args:
        root: the repository.
    Returns:
        The markdown lines, one per module or package, in the order a reader walks the tree.
    """
    return [tree_line(p, describe(root, p)) for p in module_paths(root)] + list(FIXED)


def section_span(text: str) -> tuple[int, int]:
    """(start, end) of the map's lines in the page's text: from the section's first list item (after the
    paragraphs that introduce it) up to the next heading of its level."""
    head = re.search(rf"^{re.escape(SECTION)}\n\n", text, flags=re.M)
    if head is None:
        raise MapError(f"{PAGE.as_posix()} has no '{SECTION}' section")
    following = re.compile(r"^## ", flags=re.M).search(text, head.end())
    end = following.start() if following else len(text)
    first_item = re.compile(r"^- ", flags=re.M).search(text, head.end(), end)
    return (first_item.start() if first_item else end), end


def page_map(page: Path) -> list[str]:
    """The map lines the page holds now."""
    text = page.read_text(encoding="utf-8")
    start, end = section_span(text)
    return text[start:end].strip("\n").splitlines()


def write_map(page: Path, lines: list[str]) -> bool:
    """Replace the section's lines; True when the file changed."""
    text = page.read_text(encoding="utf-8")
    start, end = section_span(text)
    new = text[:start] + "\n".join(lines) + "\n" + ("\n" if end < len(text) else "") + text[end:]
    if new != text:
        page.write_text(new, encoding="utf-8")
    return new != text


def main(argv=None) -> int:
    """Print, write or check the map; returns the exit status (0, 1 for a stale page, 2 for an error)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help=f"rewrite the section of {PAGE.as_posix()} in place")
    p.add_argument("--check", action="store_true", help=f"exit 1 when {PAGE.as_posix()}'s map is out of date")
    p.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = p.parse_args(argv)
    try:
        lines, page = package_map(args.root), args.root / PAGE
        if args.write:
            print(f"{page}: {'rewritten' if write_map(page, lines) else 'already up to date'}")
        elif args.check:
            if page_map(page) != lines:
                print(f"{page}: the package map is out of date; run: python tools/package_map.py --write",
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
