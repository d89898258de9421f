"""A checkpoint name the loader refuses: every way a file in checkpoints/ can be wrong is one CheckpointError
naming the file and the problem, and a name holding a path is refused before any file is opened (no file
outside checkpoints/ is opened by a name-only loader)."""
from __future__ import annotations

import pytest
from safetensors import safe_open

import explorer.checkpoint as checkpoint_module
from explorer.checkpoint import CheckpointError, load_checkpoint
from tests.support.dashboard import BAD_FILES


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_api_bad_checkpoint_file_names_the_problem(ckpts, name):
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(name, allow_paths=False)
    assert BAD_FILES[name] in str(e.value) and name in str(e.value)


@pytest.mark.parametrize("name", ["../outside", "{outside}", "{outside_file}", "/etc/passwd", "..", ".hidden",
                                  "sub\\..\\..\\outside", ""])
def test_api_names_with_paths_are_refused_before_any_file_is_opened(ckpts, monkeypatch, name):
    outside = ckpts.parent / "outside.safetensors"
    outside.write_bytes((ckpts / "tiny.safetensors").read_bytes())  # a real checkpoint, outside the dir
    name = name.format(outside=ckpts.parent / "outside", outside_file=outside)
    opened = []
    monkeypatch.setattr(checkpoint_module, "safe_open", lambda *a, **k: opened.append(a) or safe_open(*a, **k))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(name, allow_paths=False)
    assert "is not a plain name; choose one of ['" in str(e.value) and opened == []
