"""explorer/dashboard/checkpoints.py: a checkpoint's metadata is read once per version of its file per
server (card), whoever asks (a session opening it, the AR judge's search, the served data's lookup), and a
file saved again or repaired is read again."""
from __future__ import annotations

import shutil

import pytest

from explorer.checkpoint import load_checkpoint, update_metadata
from explorer.dashboard import checkpoints as served


def counted_reads(monkeypatch) -> list[str]:
    """The files the dashboard's checkpoints module reads metadata from, in order."""
    reads, real = [], served.read_metadata
    monkeypatch.setattr(served, "read_metadata", lambda path: reads.append(path.stem) or real(path))
    return reads


def test_each_file_is_read_once_for_every_session_and_judge_search(checkpoints_dir):
    reads, model = checkpoints_dir
    names = served.available(owner=None)
    for _session in range(3):  # what each session of a class does on one link
        card = served.peek("tiny")
        assert served.find_judge(model, names) == "tiny-ar"
        assert served.find_judge(model, names) == "tiny-ar"
    assert card.config == model.config and card.meta["tokenizer"] == model.tokenizer.to_dict()
    assert sorted(reads) == sorted(set(reads)) and {"tiny", "tiny-ar"} <= set(reads)
    assert served.peek("tiny") is card  # shared by the sessions, not a copy each


def test_a_checkpoint_saved_again_is_read_again(checkpoints_dir, tmp_path):
    reads, model = checkpoints_dir
    first = served.peek("tiny")
    update_metadata(first.path, {"metrics": {"nelbo_nats_per_char": 1.25}})  # a training's new save
    again = served.peek("tiny")
    assert again is not first and again.meta["metrics"]["nelbo_nats_per_char"] == 1.25
    assert reads.count("tiny") == 2


def test_an_unreadable_file_is_not_remembered(checkpoints_dir, tmp_path):
    reads, model = checkpoints_dir
    path = served.resolve_checkpoint("tiny", allow_paths=False)
    good = tmp_path / "good.safetensors"
    shutil.copy(path, good)
    path.write_bytes(b"not a checkpoint")  # a file caught half-written
    assert served.peek("tiny") is None
    shutil.copy(good, path)  # written whole
    assert served.peek("tiny").config == model.config


@pytest.fixture
def checkpoints_dir(checkpoints, monkeypatch):
    """The tiny checkpoints served (conftest's `checkpoints`); yields (the metadata reads, list, the
    loaded tiny model)."""
    return counted_reads(monkeypatch), load_checkpoint(str(checkpoints / "tiny.safetensors"))
