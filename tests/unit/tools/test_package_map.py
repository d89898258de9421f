"""docs/design.md's package map is what tools/package_map.py makes of the modules on disk: a module moved,
added or re-described without `python tools/package_map.py --write` fails here."""
from __future__ import annotations

import importlib.util
import sys

import pytest
from tests.support import ROOT

_spec = importlib.util.spec_from_file_location("tools_package_map", ROOT / "tools" / "package_map.py")
package_map = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # tools/ holds scripts
_spec.loader.exec_module(package_map)

FIX = "python tools/package_map.py --write"


@pytest.mark.slow
def test_the_design_page_map_describes_the_modules_on_disk():
    expected, shown = package_map.package_map(ROOT), package_map.page_map(ROOT / package_map.PAGE)
    missing = [line for line in expected if line not in shown]
    stale = [line for line in shown if line not in expected]
    assert shown == expected, (f"docs/design.md's package map is out of date; run `{FIX}`.\n"
                               f"missing or changed: {missing}\nno longer true: {stale}")


def test_a_tree_with_one_line_per_module_and_its_whole_first_sentence():
    lines = package_map.package_map(ROOT)
    paths = [p.as_posix() for p in package_map.module_paths(ROOT)]
    assert paths[0] == "run.py" and "explorer/sampling/sampler.py" in paths
    assert paths[1:] == sorted(paths[1:]) and all(p.startswith("explorer/") for p in paths[1:])
    assert lines[1].startswith("- `explorer/` — ")  # the package's own line, from its __init__.py
    assert "    - `sampling/` — " in [line[:len("    - `sampling/` — ")] for line in lines]
    assert any(line.startswith("        - `sampler.py` — ") for line in lines)  # nested under sampling/
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
    assert package_map.first_sentence(doc, "m.py") == sentence


def test_a_fragment_or_a_missing_docstring_is_named(tmp_path):
    with pytest.raises(package_map.MapError, match=r"m\.py: .*\(no full stop\)"):
        package_map.first_sentence("A first line with no end\n\nThen a paragraph.", "m.py")
    (tmp_path / "explorer").mkdir()
    (tmp_path / "explorer" / "bare.py").write_text("x = 1\n")
    with pytest.raises(package_map.MapError, match="explorer/bare.py has no module docstring"):
        package_map.package_map(tmp_path)


def test_write_replaces_only_the_list_and_check_tells_the_fix(tmp_path, capsys):
    (tmp_path / "explorer" / "sub").mkdir(parents=True)
    (tmp_path / "explorer" / "__init__.py").write_text('"""The package."""\n')
    (tmp_path / "explorer" / "a.py").write_text('"""Module a: does A.\n\nDetails."""\n')
    (tmp_path / "explorer" / "sub" / "__init__.py").write_text('"""A subpackage."""\n')
    (tmp_path / "explorer" / "sub" / "b.py").write_text('"""Module b."""\n')
    (tmp_path / "run.py").write_text('"""The entry point."""\n')
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "design.md"
    intro = "# Design\n\n## Package map\n\nSaid before the list.\n\n"
    page.write_text(intro + "- `old.py` — gone.\n\n## Next\n\nText.\n")
    assert package_map.main(["--root", str(tmp_path), "--check"]) == 1
    assert FIX in capsys.readouterr().err
    assert package_map.main(["--root", str(tmp_path), "--write"]) == 0
    lines = ["- `run.py` — The entry point.", "- `explorer/` — The package.", "    - `a.py` — Module a: does A.",
             "    - `sub/` — A subpackage.", "        - `b.py` — Module b.", *package_map.FIXED]
    assert page.read_text() == intro + "\n".join(lines) + "\n\n## Next\n\nText.\n"
    assert package_map.main(["--root", str(tmp_path), "--check"]) == 0
    (tmp_path / "explorer" / "c.py").write_text('"""Module c."""\n')  # a module added: the map is stale again
    assert package_map.main(["--root", str(tmp_path), "--check"]) == 1
