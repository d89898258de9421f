"""The README stays a short front page whose links all resolve, and the serving page documents every flag of
`python run.py serve`. (The documentation site's strict, offline build: tests/integration/test_docs_build.py.)"""
from __future__ import annotations

import argparse
import re

from explorer.cli import serve
from tests.support import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_LINES, MAX_BYTES = 250, 25 * 1024
# The set-up a reader copies: kept exactly as .ci/run and the docs give them.
COMMANDS = ('pip install torch==2.13.0 -e . && python run.py',
            'pip install -e ".[test]" && python -m pytest -n 3',
            'python -m pytest -n 2 -m "not slow and not browser"')
FULL_SUITE = COMMANDS[1].split(" && ")[1]  # what CI runs after installing
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target) and ![alt](target)


def relative_links(text: str) -> list[str]:
    """The link targets in markdown `text` that point into the repository (no scheme, not a bare #anchor)."""
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, flags=re.I) and not t.startswith("#")]


def test_the_readme_is_a_short_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    assert len(text.encode("utf-8")) <= MAX_BYTES
    for command in COMMANDS:
        assert command in text, command


def test_ci_and_the_docs_give_the_readmes_commands():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = [line for line in lines if line and not line.startswith("#")]
    assert commands[-1] == FULL_SUITE  # CI ends with the README's test command, as a reader runs it
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert [command for command in COMMANDS if command not in index] == []


def test_every_relative_link_in_the_readme_resolves():
    links = relative_links(README.read_text(encoding="utf-8"))
    assert "assets/dashboard.png" in links and "docs/teaching.md" in links
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_link_finder_sees_what_a_reader_follows():
    text = ('See [a](docs/a.md#part), ![b](assets/b.png "title"), [web](https://example.org), '
            '[mail](mailto:x@y.z), [here](#setup) and <http://localhost:5006/>.')
    assert relative_links(text) == ["docs/a.md#part", "assets/b.png"]


def serve_flags() -> list[str]:
    """Every option of `python run.py serve`, as its usage line lists them (help apart)."""
    parser = argparse.ArgumentParser(prog="python run.py serve")
    serve.add_arguments(parser)
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", parser.format_usage())) - {"--help"})


def test_the_serving_page_documents_every_serve_flag():
    flags = serve_flags()
    assert {"--basic-auth", "--num-procs", "--threads", "--port"} <= set(flags)
    page = (DOCS / "serving.md").read_text(encoding="utf-8")
    undocumented = [flag for flag in flags if not re.search(rf"`{re.escape(flag)}[ `=\\]", page)]
    assert not undocumented, f"docs/serving.md does not document: {undocumented}"
