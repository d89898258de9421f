"""A Hugging Face model directory whose config.json gives absurd or mistyped sizes is refused with one line
before transformers builds (and randomly initialises) anything; real tiny models still load."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

import explorer.hf.model as hf_model  # noqa: E402
from explorer.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from explorer.cli import main  # noqa: E402
from tests.support.hf import bert_dir  # noqa: E402


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return bert_dir(tmp_path_factory.mktemp("bert"))


def _lying_copy(bert, tmp_path, **changes):
    import shutil

    d = tmp_path / "liar"
    shutil.copytree(bert, d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, **changes}))
    return d


@pytest.mark.parametrize("changes, needle", [
    ({"num_hidden_layers": 10**6}, "config.json's num_hidden_layers must be an integer in [1, 1024], got 1000000"),
    ({"hidden_size": "32"}, "config.json's hidden_size must be an integer in [1, 65536], got '32'"),
    ({"vocab_size": 2**40}, "config.json's vocab_size must be an integer in [1, 4194304]"),
    ({"max_position_embeddings": 10**12}, "config.json's max_position_embeddings must be an integer in [1, 16777216]"),
    ({"num_attention_heads": 0}, "config.json's num_attention_heads must be an integer in [1, 1024], got 0"),
    ({"intermediate_size": True}, "config.json's intermediate_size must be an integer in [1, 1048576], got True"),
])
def test_absurd_sizes_are_refused_before_transformers_builds(bert, tmp_path, monkeypatch, changes, needle):
    d = _lying_copy(bert, tmp_path, **changes)
    monkeypatch.setattr(hf_model, "_from_pretrained", lambda *a, **k: pytest.fail("transformers was called"))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert needle in str(e.value) and str(d) in str(e.value)


def test_the_cli_gives_one_error_line(bert, tmp_path, capsys):
    d = _lying_copy(bert, tmp_path, num_hidden_layers=10**6)
    assert main(["sample", "--checkpoint", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "num_hidden_layers" in err


def test_a_real_tiny_model_passes(bert):
    assert load_checkpoint(bert).config.block_size == 64
