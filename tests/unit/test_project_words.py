"""The project speaks of itself: no tracked text file explains a choice by pointing at a tracker issue, a
numbered session or round of work, a teaching notebook's file number ("seed 001") instead of its title, or
the machine some work happened to run on. Each rule names what it refuses; the why belongs in the text."""
from __future__ import annotations

import re
import subprocess

import pytest

from tests.support import ROOT

# name -> (pattern, what to write instead). Case-insensitive; "session" alone is a word of the project (a
# browser session, `--sessions N`), as are "this session's" results, a load test's rounds (`--rounds N`) and
# a run that borrows the device (the queue lends it between steps).
RULES = {
    "a tracker issue": (r"\bissues?\s+#?\d+|\bissue\s+#\d+|\bissues?\s+\d+\s*(?:,|and|&)\s*\d+",
                        "say what the change fixes or guards against"),
    "a numbered session": (r"\bsession\s+#?\d+\b|\bsession's\s+(?:machine|box|gpu)\b",
                           "say what was done, not when"),
    "a numbered round of work": (r"\bround\s+#?\d+\b|\bround\s+of\s+(?:work|review|fixes|changes)\b",
                                 "say what was done, not when"),
    "a notebook by its file number": (r"(?<![a-z0-9])seeds?[\s_-]?0\d\d(?!\d)",
                                      "name the notebook by its title, e.g. \"Sampling Strategies & Speed Tradeoffs\""),
    "a borrowed machine": (r"\b(?:borrowed|lent|leased|loaned)\s+(?:\w+\s+)?(?:machines?|gpus?|boxes|box|hosts?|"
                           r"accelerators?)\b|\bmachines?\s+(?:lent|borrowed|on loan)\b",
                           "say what hardware a figure needs, not whose it was"),
    "narration of where it ran": (r"\bthis (?:machine|box|laptop|container|sandbox|vm)\b|\bmeasured here\b|"
                                  r"\b(?:measured|timed|benchmarked) (?:only )?(?:here|locally)\b",
                                  "state the figure with its conditions (e.g. \"on a 2-core CPU\")"),
}
COMPILED = {name: re.compile(pattern, re.IGNORECASE) for name, (pattern, _) in RULES.items()}


def tracked_text_files() -> dict[str, str]:
    """{path: text} of every file git tracks (and every new one it does not ignore) that reads as UTF-8 text."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout
    out = {}
    for name in sorted({n for n in listed.decode("utf-8", "surrogateescape").split("\0") if n}):
        path = ROOT / name
        if not path.is_file():
            continue  # deleted in the working tree
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (images, checkpoints)
        try:
            out[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return out


def hits(text: str) -> list[tuple[int, str, str]]:
    """(line number, rule, the words) of every match in `text`."""
    found = []
    for name, pattern in COMPILED.items():  # the whole text at once: a line-by-line scan costs 4x more
        found += [(text.count("\n", 0, m.start()) + 1, name, m.group(0)) for m in pattern.finditer(text)]
    return sorted(found)


def test_the_project_speaks_of_itself():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    files = tracked_text_files()
    assert "README.md" in files and "tests/unit/test_project_words.py" in files
    found = [f"{path}:{n}: {name}: {words!r} ({RULES[name][1]})" for path, text in files.items()
             for n, name, words in hits(text) if path != "tests/unit/test_project_words.py"]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text, rule", [
    ("fixed in issue 12", "a tracker issue"), ("see issue #7", "a tracker issue"), ("Issues 6 and 7", "a tracker issue"),
    ("(issue 15, item 3)", "a tracker issue"), ("measured in session 4", "a numbered session"),
    ("on the session's machine", "a numbered session"), ("done in round 2", "a numbered round of work"),
    ("the second round of fixes", "a numbered round of work"), ("seed 000's sweep", "a notebook by its file number"),
    ("seed-003.ipynb", "a notebook by its file number"), ("the seeds 002, 003, 004", "a notebook by its file number"),
    ("SEED000 = {}", "a notebook by its file number"), ("def test_lr_of_seed_002():", "a notebook by its file number"),
    ("on a borrowed GPU machine", "a borrowed machine"),
    ("the lent machine", "a borrowed machine"), ("on this machine it takes 3 s", "narration of where it ran"),
    ("(measured here)", "narration of where it ran"), ("it was timed locally", "narration of where it ran"),
])
def test_each_rule_sees_what_it_refuses(text, rule):
    assert rule in {name for _, name, _ in hits(text)}, text


@pytest.mark.parametrize("text", [
    "a browser session", "each session keeps its knobs", "this session's other results", "--sessions 8 30",
    "python benchmarks/bench_hf.py --rounds 3", "the round reports its clicks", "SamplerConfig(seed=0)",
    "--seed 42", "seeds 0-4 of the sweep", "a tissue of lies", "round(x, 3)", "the device's own precision",
    "issues a warning", "the machine's cores are shared", "here is the list", "no code from the model runs here",
    "another session's run borrowed the device", "the queue lends the device to runs",
])
def test_the_project_s_own_words_pass(text):
    assert hits(text) == [], text
