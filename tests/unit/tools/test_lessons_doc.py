"""docs/teaching.md and the README's lesson index are what tools/lessons_doc.py makes of the lesson source
(explorer/dashboard/lessons.py): a lesson, figure or link edited in one place only fails here."""
from __future__ import annotations

import importlib.util
import sys

from explorer.dashboard.lessons import all_figures, figure_url
from tests.support import ROOT

_spec = importlib.util.spec_from_file_location("tools_lessons_doc", ROOT / "tools" / "lessons_doc.py")
lessons_doc = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # tools/ holds scripts
_spec.loader.exec_module(lessons_doc)

FIX = "run `python tools/lessons_doc.py --write`"


def test_the_teaching_page_is_generated_from_the_lessons():
    assert (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8") == lessons_doc.teaching_page(), FIX


def test_the_readme_lesson_index_is_generated_from_the_lessons():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert lessons_doc.readme_section() in readme and lessons_doc.with_readme_section(readme) == readme, FIX


def test_the_page_links_every_figure_in_lesson_mode_and_says_where_the_model_differs():
    page = lessons_doc.teaching_page()
    for fig in all_figures():
        assert f"({figure_url(fig)})" in page, (fig.lesson, fig.index)
        assert fig.notice in page and (not fig.differs or f"**Differs:** {fig.differs}" in page)
    assert page.rstrip().endswith(lessons_doc._tour().markdown().rstrip())


def test_the_check_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "teaching.md"
    stale.write_text(lessons_doc.teaching_page().replace("what to notice", "what to see"), encoding="utf-8")
    monkeypatch.setattr(lessons_doc, "PAGE", stale)
    monkeypatch.setattr(lessons_doc, "ROOT", tmp_path)
    assert lessons_doc.main(["--check"]) == 1
    assert "error: teaching.md differs" in capsys.readouterr().err


def test_the_readme_section_ends_where_the_next_begins():
    readme = "# x\n\n## The lessons\n\nold\n\n## Next\n\nkept\n"
    out = lessons_doc.with_readme_section(readme)
    assert out.startswith("# x\n\n## The lessons\n") and out.endswith("\n## Next\n\nkept\n") and "old" not in out
