"""docs/teaching.md and the README's lesson index, written from the one lesson source
(explorer/dashboard/lessons.py) and the tour's table (tools/tour.py).

    python tools/lessons_doc.py            # print docs/teaching.md
    python tools/lessons_doc.py --write    # rewrite docs/teaching.md and the README's "## The lessons"
    python tools/lessons_doc.py --check    # exit 1 when either differs from what the source gives

tests/unit/tools/test_lessons_doc.py runs the check, so a lesson edited in one place only fails the tests.
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer.dashboard.lessons import LESSONS, Figure, Lesson, figure_url, query_url  # noqa: E402

PAGE = ROOT / "docs" / "teaching.md"
README = ROOT / "README.md"
README_SECTION = "## The lessons"
WIDTH = 110  # the README's line width

INTRO = (
    "The dashboard reproduces, live, the figures and printed results of five teaching documents: four notebooks "
    "and a long-form guide. Each lesson below lists them section by section (§ is the section number in the "
    "notebook), with the dashboard view that shows the same thing, what to notice in it, where the shipped model "
    "disagrees with the document, and a link that opens it: the checkpoint, the knobs and the tab are set, and "
    "the tab computes its result by itself. A tour of the five tabs closes the page.")

OPENING = (
    "`python run.py` serves the dashboard at http://localhost:5006/. Each link below opens the live version of "
    "one figure or printed result in lesson mode: a bar above the tabs names the lesson, the figure (n of N), "
    "what it shows, what to notice and, marked **Differs**, where this model disagrees with the document; "
    "**Previous** / **Next** or the Left / Right arrow keys open the neighbouring figure's link, and **Lessons** in "
    "the page's header lists the five lessons. Add `&presentation=true` to any link to enlarge the type for a "
    "projector: the sidebar then starts collapsed (☰ opens it), Inspect, Compare and Sweep show their figures "
    "above their controls, and Previous / Next keep it on.")

RULES = (
    "Where a section needs one more click (a **Run** button), the cell says so. Generation links use "
    "`schedule=remaining`, the notebooks' own unmasking rule (each step commits what is still masked divided by "
    "the steps remaining). On `shakespeare` they also set `strategy=confidence`, because that checkpoint opens "
    "with its recommended random order, T 0.8 and 64 steps. `patterns` opens at its own recommendation, margin "
    "order, T 0.7 and 10 steps: its links set the notebook's `temperature=1.0` and, where the sidebar's order is "
    "the one drawn, `strategy=confidence`. \"One sample per run\" means that **New seed** in the sidebar draws the "
    "next sample. The notice and differs lines were measured on the shipped checkpoints (16 samples per setting "
    "where they quote generated text's figures; the sweeps are those of [Results](results.md)).")


def anchor(title: str) -> str:
    """The heading's anchor as MkDocs (Python-Markdown's toc) makes it."""
    slug = re.sub(r"[^\w\s-]", "", title).strip().lower()
    return re.sub(r"[-\s]+", "-", slug)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def figure_row(fig: Figure) -> str:
    notice = fig.notice + (f" **Differs:** {fig.differs}" if fig.differs else "")
    links = [f"[{fig.label}]({figure_url(fig)})"]
    links += [f"[{label}]({query_url(fig, query)})" for label, query in fig.variants]
    return f"| {_cell(f'{fig.section} {fig.shows}')} | {_cell(fig.view)} | {_cell(notice)} | {' · '.join(links)} |"


def lesson_section(item: Lesson) -> list[str]:
    return [f"## {item.title}", "", f"*{item.document}*: {item.summary}.", "", item.checkpoint_note, "",
            "| notebook figure / result | live counterpart | what to notice | link |", "|---|---|---|---|",
            *(figure_row(fig) for fig in item.figures), ""]


def _tour():
    spec = importlib.util.spec_from_file_location("tools_tour", Path(__file__).resolve().parent / "tour.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # tools/ holds scripts
    spec.loader.exec_module(module)
    return module


def teaching_page() -> str:
    """docs/teaching.md."""
    lines = ["# Teaching", "", INTRO, "", "| lesson | what it teaches |", "|---|---|",
             *(f"| [{item.title}](#{anchor(item.title)}) | {item.summary} |" for item in LESSONS), "",
             "## Opening the links", "", OPENING, "", RULES, ""]
    for item in LESSONS:
        lines += lesson_section(item)
    return "\n".join(lines) + "\n" + _tour().markdown().rstrip("\n") + "\n"


def readme_section() -> str:
    """The README's "## The lessons": the five lessons, one line each, and where every figure is."""
    intro = ("The dashboard reproduces, live, the figures of five teaching documents. **Lessons** in its header "
             "opens each in lesson mode: a bar above the tabs says what the figure shows, what to notice and where "
             "this model differs, with Previous / Next (or the arrow keys). [Teaching](docs/teaching.md) lists "
             "every figure with its link:")
    lines = [README_SECTION, "", textwrap.fill(intro, WIDTH), ""]
    lines += [textwrap.fill(f"- [{item.title}](docs/teaching.md#{anchor(item.title)}): {item.summary}.", WIDTH,
                            subsequent_indent="  ", break_on_hyphens=False) for item in LESSONS]
    return "\n".join(lines) + "\n"


def with_readme_section(readme: str) -> str:
    """`readme` with its "## The lessons" section (up to the next "## ") replaced by readme_section()."""
    start = readme.index(README_SECTION + "\n")
    end = readme.find("\n## ", start + len(README_SECTION))
    end = len(readme) if end < 0 else end + 1
    return readme[:start] + readme_section() + "\n" + readme[end:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite docs/teaching.md and the README section")
    group.add_argument("--check", action="store_true", help="exit 1 when either differs from the source")
    args = parser.parse_args(argv)
    page, readme = teaching_page(), README.read_text(encoding="utf-8")
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
        README.write_text(with_readme_section(readme), encoding="utf-8")
        return 0
    if args.check:
        stale = [str(p.relative_to(ROOT)) for p, ok in ((PAGE, PAGE.read_text(encoding="utf-8") == page),
                                                          (README, with_readme_section(readme) == readme)) if not ok]
        for path in stale:
            print(f"error: {path} differs from explorer/dashboard/lessons.py: run python tools/lessons_doc.py --write",
                  file=sys.stderr)
        return 1 if stale else 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
