"""`python run.py rehearse` on a lesson figure: the first on the shipped `patterns` checkpoint (the smallest)
that opens Inspect with its predictions first, opened twice and then three at once in the command's own
Chromium, on a server the command starts. Every page must complete (the header's data-settled names the
link's tab) with no error, pass the projector layout check (its figure whole in the first screen, nothing
overflowing), and leave a screenshot at projector size.

The pages are the command's whatever the figure, so one figure checks them, and an Inspect link is the one
where opening it again and at once went wrong: the second visit's validation text and predictions come from
the server's caches, and pages opened together once got a patch naming a model they had not been sent
("reference ... isn't known" in the console), after which the page ignored it and kept showing that the
text was loading. A console error is a page's problem, so the rehearsal fails on it. (That a link to
Inspect runs no Explore sample is tests/unit/dashboard/tabs/test_link_opens_its_tab.py's.) The report over
several figures (rows in the selection's order, the summary's counts, the exit status) is
tests/unit/cli/test_rehearse_report.py's, without a browser, and the lesson figures themselves are the
projector and lesson tests'."""
from __future__ import annotations

import json
import struct

import pytest

from explorer.cli import main as cli_main
from explorer.dashboard import lessons

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1800)]  # pages may take --timeout (600 s) each


def first_on_patterns(tab: str, has: str = ""):
    """The first lesson figure on `tab` whose link opens the patterns checkpoint (and holds `has`)."""
    return next(f for f in lessons.all_figures()
                if f.tab == tab and "checkpoint=patterns" in f.query and has in f.query)


def png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_a_sample_of_the_rehearsal_completes_with_a_screenshot_of_every_page(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MDLM_EXPLORER_CHECKPOINTS", raising=False)  # the shipped checkpoints/
    figures = [first_on_patterns("Inspect", "inspect.first=predictions")]
    names = ",".join(f"{f.lesson}:{f.index}" for f in figures)
    rc = cli_main(["rehearse", "--figures", names, "--out", str(tmp_path), "--timeout", "600",
                   "--serve-args", "--threads 1 --no-auto-sweep"])
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "report.json").read_text())
    rows = report["figures"]
    assert [r["figure"] for r in rows] == [f"{f.lesson}#{f.index}" for f in figures]
    for row in rows:
        assert len(row["pages"]) == 5 and all(p["seconds"] and not p["problems"] for p in row["pages"]), printed
        assert row["server"] == [], printed
        assert row["layout"] == "ok", printed  # the projector check (dashboard/projector.py) on every page
        for page in row["pages"]:
            assert png_size(page["shot"]) == (1366, 768)
    assert [r["result"] for r in rows] == ["completed"], printed
    assert rc == 0 and "1 links, 1 completed, 0 hung, 0 failed" in printed.splitlines()[-1]
