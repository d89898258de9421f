"""The knobs real diffusion LMs use: classifier-free guidance and EOS suppression on mocks
with known logits, Dream's alg_temp, Fast-dLLM's factor rule, and greedy decoding against a reference
loop written here after LLaDA's published `generate`."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from explorer.data.tokenizer import CharTokenizer
from explorer.sampling import SamplerConfig, sample
from tests.support.models import MASK, PROBS, TOK, MockDenoiser, random_mock, table_from_probs


class EosTokenizer(CharTokenizer):
    """'d' (id 3) is the end-of-sequence token."""
    eos_ids = [3]


class PromptAware(nn.Module):
    """Logits `cond` where position 0 (the prompt) is visible, `uncond` where it is masked."""

    def __init__(self, cond, uncond):
        super().__init__()
        self.cond, self.uncond = cond, uncond
        self.config = SimpleNamespace(kind="diffusion", mask_id=MASK, vocab_size=cond.shape[1],
                                      block_size=cond.shape[0], time_conditioning="none")
        self.tokenizer = TOK
        self.rows: list[int] = []

    def forward(self, x, t):
        self.rows.append(x.shape[0])
        seen = (x[:, :1] != MASK)[:, :, None]  # (B, 1, 1)
        return torch.where(seen, self.cond[: x.shape[1]], self.uncond[: x.shape[1]])


def _guidance_mock():
    cond = torch.tensor([[5.0, 0, 0, 0, -9], [1.0, 0.9, 0, 0, -9]])  # position 1: 'a' just ahead of 'b'
    uncond = torch.tensor([[5.0, 0, 0, 0, -9], [1.0, 0.0, 0, 0, -9]])  # without the prompt: 'a' far ahead
    return PromptAware(cond, uncond)


def test_classifier_free_guidance_follows_llada_formula():
    model = _guidance_mock()
    plain = sample(model, SamplerConfig(steps=1, temperature=0), template="a█")
    assert TOK.decode(plain.final[0]) == "aa" and plain.nfe == 1 and model.rows == [1]
    model.rows.clear()
    guided = sample(model, SamplerConfig(steps=1, temperature=0, cfg_scale=1.0), template="a█")
    # l_u + (w + 1)(l_c - l_u) = [1, 0, ..] + 2 [0, 0.9, ..] = [1, 1.8, ..]: guidance picks 'b'
    assert TOK.decode(guided.final[0]) == "ab"
    assert model.rows == [2] and guided.nfe == 2  # one call on canvas + unconditional canvas; 2 evaluations
    p = torch.softmax(torch.tensor([1.0, 1.8, 0.0, 0.0]), 0)[1]
    assert guided.commit_confidence[0, 1] == pytest.approx(float(p), abs=1e-6)
    # no prompt: the unconditional pass would equal the conditional one, a run without the knob: refused
    with pytest.raises(ValueError, match="cfg_scale=1 guides by the prompt, and this canvas has no fixed text"):
        sample(model, SamplerConfig(steps=1, temperature=0, cfg_scale=1.0), length=2)


def test_eos_never_proposed_with_logit_suppression():
    probs = [[0.1, 0.1, 0.1, 0.7]] * 6  # 'd' (EOS) most likely everywhere
    model = MockDenoiser(table_from_probs(probs), tokenizer=EosTokenizer("abcd"))
    free = sample(model, SamplerConfig(steps=3, temperature=0))
    assert (free.final == 3).all()
    off = sample(model, SamplerConfig(steps=3, temperature=0, suppress_eos="logits"), batch_size=4)
    assert not (off.final == 3).any()


@pytest.mark.parametrize("mode", ["logits", "confidence", "both"])
def test_eos_suppression_is_refused_where_the_tokenizer_has_no_eos(mode):
    """A character model has no end-of-sequence token: its run would be the run without the knob."""
    model = MockDenoiser(table_from_probs(PROBS), tokenizer=CharTokenizer("abc"))
    with pytest.raises(ValueError, match=f"suppress_eos={mode} acts on end-of-sequence tokens"):
        sample(model, SamplerConfig(steps=3, suppress_eos=mode))
    assert sample(model, SamplerConfig(steps=3)).final.shape == (1, len(PROBS))


def test_eos_committed_last_with_confidence_suppression():
    probs = [list(p) for p in PROBS]
    probs[2] = [0.05, 0.05, 0.0, 0.9]  # position 2 proposes EOS with the highest confidence of all
    model = MockDenoiser(table_from_probs(probs), tokenizer=EosTokenizer("abcd"))
    first = sample(model, SamplerConfig(steps=6, temperature=0))
    assert first.committed_at[0, 2] == 0
    last = sample(model, SamplerConfig(steps=6, temperature=0, suppress_eos="confidence"))
    assert last.committed_at[0, 2] == 5 and last.final[0, 2] == 3  # still EOS, but committed last


def test_alg_temp_draws_positions_from_the_scores():
    model = MockDenoiser(table_from_probs(PROBS))
    top = sample(model, SamplerConfig(steps=6, temperature=0))
    cold = sample(model, SamplerConfig(steps=6, temperature=0, alg_temp=1e-4))
    assert (cold.committed_at == top.committed_at).all()  # near 0: the top k
    orders = {tuple(np.argsort(sample(model, SamplerConfig(steps=6, temperature=0, alg_temp=10.0, seed=s))
                               .committed_at[0], kind="stable")) for s in range(12)}
    assert len(orders) > 3  # hot: close to uniform over the masked positions
    again = sample(model, SamplerConfig(steps=6, temperature=0, alg_temp=10.0, seed=3))
    once = sample(model, SamplerConfig(steps=6, temperature=0, alg_temp=10.0, seed=3))
    assert (again.committed_at == once.committed_at).all()


def test_alg_temp_rows_match_their_solo_runs():
    model = random_mock(L=10)
    cfg = SamplerConfig(steps=5, temperature=1.0, alg_temp=0.5)
    gens = [torch.Generator().manual_seed(s) for s in (1, 2, 3)]
    batch = sample(model, cfg, generator=gens, length=10)
    for i, s in enumerate((1, 2, 3)):
        alone = sample(model, cfg, generator=[torch.Generator().manual_seed(s)], length=10)
        assert (batch.row(i).final == alone.final).all()
        assert (batch.row(i).committed_at == alone.committed_at).all()


def test_factor_rule_commits_while_the_nth_clears_its_bar():
    model = MockDenoiser(table_from_probs(PROBS))
    tr = sample(model, SamplerConfig(temperature=0, factor=1.0))
    # confidences .90 .70 .65 .50 .40 .35; bars 1 - 1/(n+1): .50 .667 .75 ...: .90 and .70 pass
    assert sorted(np.flatnonzero(tr.committed_at[0] == 0).tolist()) == [2, 4]
    assert (tr.final[0] != MASK).all() and tr.nfe == tr.n_steps
    loose = sample(model, SamplerConfig(temperature=0, factor=10.0))
    assert loose.n_steps == 1  # every bar below 0: all in one step


# ---- greedy decoding against LLaDA's published generate rule -------------------------------------

def _transfer_counts(n_masked: int, steps: int) -> list[int]:
    """LLaDA's get_num_transfer_tokens: n // steps each, the first n % steps one more."""
    base, rem = divmod(n_masked, steps)
    return [base + (i < rem) for i in range(steps)]


