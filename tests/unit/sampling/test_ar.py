"""The AR baseline sampler and the KV cache it relies on, on a tiny causal Transformer."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.data.tokenizer import CharTokenizer
from explorer.model import KVCache, ModelConfig, Transformer
from explorer.sampling import SamplerConfig, SamplingCancelled, sample, sample_any, sample_ar

TOK = CharTokenizer("abcd\n")
MASK = TOK.mask_id


def tiny_ar(seed=0, tokenizer=TOK) -> Transformer:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=TOK.vocab_size, mask_id=MASK, block_size=24, n_layer=2, n_head=2, n_embd=32,
                      kind="ar")
    model = Transformer(cfg).eval()
    model.tokenizer = tokenizer
    return model


def test_kv_cache_matches_full_recompute():
    model = tiny_ar()
    x = torch.randint(0, MASK, (3, 20), generator=torch.Generator().manual_seed(1))
    cache = KVCache()
    with torch.no_grad():
        full = model(x)  # (B, L, V)
        steps = [model(x[:, :4], cache=cache)]  # the prompt in one call
        steps += [model(x[:, i:i + 1], cache=cache) for i in range(4, 20)]  # then one token per call
    assert cache.length == 20
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_kv_cache_refuses_past_the_context():
    model = tiny_ar()
    cache = KVCache()
    with torch.no_grad():
        model(torch.zeros(1, 24, dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match="context"):
            model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cache_and_no_cache_give_identical_outputs(temperature):
    model = tiny_ar()
    cfg = SamplerConfig(temperature=temperature, seed=3)
    a = sample_ar(model, cfg, batch_size=2, prompt="ab\n", length=20)
    b = sample_ar(model, cfg, batch_size=2, prompt="ab\n", length=20, use_cache=False)
    np.testing.assert_array_equal(a.final, b.final)
    np.testing.assert_allclose(a.commit_confidence, b.commit_confidence, rtol=1e-4)


def test_greedy_matches_a_hand_written_loop():
    model = tiny_ar(seed=2)
    tr = sample_ar(model, SamplerConfig(temperature=0), prompt="cab", length=12)
    x = torch.tensor([TOK.encode("cab")])
    with torch.no_grad():
        for _ in range(9):
            logits = model(x)[:, -1]
            logits[:, MASK] = float("-inf")
            x = torch.cat([x, logits.argmax(-1, keepdim=True)], dim=1)
    assert tr.final.tolist() == x.tolist()


def test_trajectory_is_one_step_per_token_left_to_right():
    model = tiny_ar()
    tr = sample_ar(model, SamplerConfig(temperature=0.8), batch_size=3, prompt="abc", length=10)
    assert tr.kind == "ar" and tr.n_steps == tr.nfe == 7
    assert tr.tokens.shape == (8, 3, 10) and tr.scores.shape == (7, 3, 10)
    assert all(t.startswith("abc") for t in tr.texts()) and (tr.final != MASK).all()
    assert tr.committed_at[:, :3].tolist() == [[-1] * 3] * 3
    assert (tr.committed_at[:, 3:] == np.arange(7)).all()
    for s in range(7):  # only the new position has a score; it is the committed token's probability
        assert np.isnan(np.delete(tr.scores[s], 3 + s, axis=1)).all()
        np.testing.assert_allclose(tr.scores[s, :, 3 + s], tr.commit_confidence[:, 3 + s])
        assert (tr.tokens[s + 1, :, 3 + s] == tr.final[:, 3 + s]).all() and (tr.tokens[s, :, 3 + s] == MASK).all()
    np.testing.assert_array_equal(tr.proposals, tr.tokens[1:])  # AR proposes exactly what it commits


def test_without_prompt_a_start_token_is_fixed_at_position_zero():
    tr = sample_ar(tiny_ar(), SamplerConfig(), batch_size=2, length=8)
    assert tr.fixed[:, 0].all() and not tr.fixed[:, 1:].any() and tr.nfe == 7
    assert (tr.final[:, 0] == TOK.stoi["\n"]).all()  # a line boundary when the vocabulary has one
    bare = tiny_ar(tokenizer=None)
    a = sample_ar(bare, SamplerConfig(seed=5), length=6)
    b = sample_ar(bare, SamplerConfig(seed=5), length=6)
    assert a.final.tolist() == b.final.tolist() and a.final[0, 0] != MASK
    with pytest.raises(ValueError, match="at least 2"):
        sample_ar(bare, SamplerConfig(), length=1)


def test_ar_input_errors():
    model = tiny_ar()
    with pytest.raises(ValueError, match="continue a prompt"):
        sample_ar(model, SamplerConfig(), prompt="ab█cd")
    with pytest.raises(ValueError, match="context"):
        sample_ar(model, SamplerConfig(), prompt="abc", length=25)
    diffusion = Transformer(ModelConfig(vocab_size=TOK.vocab_size, mask_id=MASK, block_size=8, n_layer=1,
                                        n_head=1, n_embd=8))
    with pytest.raises(ValueError, match="autoregressive"):
        sample_ar(diffusion, SamplerConfig())
    with pytest.raises(ValueError, match="sample_ar"):
        sample(model, SamplerConfig())


def test_sample_any_dispatches_and_takes_template_as_prompt():
    model = tiny_ar()
    tr = sample_any(model, SamplerConfig(temperature=0), template="dd", length=6)
    assert tr.kind == "ar" and tr.texts()[0].startswith("dd") and tr.length == 6
    same = sample_ar(model, SamplerConfig(temperature=0), prompt="dd", length=6)
    assert tr.final.tolist() == same.final.tolist()


def test_ar_annealing_cancel_and_record_false():
    model = tiny_ar()
    tr = sample_ar(model, SamplerConfig(temperature=1.0, temperature_end=0.0), prompt="a", length=6)
    np.testing.assert_allclose(tr.temperatures, [1.0, 0.75, 0.5, 0.25, 0.0])
    lean = sample_ar(model, SamplerConfig(temperature=1.0, temperature_end=0.0), prompt="a", length=6,
                     record=False)
    assert lean.tokens is None and lean.final.tolist() == tr.final.tolist() and lean.nfe == 5
    with pytest.raises(SamplingCancelled):
        sample_ar(model, SamplerConfig(), prompt="a", length=6, on_step=lambda r: False)
    with pytest.raises(SamplingCancelled, match="should_stop"):
        sample_ar(model, SamplerConfig(), prompt="a", length=6, record=False, should_stop=lambda: True)
