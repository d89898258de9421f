"""`python run.py rehearse`'s report over several figures, without a server or a browser: the rows come in
the order the selection names the figures (each named lesson#index), in the printed table, report.json
and report.md alike, and the summary line and the exit status count every row. tests/browser/test_rehearse.py
rehearses one figure for real (its pages, screenshots and layout check)."""
from __future__ import annotations

import contextlib
import json

from explorer.cli import main as cli_main
from explorer.cli import rehearse
from explorer.dashboard import lessons


def fake_rehearsal(monkeypatch, results: dict[str, str]) -> list:
    """rehearse.main with no server or Chromium; each figure's row says the result `results` gives its
    name. Returns the list of the items rehearsed, in the order they were."""
    seen = []

    @contextlib.contextmanager
    def server(args, out):
        yield "http://localhost:5006/", None

    @contextlib.contextmanager
    def chromium():
        yield object()

    def rehearse_or_fail(browser, base, item, args, out, log, login):
        seen.append(item)
        outcome = results[item.name]
        pages = [{"label": label, "outcome": outcome, "seconds": None if outcome == "hung" else 1.5,
                  "status": "loading", "unchanged": 9.0, "problems": [], "shot": "", "layout": None}
                 for label in ("1st", "2nd", "at once 1", "at once 2", "at once 3")]
        return {"number": item.number, "figure": item.name, "section": item.section, "tab": item.tab,
                "url": base + "?" + item.query, "result": outcome, "layout": "-", "server": [], "pages": pages}

    monkeypatch.setattr(rehearse, "server", server)
    monkeypatch.setattr(rehearse, "chromium", chromium)
    monkeypatch.setattr(rehearse, "rehearse_or_fail", rehearse_or_fail)
    return seen


def figure(lesson: str, tab: str):
    return next(f for f in lessons.all_figures() if f.lesson == lesson and f.tab == tab)


def test_rows_follow_the_selection_in_the_table_and_both_reports(tmp_path, capsys, monkeypatch):
    # named against the lessons' own order, and of two tabs
    figures = [figure("sampling-strategies", "Compare"), figure("forward-process", "Model")]
    names = [f"{f.lesson}#{f.index}" for f in figures]
    seen = fake_rehearsal(monkeypatch, dict.fromkeys(names, "completed"))
    rc = cli_main(["rehearse", "--figures", ",".join(f"{f.lesson}:{f.index}" for f in figures),
                   "--out", str(tmp_path)])
    printed = capsys.readouterr().out.splitlines()
    assert [i.figure for i in seen] == figures and [i.number for i in seen] == [1, 2]
    assert [i.tab for i in seen] == ["Compare", "Model"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["figure"] for r in report["figures"]] == names
    table = [line for line in printed if line.split()[:1] in (["1"], ["2"])]
    assert [line.split()[1] for line in table] == names
    md = (tmp_path / "report.md").read_text()
    assert md.index(names[0]) < md.index(names[1])
    assert "2 links, 2 completed, 0 hung, 0 failed" in printed[-1] and report["summary"] == printed[-1]
    assert rc == 0


def test_one_hung_figure_is_counted_and_fails_the_command(tmp_path, capsys, monkeypatch):
    figures = [figure("forward-process", "Model"), figure("sampling-strategies", "Compare")]
    names = [f"{f.lesson}#{f.index}" for f in figures]
    fake_rehearsal(monkeypatch, {names[0]: "completed", names[1]: "hung"})
    rc = cli_main(["rehearse", "--figures", ",".join(f"{f.lesson}:{f.index}" for f in figures),
                   "--out", str(tmp_path)])
    printed = capsys.readouterr().out.splitlines()
    assert "2 links, 1 completed, 1 hung, 0 failed" in printed[-1]
    assert [r["result"] for r in json.loads((tmp_path / "report.json").read_text())["figures"]] == ["completed", "hung"]
    assert rc == 1