def llada_generate(logits_of, prompt: torch.Tensor, mask_id: int, steps: int, gen_length: int, block_length: int):
    """LLaDA's generate at temperature 0 with low-confidence remasking, written from its paper and
    published code (`logits_of(x)` is its `model(x).logits`); [MASK] excluded from the argmax as the
    explorer's sampler does."""
    x = torch.full((1, len(prompt) + gen_length), mask_id, dtype=torch.long)
    x[0, :len(prompt)] = prompt
    n_blocks = gen_length // block_length
    for b in range(n_blocks):
        start, end = len(prompt) + b * block_length, len(prompt) + (b + 1) * block_length
        counts = _transfer_counts(int((x[0, start:end] == mask_id).sum()), steps // n_blocks)
        for k in counts:
            mask_index = x == mask_id
            logits = logits_of(x).float()
            logits[..., mask_id] = -torch.inf
            x0 = logits.argmax(-1)
            x0_p = F.softmax(logits, dim=-1).gather(-1, x0[..., None]).squeeze(-1)
            x0_p[:, end:] = -torch.inf
            confidence = torch.where(mask_index, x0_p, torch.tensor(-torch.inf))
            chosen = confidence[0].topk(k).indices
            x[0, chosen] = x0[0, chosen]
    return x[0]


@pytest.mark.parametrize("steps,gen_length,block_length", [(8, 16, 16), (8, 16, 4), (12, 12, 6)])
def test_greedy_decoding_reproduces_llada_generate(tmp_path_factory, steps, gen_length, block_length):
    pytest.importorskip("transformers")
    from explorer import load_checkpoint
    from tests.support.hf import bert_dir

    model = load_checkpoint(str(bert_dir(tmp_path_factory.mktemp("bert"), seed=3)))
    prompt = "to be or not"
    ids = torch.tensor(model.tokenizer.encode(prompt))
    with torch.no_grad():
        want = llada_generate(model, ids, model.config.mask_id, steps, gen_length, block_length)
    cfg = SamplerConfig(steps=steps, temperature=0, strategy="confidence", schedule="linear",
                        block_length=block_length)
    got = sample(model, cfg, template=prompt + "█" * gen_length)
    assert got.final[0].tolist() == want.tolist()
