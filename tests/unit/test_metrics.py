"""Metrics on hand-made inputs and tiny models built here (CPU, seconds, no network)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from explorer import metrics
from explorer.data.corpus import TextCorpus
from explorer.data.tokenizer import CharTokenizer
from explorer.diffusion import ar_loss
from tests.support.models import TINY_TEXT, make_model


def _notebook_reference(seq):
    """The loop of "Sampling Strategies & Speed Tradeoffs", verbatim in logic, to pin the vectorised version to it."""
    best = 0
    for p in range(2, 7):
        matches = total = 0
        for i in range(p, len(seq)):
            matches += seq[i] == seq[i % p]
            total += 1
        if total > 0:
            best = max(best, matches / total)
    return best


# ----------------------------------------------------------------------------- pattern quality

def test_perfect_pattern_scores_one_for_every_period():
    for p in range(2, 7):
        seq = np.tile(np.arange(1, p + 1), 10)[:24]
        assert metrics.pattern_quality(seq) == 1.0


def test_pattern_quality_matches_seed_loop_on_random_batches():
    rng = np.random.default_rng(0)
    batch = rng.integers(0, 4, size=(50, 24))
    batch[:10] = np.tile([3, 1, 2], 8)  # some perfect rows too
    got = metrics.pattern_quality(batch)
    assert got.shape == (50,)
    np.testing.assert_allclose(got, [_notebook_reference(list(r)) for r in batch])
    assert metrics.pattern_quality(torch.tensor(batch[12])) == pytest.approx(_notebook_reference(list(batch[12])))


def test_pattern_quality_hand_example_and_short_sequences():
    # period 2 would need A B A B; position 4 breaks it: 3 of 4 checked positions match
    # (periods 3..6 score 0, 1/2, 0 and nothing to check)
    assert metrics.pattern_quality([0, 1, 0, 1, 2, 1]) == pytest.approx(3 / 4)
    assert metrics.pattern_quality([5, 5]) == 0.0  # no position to check: the notebook's loop returns 0


# ----------------------------------------------------------------------------- text metrics

def test_char_entropy_known_strings():
    assert metrics.char_entropy("aaaa") == 0.0
    assert metrics.char_entropy("abab") == pytest.approx(math.log(2))
    assert metrics.char_entropy("aabc") == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert metrics.char_entropy([1, 2, 3, 4]) == pytest.approx(math.log(4))
    assert math.isnan(metrics.char_entropy(""))


def test_word_validity_and_distinct_n():
    words = {"to", "be", "or", "not", "the"}
    assert metrics.word_validity("To be, or NOT to bee", words) == pytest.approx(5 / 6)
    assert math.isnan(metrics.word_validity("... !!!", words))
    assert metrics.distinct_n("a b a b", 2) == pytest.approx(2 / 3)  # ab, ba, ab
    assert metrics.distinct_n("to be or not to be", 3) == pytest.approx(1.0)
    assert metrics.distinct_n("the the the the", 1) == pytest.approx(1 / 4)
    assert math.isnan(metrics.distinct_n("one", 2))
    with pytest.raises(ValueError):
        metrics.distinct_n("a b", 0)


# ----------------------------------------------------------------------------- gen-PPL

@pytest.fixture(scope="module")
def judge():
    """A tiny causal judge trained for a few dozen steps on TINY_TEXT: enough to prefer real text."""
    corpus = TextCorpus(TINY_TEXT, name="tiny")
    tok = corpus.tokenizer
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=48, kind="ar", n_embd=48)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(60):
        loss = ar_loss(model, corpus.batch(16, 48, g), tok.mask_id)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.tokenizer = tok
    return model


def _greedy(judge, prompt: str, n: int) -> str:
    """Test-only greedy continuation under the judge (argmax next char, [MASK] excluded)."""
    x = torch.tensor([judge.tokenizer.encode(prompt)])
    with torch.no_grad():
        for _ in range(n):
            logits = judge(x)[:, -1]  # (1, V)
            logits[:, judge.config.mask_id] = float("-inf")
            x = torch.cat([x, logits.argmax(-1, keepdim=True)], dim=1)
    return judge.tokenizer.decode(x[0].tolist())


@pytest.mark.slow
def test_gen_ppl_of_own_greedy_continuation_beats_shuffled(judge):
    greedy = _greedy(judge, "To be", 40)
    rng = np.random.default_rng(0)
    shuffled = ["".join(rng.permutation(list(greedy))) for _ in range(5)]
    ppl = metrics.gen_ppl(judge, [greedy, *shuffled])
    assert ppl.shape == (6,) and np.all(ppl >= 1.0)
    assert ppl[0] < ppl[1:].min()
    # texts and ids in the judge's vocabulary give the same numbers, batched or not
    ids = np.array([judge.tokenizer.encode(s) for s in [greedy, *shuffled]])
    np.testing.assert_allclose(metrics.gen_ppl(judge, ids, batch_size=2), ppl, rtol=1e-5)
    assert metrics.gen_nll(judge, greedy)[0] == pytest.approx(math.log(ppl[0]), rel=1e-5)


@pytest.mark.slow
def test_gen_ppl_matches_ar_loss_and_handles_mixed_lengths(judge):
    text = TINY_TEXT[:40]
    x = torch.tensor([judge.tokenizer.encode(text)])
    with torch.no_grad():
        expected = ar_loss(judge, x, judge.config.mask_id).item()
    got = metrics.gen_nll(judge, [text, text[:10], "T"])
    assert got[0] == pytest.approx(expected, rel=1e-5)
    assert np.isfinite(got[1]) and math.isnan(got[2])  # one char: nothing to predict


@pytest.mark.slow
def test_gen_ppl_clear_errors(judge):
    with pytest.raises(ValueError, match="sample 1 cannot be scored by the judge.*'Z'"):
        metrics.gen_ppl(judge, ["To be", "ZZ top"])
    with pytest.raises(ValueError, match="MASK"):
        metrics.gen_ppl(judge, ["To b█"])  # a leftover [MASK] glyph
    with pytest.raises(ValueError, match="outside the judge"):
        metrics.gen_ppl(judge, np.array([[0, 1, judge.config.mask_id]]))
    with pytest.raises(ValueError, match="exceed the judge's context"):
        metrics.gen_ppl(judge, [TINY_TEXT[:60]])
    with pytest.raises(ValueError, match="causal"):
        metrics.gen_ppl(make_model(kind="diffusion"), np.array([[0, 1]]))


@pytest.mark.slow
def test_text_quality_columns_and_reference_texts(judge):
    ref = metrics.reference_texts(TINY_TEXT, 40, n=4, seed=1)
    assert ref == metrics.reference_texts(TINY_TEXT, 40, n=4, seed=1)  # seeded
    assert all(len(s) == 40 and s in TINY_TEXT for s in ref)
    table = metrics.text_quality(ref, judge=judge, words={"to", "be"})
    assert list(table.columns) == ["entropy", "distinct_2", "distinct_3", "word_validity", "gen_nll", "gen_ppl"]
    assert len(table) == 4
    assert list(metrics.text_quality(ref).columns) == ["entropy", "distinct_2", "distinct_3"]
    with pytest.raises(ValueError, match="fewer than the sample length"):
        metrics.reference_texts("short", 40, n=1)


# ----------------------------------------------------------------------------- the model's view

class OracleDenoiser(torch.nn.Module):
    """Mock denoiser with known logits: probability `p` on the true token at every position.

    It is handed the clean rows (N, L) and serves them in call order (batches arrive in row order and
    each pass over the data is N rows), so accuracy and confidence can be checked exactly."""

    def __init__(self, clean: torch.Tensor, vocab_size: int, p: float = 0.8):
        super().__init__()
        from explorer.model import ModelConfig
        self.clean = clean.reshape(-1, clean.shape[-1])  # (N, L)
        self.config = ModelConfig(vocab_size=vocab_size, mask_id=vocab_size - 1, block_size=clean.shape[-1])
        self.p, self.row = p, 0
        self.dummy = torch.nn.Parameter(torch.zeros(1))  # so next(parameters()) names a device

    def forward(self, x, t=None):
        B, L = x.shape
        rows = self.clean[torch.arange(self.row, self.row + B) % len(self.clean)]  # (B, L)
        self.row = (self.row + B) % len(self.clean)
        V = self.config.vocab_size
        probs = torch.full((B, L, V), (1 - self.p) / (V - 2))
        probs[..., self.config.mask_id] = 1e-12
        probs.scatter_(-1, rows[..., None], self.p)
        return probs.log()  # (B, L, V)


def test_masked_fraction_tracks_t():
    table = metrics.masked_fraction_vs_t([0.1, 0.5, 0.9], length=200, n=100, seed=0)
    assert list(table.columns) == ["t", "masked_fraction", "std", "expected"]
    np.testing.assert_allclose(table["masked_fraction"], table["expected"], atol=0.01)
    pd.testing.assert_frame_equal(table, metrics.masked_fraction_vs_t([0.1, 0.5, 0.9], length=200, n=100, seed=0))


def test_accuracy_and_confidence_with_an_oracle():
    clean = torch.randint(0, 9, (20, 16), generator=torch.Generator().manual_seed(0))
    oracle = OracleDenoiser(clean, vocab_size=10, p=0.8)
    acc = metrics.accuracy_vs_t(oracle, clean, ts=[0.2, 0.8], seed=0, batch_size=7)
    assert list(acc["accuracy"]) == [1.0, 1.0]
    np.testing.assert_allclose(acc["mean_confidence"], 0.8, atol=1e-5)
    np.testing.assert_allclose(acc["nll"], -math.log(0.8), atol=1e-5)
    assert acc["n_masked"].iloc[0] < acc["n_masked"].iloc[1]
    conf = metrics.per_position_confidence(oracle, clean.numpy(), t=0.5, seed=0)
    assert list(conf["position"]) == list(range(16))
    np.testing.assert_allclose(conf["confidence"].dropna(), 0.8, atol=1e-5)
    assert conf["n_masked"].sum() > 0


def test_model_view_is_deterministic_and_masks_are_nested_across_t():
    model = make_model(vocab_size=12, mask_id=11, block_size=16)
    val = torch.randint(0, 11, (10, 16), generator=torch.Generator().manual_seed(1))
    a = metrics.accuracy_vs_t(model, val, ts=[0.3, 0.6], seed=3)
    pd.testing.assert_frame_equal(a, metrics.accuracy_vs_t(model, val, ts=[0.3, 0.6], seed=3))
    pd.testing.assert_frame_equal(metrics.per_position_confidence(model, val, 0.4, seed=2),
                                  metrics.per_position_confidence(model, val, 0.4, seed=2))
    lo = metrics.topk_predictions(model, val[0], t=0.3, seed=5)["mask"]
    hi = metrics.topk_predictions(model, val[0], t=0.6, seed=5)["mask"]
    assert not (lo & ~hi).any()  # same uniforms: everything masked at 0.3 is masked at 0.6
    with pytest.raises(ValueError, match=r"\(N, L\)"):
        metrics.accuracy_vs_t(model, val[0], ts=[0.5])


def test_topk_predictions_marks_correct_and_wrong():
    tok = CharTokenizer("abcdefghij")
    text = "abcabcabca"
    clean = torch.tensor(tok.encode(text))
    oracle = OracleDenoiser(clean, vocab_size=tok.vocab_size, p=0.9)
    oracle.tokenizer = tok
    out = metrics.topk_predictions(oracle, text, mask=[1, 4, 7], k=3)
    assert list(out["table"]["position"]) == [1, 4, 7]
    assert out["table"]["correct"].all() and out["accuracy"] == 1.0
    assert list(out["table"]["top1"]) == ["b", "b", "b"] and list(out["table"]["true"]) == ["b", "b", "b"]
    assert out["masked_text"] == "a█ca█ca█ca" and out["predicted_text"] == text
    assert out["table"]["p1"].iloc[0] == pytest.approx(0.9, abs=1e-5)
    assert out["table"]["p1"].ge(out["table"]["p2"]).all() and out["table"]["p2"].ge(out["table"]["p3"]).all()
    # a denoiser that believes another text gets every position wrong
    wrong = OracleDenoiser(torch.tensor(tok.encode("jjjjjjjjjj")), vocab_size=tok.vocab_size)
    wrong.tokenizer = tok
    table = metrics.topk_predictions(wrong, text, mask=np.arange(10) % 2 == 0)["table"]
    assert len(table) == 5 and not table["correct"].any() and (table["top1"] == "j").all()


def test_topk_predictions_errors():
    model = make_model(vocab_size=12, mask_id=11, block_size=16)
    model.tokenizer = CharTokenizer("abcdefghijk")
    with pytest.raises(ValueError, match="not in the model's vocabulary"):
        metrics.topk_predictions(model, "abz", t=0.5)
    with pytest.raises(ValueError, match="either t"):
        metrics.topk_predictions(model, "abc")
    with pytest.raises(ValueError, match="exceeds the model's context"):
        metrics.topk_predictions(model, "a" * 17, t=0.5)
    with pytest.raises(ValueError, match="mask positions"):
        metrics.topk_predictions(model, "abc", mask=[5])
    out = metrics.topk_predictions(model, "abcdefgh", t=0.5, k=2, seed=0)
    assert out["mask"].dtype == bool and out["ids"].shape == (8,)
    assert all(isinstance(v, (np.ndarray, pd.DataFrame, str, float)) for v in out.values())  # no torch
