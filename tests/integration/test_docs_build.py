"""The documentation site in docs/ builds with `mkdocs build --strict` (every page, link and anchor checked)
without the network, and the strict build does fail on a broken link."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

DOCS = ROOT / "docs"
# A dead proxy: any attempt to fetch during the build fails instead of quietly needing the network.
OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_MKDOCS_2_WARNING": "1"}


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=240,
                          env={**os.environ, **OFFLINE})


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


def test_the_strict_build_fails_on_a_broken_link(tmp_path):
    """The configuration's checks bite: a link to a missing anchor stops the build."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs", symlinks=False)  # the links' targets copied in (assets, results)
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](design.md#no-such-section)\n", encoding="utf-8")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-section" in done.stdout + done.stderr
