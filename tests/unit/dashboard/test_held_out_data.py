"""Held-out text on a server: `serve --data FILE` (or MDLM_EXPLORER_DATA) gives a checkpoint its held-out
split when the file is the text it was trained on (by sha256), and only then; without it, what is missing
and how to supply it is said in one line; and `serve` fetches Tiny Shakespeare once at start, on a thread
of its own, when a served checkpoint needs it and no copy is on the machine, never with --offline. No test
reaches the network: the download is replaced where it would be made."""
from __future__ import annotations

import argparse
import time

import pytest
import torch

from explorer.checkpoint import save_checkpoint
from explorer.dashboard import checkpoints
from explorer.data.corpus import sha256_bytes
from explorer.data.patterns import pattern_tokenizer
from tests.support.models import TINY_TEXT, make_model, tiny_text_models


@pytest.fixture
def no_cache(tmp_path, monkeypatch):
    """No Tiny Shakespeare cache and no data files given to the server."""
    monkeypatch.setenv("MDLM_EXPLORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(checkpoints.DATA_ENV, raising=False)


def text_model(tmp_path, text: str = TINY_TEXT):
    """An untrained model over TINY_TEXT's characters whose metadata records `text`'s sha256 and a
    training file that is no longer there (a checkpoint copied to another server)."""
    _, model, _ = tiny_text_models()
    model.meta = {**model.meta, "corpus": {"name": "tiny", "kind": "text", "sha256": sha256_bytes(text.encode())},
                  "train_config": {"data": str(tmp_path / "gone.txt")}}
    model.path = str(tmp_path / f"model-{len(text)}")  # what the held-out caches key on
    return model


def test_a_data_file_gives_the_checkpoint_it_was_trained_on_its_held_out_split(tmp_path, monkeypatch, no_cache):
    model = text_model(tmp_path)
    with pytest.raises(ValueError, match="--data FILE"):
        checkpoints.validation_tokens(model, 20, 8)
    other, same = tmp_path / "other.txt", tmp_path / "same.txt"
    other.write_text(TINY_TEXT[::-1])  # the same characters, another text: another split
    same.write_text(TINY_TEXT)
    monkeypatch.setenv(checkpoints.DATA_ENV, str(other))
    with pytest.raises(ValueError, match="--data FILE"):
        checkpoints.validation_tokens(model, 20, 8)
    monkeypatch.setenv(checkpoints.DATA_ENV, f"{other}:{same}")
    tokens = checkpoints.validation_tokens(model, 20, 8)
    corpus, _, _ = tiny_text_models()
    assert torch.equal(tokens, corpus.val_tensor(20, 8))  # the split of the text it was trained on
    assert checkpoints.corpus_preview(model)[0] == len(TINY_TEXT)


def test_a_training_file_another_served_checkpoint_recorded_serves_when_it_is_the_same_text(
        tmp_path, monkeypatch, no_cache):
    """A checkpoint whose recorded training file is not on this server (a path relative to where it was
    trained) takes the file its twin recorded when it is the same text (by sha256), as the server's start
    does when it decides there is nothing to download; another text's file it never takes."""
    model = text_model(tmp_path)
    served = tmp_path / "checkpoints"
    served.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(served))
    other, same = tmp_path / "other.txt", tmp_path / "same.txt"
    other.write_text(TINY_TEXT[::-1])  # the same characters, another text: another split
    same.write_text(TINY_TEXT)
    tok = pattern_tokenizer()
    twin = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=16)
    save_checkpoint(twin, served / "a-twin.safetensors", {"tokenizer": tok.to_dict(), "train_config": {"data": str(other)}},
                    dtype=torch.float32)
    with pytest.raises(ValueError, match="--data FILE"):
        checkpoints.validation_tokens(model, 20, 8)
    save_checkpoint(twin, served / "b-twin.safetensors", {"tokenizer": tok.to_dict(), "train_config": {"data": str(same)}},
                    dtype=torch.float32)
    assert checkpoints.served_data(model.meta) == str(same)
    tokens = checkpoints.validation_tokens(model, 20, 8)
    corpus, _, _ = tiny_text_models()
    assert torch.equal(tokens, corpus.val_tensor(20, 8))  # the split of the text it was trained on


def test_without_tiny_shakespeare_the_notice_says_how_to_get_it(tmp_path, no_cache):
    model = text_model(tmp_path)
    model.meta["corpus"]["name"] = "shakespeare"
    with pytest.raises(ValueError) as e:
        checkpoints.validation_tokens(model, 20, 8)
    assert "downloads it at start" in str(e.value) and "--data FILE" in str(e.value)


def serve_args(*argv):
    from explorer.cli import serve

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def shakespeare_checkpoint(tmp_path, monkeypatch):
    """A served folder whose one checkpoint says it was trained on Tiny Shakespeare."""
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    tok = pattern_tokenizer()
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=16)
    meta = {"tokenizer": tok.to_dict(), "corpus": {"name": "shakespeare", "kind": "text"}}
    save_checkpoint(model, d / "bard.safetensors", meta, dtype=torch.float32)
    return d


@pytest.mark.parametrize("case", ["fetched", "unreachable", "offline", "already here", "before forking"])
def test_serve_fetches_tiny_shakespeare_once_at_start_when_a_checkpoint_needs_it(
        case, shakespeare_checkpoint, tmp_path, monkeypatch, capsys, no_cache):
    from explorer.cli import serve
    from explorer.data import corpus

    calls = []

    def fetch():
        calls.append(1)
        if case == "before forking":
            time.sleep(0.5)  # a download takes a while: fetch_held_out must not return before it is done
        if case == "unreachable":
            raise corpus.CorpusError("could not download Tiny Shakespeare (no network)")
        return tmp_path / "cache" / "tinyshakespeare.txt"

    monkeypatch.setattr(corpus, "fetch_shakespeare", fetch)
    if case == "already here":
        monkeypatch.setattr(checkpoints, "local_shakespeare", lambda: tmp_path / "copy.txt")
    flags = {"offline": ["--offline"], "before forking": ["--num-procs", "2"]}.get(case, [])
    thread = serve.fetch_held_out(serve_args(*flags))
    if case in ("offline", "already here"):
        assert thread is None and calls == []
        return
    if case == "before forking":  # done before the server forks its processes
        assert not thread.is_alive() and calls == [1]
    thread.join(10)
    assert thread.daemon and calls == [1]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert ("downloaded Tiny Shakespeare" in err[0]) == (case != "unreachable")
    assert ("no network" in err[0]) == (case == "unreachable")


def test_serve_fetches_nothing_when_no_checkpoint_needs_it(tmp_path, monkeypatch, no_cache):
    from explorer.cli import serve
    from explorer.data import corpus
    from tests.support.dashboard import save_tiny_checkpoints

    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(d)))  # patterns only
    monkeypatch.setattr(corpus, "fetch_shakespeare", lambda: pytest.fail("nothing to fetch"))
    assert serve.fetch_held_out(serve_args()) is None


def test_serve_data_files_reach_every_session_first(tmp_path, monkeypatch):
    from explorer.cli import serve

    given = tmp_path / "a.txt"
    given.write_text(TINY_TEXT)
    monkeypatch.setenv(checkpoints.DATA_ENV, "/elsewhere/b.txt")
    args = serve_args("--data", str(given), "--no-auto-sweep")
    args.precision = "fp32"
    serve.session_defaults(args)
    assert checkpoints.data_files() == [str(given), "/elsewhere/b.txt"]
