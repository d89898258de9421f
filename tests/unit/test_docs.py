"""The README stays a short front page whose links all resolve, and the documentation site in docs/ builds with
`mkdocs build --strict` (every page, link and anchor checked) without the network; the serving page documents
every flag of `python run.py serve`."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.cli import serve

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_LINES, MAX_BYTES = 250, 25 * 1024
# The set-up a reader copies: kept exactly as .ci/run and the docs give them.
COMMANDS = ('pip install torch==2.13.0 -e . && python run.py',
            'pip install -e ".[test]" && python -m pytest -n 2',
            'python -m pytest -m "not slow and not browser"')
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target) and ![alt](target)
# A dead proxy: any attempt to fetch during the build fails instead of quietly needing the network.
OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_MKDOCS_2_WARNING": "1"}


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


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=240,
                          env={**os.environ, **OFFLINE})


@pytest.mark.slow
def test_the_site_builds_strictly_and_offline(tmp_path):
    site = tmp_path / "site"
    done = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert done.returncode == 0, done.stdout + done.stderr
    pages = {p.name for p in site.glob("*.html")}
    assert {"index.html", "teaching.html", "serving.html", "huggingface.html", "sweeps.html", "model-card.html",
            "results.html", "design.html", "benchmarks.html"} <= pages
    assert (site / "assets" / "dashboard.png").is_file() and (site / "assets" / "figures" / "patterns.png").is_file()
    for page in site.glob("*.html"):  # nothing the page asks a server for: system fonts, bundled scripts
        html = page.read_text(encoding="utf-8")
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page.name


@pytest.mark.slow
def test_the_strict_build_fails_on_a_broken_link(tmp_path):
    """The configuration's checks bite: a link to a missing anchor stops the build."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs", symlinks=False)  # the links' targets copied in (assets, results)
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](design.md#no-such-section)\n", encoding="utf-8")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-section" in done.stdout + done.stderr
