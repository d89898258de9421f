import pytest
import torch

from explorer.data import (MASK_GLYPH, CharTokenizer, CorpusError, PatternCorpus, TextCorpus,
                           UnknownCharacterError, generate_patterns, load_corpus, pattern_tokenizer)
from explorer.data.corpus import SHAKESPEARE_SHA256, fetch_shakespeare
from tests.support.models import TINY_TEXT

TINY_WORDS = {"to", "be", "or", "not", "that", "is", "the", "question", "whether", "'tis", "nobler", "in", "mind",
              "of", "suffer", "slings", "and", "arrows", "outrageous", "fortune", "take", "arms", "against", "a", "sea",
              "troubles"}


def test_tokenizer_round_trip_and_mask_glyph():
    tok = CharTokenizer.from_text("hello world")
    ids = tok.encode("hello world")
    assert tok.decode(ids) == "hello world"
    assert tok.mask_id == tok.vocab_size - 1 == len(set("hello world"))
    assert tok.decode([ids[0], tok.mask_id, ids[1]]) == "h" + MASK_GLYPH + "e"


def test_encode_names_unknown_characters():
    tok = CharTokenizer.from_text("abc")
    with pytest.raises(UnknownCharacterError) as e:
        tok.encode("abXcYX")
    assert e.value.chars == ["X", "Y"]
    assert "'X'" in str(e.value) and "'Y'" in str(e.value)


def test_tokenizer_serialises_and_rejects_reserved_glyph():
    tok = CharTokenizer.from_text("xyz\n")
    assert CharTokenizer.from_dict(tok.to_dict()).chars == tok.chars
    with pytest.raises(ValueError, match="reserved"):
        CharTokenizer(["a", MASK_GLYPH])
    with pytest.raises(ValueError):
        tok.decode([99])


def test_patterns_tile_a_short_period_deterministically():
    g = torch.Generator().manual_seed(3)
    x = generate_patterns(200, 24, min_period=2, max_period=6, generator=g)
    assert x.shape == (200, 24) and x.min() >= 0 and x.max() < 15
    for row in x.tolist():
        assert any(all(row[i] == row[i % p] for i in range(24)) for p in range(2, 7))
    again = generate_patterns(200, 24, min_period=2, max_period=6, generator=torch.Generator().manual_seed(3))
    assert torch.equal(x, again)
    assert pattern_tokenizer().vocab_size == 16


def test_text_corpus_split_is_deterministic_90_10(tiny_corpus):
    cut = int(len(TINY_TEXT) * 0.9)  # by position: the first 90% trains, the rest is held out
    assert (tiny_corpus.train_text, tiny_corpus.val_text) == (TINY_TEXT[:cut], TINY_TEXT[cut:])
    tok = tiny_corpus.tokenizer
    assert tok.decode(tiny_corpus.train_ids.tolist()) == TINY_TEXT[:cut]
    assert tok.decode(tiny_corpus.val_ids.tolist()) == TINY_TEXT[cut:]
    assert torch.equal(TextCorpus(TINY_TEXT, name="again").val_ids, tiny_corpus.val_ids)
    b = tiny_corpus.batch(4, 8, torch.Generator().manual_seed(0))
    assert b.shape == (4, 8) and torch.equal(b, tiny_corpus.batch(4, 8, torch.Generator().manual_seed(0)))
    assert all(tok.decode(row) in tiny_corpus.train_text for row in b.tolist())  # crops of the train split
    cut_word = TINY_TEXT[:cut].split()[-1]  # "q": the split falls inside "question"
    assert tiny_corpus.words == sorted(TINY_WORDS | {cut_word})  # the train split's, lower-cased, "'tis" kept
    val = tiny_corpus.val_tensor(8)  # consecutive chunks of the held-out text
    assert val.shape == (len(TINY_TEXT[cut:]) // 8, 8) and tok.decode(val[1].tolist()) == TINY_TEXT[cut + 8:cut + 16]


def test_data_file_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(CorpusError, match="UTF-8"):
        load_corpus(data=str(bad))
    with pytest.raises(CorpusError, match="not found"):
        load_corpus(data=str(tmp_path / "missing.txt"))
    good = tmp_path / "good.txt"
    good.write_text("abc def " * 100)
    assert isinstance(load_corpus(data=str(good)), TextCorpus)
    assert isinstance(load_corpus("patterns"), PatternCorpus)


def test_offline_download_says_to_pass_data(tmp_path):
    with pytest.raises(CorpusError, match="--data FILE"):
        fetch_shakespeare(url="http://127.0.0.1:9/nothing.txt", cache=tmp_path)


def test_cached_copy_is_used_only_when_hash_matches(tmp_path):
    (tmp_path / "tinyshakespeare.txt").write_text("not shakespeare")
    with pytest.raises(CorpusError):  # wrong hash -> re-download -> offline error
        fetch_shakespeare(url="http://127.0.0.1:9/x", cache=tmp_path)
    assert len(SHAKESPEARE_SHA256) == 64
