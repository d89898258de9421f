"""`python run.py rehearse` without a browser: which figures a selection names, its refusals (one `error:`
line, exit 2), the server log's errors told from a closed page's noise, and how a hung page is reported.
tests/browser/test_rehearse.py runs a sample of the rehearsal itself."""
from __future__ import annotations

import pytest

from explorer.cli import build_parser, main as cli_main
from explorer.cli.rehearse import format_row, note, select, server_problems
from explorer.dashboard import lessons


def chosen(*argv):
    return select(build_parser().parse_args(["rehearse", *argv]))


def test_every_figure_by_default_and_the_lessons_figures_and_variants_asked_for():
    assert [i.figure for i in chosen()] == lessons.all_figures()
    first = lessons.LESSONS[0]
    picked = chosen("--lessons", first.slug, "--figures", "2-3,1")
    assert [i.figure.index for i in picked] == [2, 3, 1] and [i.number for i in picked] == [1, 2, 3]
    other = lessons.LESSONS[1]
    assert [i.figure for i in chosen("--figures", f"{other.slug}:2")] == [other.figures[1]]
    with_variants = chosen("--lessons", first.slug, "--variants")
    assert len(with_variants) == sum(1 + len(f.variants) for f in first.figures)


def test_a_sample_has_every_tab_before_any_tab_twice():
    tabs = {f.tab for f in lessons.all_figures()}
    sample = chosen("--sample", str(len(tabs)))
    assert {i.tab for i in sample} == tabs
    assert len(chosen("--sample", "9")) == 9


@pytest.mark.parametrize("argv, words", [
    (["--lessons", "no-such-lesson"], "--lessons"),
    (["--figures", "0"], "--figures"),
    (["--figures", "3-1"], "--figures"),
    (["--figures", "nowhere:1"], "--figures"),
    (["--sample", "0"], "--sample"),
    (["--timeout", "nan"], "--timeout"),
    (["--password", "secret"], "--password"),
    (["--base-url", "localhost:5006"], "--base-url"),
    (["--base-url", "http://localhost:5006/", "--port", "7000"], "--port"),
    (["--serve-args", "'unclosed"], "--serve-args"),
])
def test_bad_arguments_are_one_error_line(argv, words, capsys):
    assert cli_main(["rehearse", *argv, "--list"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and words in err and len(err.splitlines()) == 1


def test_a_rehearsal_that_never_started_leaves_no_empty_folder(tmp_path, monkeypatch, capsys):
    """A server that does not answer is one error line; the dated report folder made for it goes again."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    assert cli_main(["rehearse", "--base-url", f"http://127.0.0.1:{port}/", "--sample", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --base-url") and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_list_numbers_the_selection(capsys):
    assert cli_main(["rehearse", "--lessons", lessons.LESSONS[0].slug, "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(lessons.LESSONS[0].figures) and lines[0].split()[0] == "1"


def test_server_errors_but_not_a_closed_pages_noise(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("INFO:old:before the figure\n")
    offset = log.stat().st_size
    with open(log, "a") as f:
        f.write("WARNING:bokeh.server.views.ws:Failed sending message as connection was closed\n"
                "ERROR:bokeh.server.protocol_handler:error handling message\n error: AssertionError()\n"
                "Traceback (most recent call last):\n    assert self._session is not None\nAssertionError\n"
                "ERROR:explorer.dashboard:inspect failed\nTraceback (most recent call last):\nValueError: bad\n"
                "WARNING:explorer:a warning is no failure\n")
    assert server_problems(log, offset) == ["ERROR:explorer.dashboard:inspect failed"]
    assert server_problems(None, 0) == []


def page(label, outcome, seconds=None, status="", unchanged=0.0, problems=()):
    return {"label": label, "outcome": outcome, "seconds": seconds, "status": status, "unchanged": unchanged,
            "problems": list(problems), "shot": ""}


def test_a_hung_page_quotes_the_header_and_how_long_it_stood():
    pages = [page("1st", "completed", 3.0), page("2nd", "completed", 1.0),
             page("at once 1", "hung", status="patterns loaded · sampling 10 steps …", unchanged=290.0),
             page("at once 2", "completed", 4.0), page("at once 3", "error", 5.0, problems=["console: boom"])]
    row = {"number": 1, "figure": "generation#2", "section": "§4.3", "tab": "Explore", "result": "hung",
           "server": [], "pages": pages}
    assert note(row) == ("at once 1: no result after the timeout; the header said "
                         "'patterns loaded · sampling 10 steps …' for the last 290 s")
    line = format_row(row)
    assert "3.0" in line and "1.0" in line and "- 4.0 5.0" in line and "hung" in line


def test_the_layout_column_names_the_first_page_that_failed_the_projector_check():
    from explorer.cli.rehearse import layout_word
    from explorer.dashboard.projector import judge

    ok = judge({"parts": 1, "top": 200, "bottom": 500, "left": 10, "right": 900, "main": [1366, 1366],
                "page": [1366, 1366], "boxes": [], "reading": [], "cut": []}, 1366, 768)
    low = judge({**{"parts": 5, "top": 200, "bottom": 1080, "left": 10, "right": 1300, "main": [1366, 1366],
                    "page": [1366, 1366], "boxes": [], "reading": [], "cut": []}}, 1366, 768)
    pages = [{**page("1st", "completed", 3.0), "layout": ok},
             {**page("2nd", "error", 1.0, problems=[f"layout: {low['problems'][0]}"]), "layout": low}]
    assert layout_word(pages) == "off-screen"
    assert layout_word(pages[:1]) == "ok" and layout_word([page("1st", "hung")]) == "-"
    row = {"number": 2, "figure": "generation#4", "section": "§4.5", "tab": "Compare", "result": "error",
           "layout": layout_word(pages), "server": [], "pages": pages}
    assert "off-screen" in format_row(row)
    assert note(row).startswith("2nd: layout: the figure spans 200-1080 px")
