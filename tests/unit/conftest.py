"""Fixtures the unit tests of several modules share: the tiny text models of the sweep tests, a checkpoints/
directory of pattern, text and AR checkpoints for the sweep and evaluate CLIs, and one of the tiny
checkpoints beside every kind of broken file for the bad-input tests."""
from __future__ import annotations

import pytest

from explorer.checkpoint import save_checkpoint
from explorer.data.corpus import TextCorpus
from tests.support.dashboard import save_tiny_checkpoints, write_bad_checkpoints
from tests.support.models import TINY_TEXT, make_model, tiny_patterns_model, tiny_text_models


@pytest.fixture(scope="module")
def text_models():
    """(corpus, diffusion model, AR judge) over TINY_TEXT, built once per module."""
    return tiny_text_models()


@pytest.fixture
def ckpt_dir(tmp_path, monkeypatch):
    """checkpoints/ (MDLM_EXPLORER_CHECKPOINTS) with pat (patterns), txt (text) and ar (its AR judge), and
    the text files tiny.txt (their corpus) and other.txt (another one)."""
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    pat = tiny_patterns_model(block_size=12)
    save_checkpoint(pat, tmp_path / "pat.safetensors",
                    {"tokenizer": pat.tokenizer.to_dict(), **pat.meta, "training_state": {"step": 0}})
    corpus = TextCorpus(TINY_TEXT, name="tiny")
    txt = make_model(vocab_size=corpus.tokenizer.vocab_size, mask_id=corpus.tokenizer.mask_id, block_size=24)
    meta = {"tokenizer": corpus.tokenizer.to_dict(), "words": corpus.words,
            "corpus": {"name": "tiny", "sha256": corpus.sha256, "kind": "text"}}
    save_checkpoint(txt, tmp_path / "txt.safetensors", meta)
    ar = make_model(vocab_size=corpus.tokenizer.vocab_size, mask_id=corpus.tokenizer.mask_id, block_size=24,
                    kind="ar", seed=1)
    save_checkpoint(ar, tmp_path / "ar.safetensors", meta)
    (tmp_path / "tiny.txt").write_text(TINY_TEXT)
    (tmp_path / "other.txt").write_text(TINY_TEXT + "!")
    return tmp_path


@pytest.fixture
def ckpts(tmp_path, monkeypatch):
    """checkpoints/ (MDLM_EXPLORER_CHECKPOINTS) with the tiny checkpoints and every kind of broken file
    (support.dashboard.write_bad_checkpoints, whose messages BAD_FILES lists)."""
    d = tmp_path / "checkpoints"
    d.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d))
    return write_bad_checkpoints(save_tiny_checkpoints(d))
