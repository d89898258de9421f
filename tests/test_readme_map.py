"""The README's package map is what tools/readme_map.py makes of the modules on disk: a module moved,
added or re-described without `python tools/readme_map.py --write` fails here."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("tools_readme_map", ROOT / "tools" / "readme_map.py")
readme_map = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_map)

FIX = "python tools/readme_map.py --write"


def test_the_readme_map_describes_the_modules_on_disk():
    expected, shown = readme_map.package_map(ROOT), readme_map.readme_map(ROOT / "README.md")
    missing = [line for line in expected if line not in shown]
    stale = [line for line in shown if line not in expected]
    assert shown == expected, (f"README.md's package map is out of date; run `{FIX}`.\n"
                               f"missing or changed: {missing}\nno longer true: {stale}")


def test_one_line_per_module_with_its_whole_first_sentence():
    lines = readme_map.package_map(ROOT)
    paths = [p.as_posix() for p in readme_map.module_paths(ROOT)]
    assert "explorer/sampling/sampler.py" in paths and "run.py" in paths and "tools/readme_map.py" in paths
    assert [line.split("`")[1] for line in lines[:len(paths)]] == paths == sorted(paths)
    for line in lines:
        assert line.endswith((".", "!", "?")), line  # never cut mid-sentence


@pytest.mark.parametrize("doc, sentence", [
    ("One line.\n\nMore detail.", "One line."),
    ("A sentence that goes on\nover two lines (e.g. this one). The second.", "A sentence that goes on over two lines "
                                                                              "(e.g. this one)."),
    ("Run `python run.py --help`. Then more.", "Run `python run.py --help`."),
    ("Code with a stop inside `a. b` stays whole. Next.", "Code with a stop inside `a. b` stays whole."),
    ("Quality vs. steps, asked? Yes.", "Quality vs. steps, asked?"),
])
def test_first_sentence(doc, sentence):
    assert readme_map.first_sentence(doc, "m.py") == sentence


def test_a_fragment_or_a_missing_docstring_is_named(tmp_path):
    with pytest.raises(readme_map.MapError, match=r"m\.py: .*\(no full stop\)"):
        readme_map.first_sentence("A first line with no end\n\nThen a paragraph.", "m.py")
    (tmp_path / "explorer").mkdir()
    (tmp_path / "explorer" / "bare.py").write_text("x = 1\n")
    with pytest.raises(readme_map.MapError, match="explorer/bare.py has no module docstring"):
        readme_map.package_map(tmp_path)


def test_write_replaces_only_the_section_and_check_tells_the_fix(tmp_path, capsys):
    (tmp_path / "explorer").mkdir()
    (tmp_path / "explorer" / "a.py").write_text('"""Module a: does A.\n\nDetails."""\n')
    (tmp_path / "run.py").write_text('"""The entry point."""\n')
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\n## Package map\n\n- `old.py` — gone.\n\n## Tests\n\nText.\n")
    assert readme_map.main(["--root", str(tmp_path), "--check"]) == 1
    assert FIX in capsys.readouterr().err
    assert readme_map.main(["--root", str(tmp_path), "--write"]) == 0
    lines = ["- `explorer/a.py` — Module a: does A.", "- `run.py` — The entry point.", *readme_map.FIXED]
    assert readme.read_text() == "# Title\n\n## Package map\n\n" + "\n".join(lines) + "\n\n## Tests\n\nText.\n"
    assert readme_map.main(["--root", str(tmp_path), "--check"]) == 0
    (tmp_path / "explorer" / "b.py").write_text('"""Module b."""\n')  # a module added: the map is stale again
    assert readme_map.main(["--root", str(tmp_path), "--check"]) == 1
