import json

import pytest
import torch
from safetensors.torch import save_file

from explorer.checkpoint import (CheckpointError, load_checkpoint, read_metadata, resolve_checkpoint,
                                 save_checkpoint)
from explorer.data import CharTokenizer
from tests.conftest import make_model


def _save(tmp_path, name="m", dtype=torch.float32, **extra):
    tok = CharTokenizer(list("abcdefghijk"))  # 11 chars + mask = vocab 12, mask id 11
    m = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, time_conditioning="adaln")
    path = save_checkpoint(m, tmp_path / f"{name}.safetensors", {"tokenizer": tok.to_dict(), **extra}, dtype=dtype)
    return m, path


def test_round_trip_gives_identical_logits(tmp_path):
    m, path = _save(tmp_path, dtype=torch.float32, words=["a"])
    loaded = load_checkpoint(path)
    x = torch.randint(0, 11, (2, 10))
    t = torch.tensor([0.3, 0.8])
    assert torch.equal(m(x, t), loaded(x, t))
    assert not loaded.training
    assert loaded.tokenizer.decode([0, 11]) == "a█"
    assert loaded.meta["words"] == ["a"]
    assert loaded.head.weight is loaded.tok_emb.weight  # tying survives the round trip


def test_fp16_storage_is_close(tmp_path):
    m, path = _save(tmp_path, dtype=torch.float16)
    x = torch.randint(0, 11, (2, 10))
    assert torch.allclose(m(x, torch.ones(2)), load_checkpoint(path)(x, torch.ones(2)), atol=1e-2)


def test_bare_name_resolves_inside_checkpoints_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    _save(tmp_path, name="tiny")
    assert resolve_checkpoint("tiny") == (tmp_path / "tiny.safetensors").resolve()
    assert load_checkpoint("tiny").config.vocab_size == 12
    with pytest.raises(CheckpointError, match="available: \\['tiny'\\]"):
        load_checkpoint("nope")


@pytest.mark.parametrize("name", ["../tiny", "/etc/passwd", "..", ".hidden", "sub/tiny"])
def test_paths_refused_when_only_names_allowed(tmp_path, monkeypatch, name):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    _save(tmp_path, name="tiny")
    with pytest.raises(CheckpointError):
        load_checkpoint(name, allow_paths=False)


def test_corrupted_file_fails_clearly(tmp_path):
    _, path = _save(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a readable safetensors|unreadable"):
        load_checkpoint(path)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"this is not a checkpoint at all")
    with pytest.raises(CheckpointError):
        load_checkpoint(junk)


def test_metadata_less_and_foreign_checkpoints_fail_clearly(tmp_path):
    bare = tmp_path / "bare.safetensors"
    save_file({"w": torch.zeros(2)}, str(bare))
    with pytest.raises(CheckpointError, match="no mdlm-explorer metadata"):
        load_checkpoint(bare)
    future = tmp_path / "future.safetensors"
    save_file({"w": torch.zeros(2)}, str(future), metadata={"format": "mdlm-explorer", "format_version": "99",
                                                            "meta": "{}"})
    with pytest.raises(CheckpointError, match="format version"):
        load_checkpoint(future)
    broken = tmp_path / "broken.safetensors"
    save_file({"w": torch.zeros(2)}, str(broken), metadata={"format": "mdlm-explorer", "format_version": "1",
                                                            "meta": "{not json"})
    with pytest.raises(CheckpointError, match="corrupted metadata"):
        read_metadata(broken)


def test_weights_that_do_not_fit_the_config_fail_clearly(tmp_path):
    _, path = _save(tmp_path)
    meta = read_metadata(path)
    meta["model_config"]["n_embd"] = 64
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(path), metadata={"format": "mdlm-explorer", "format_version": "1",
                                            "meta": json.dumps(meta)})
    with pytest.raises(CheckpointError, match="do not fit"):
        load_checkpoint(path)
