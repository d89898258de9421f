"""The uniform-state process (explorer/sampling/uniform.py) on a mock denoiser with known logits, as our own
uniform-state checkpoints run it (no cache: one block, the whole canvas, by default): its events, its
invariants, and the distributions of its draws over seeds. DiffusionGemma itself (a cache, blocks,
self-conditioning) is tests/unit/hf/test_diffusion_gemma.py's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.sampling import SamplerConfig, plan_run, sample
from explorer.sampling.uniform import entropy_bound_accept, own_model_logits, token_entropy

from tests.support.models import MASK, gen, random_mock


def uniform_mock(L=12, seed=0):
    """random_mock (logits over a..d, a huge [MASK] logit) as a uniform-state model: its metadata's process."""
    model = random_mock(L, seed)
    model.meta = {"process": "uniform"}
    return model


def test_entropy_bound_accepts_the_lowest_entropies_up_to_the_bound():
    h = torch.tensor([[0.5, 0.1, 2.0, 0.3, 0.05]])
    # sorted 0.05, 0.1, 0.3, 0.5, 2.0: sums before each 0, 0.05, 0.15, 0.45, 0.95
    assert entropy_bound_accept(h, 0.2).tolist() == [[False, True, False, True, True]]
    assert entropy_bound_accept(h, 0.0).tolist() == [[False, False, False, False, True]]  # the lowest always
    assert entropy_bound_accept(h, 1.0).all()
    probs = torch.tensor([[0.25, 0.25, 0.25, 0.25]])
    assert torch.allclose(token_entropy(probs.log()), torch.tensor([np.log(4.0)], dtype=torch.float32))


def test_a_run_accepts_renoises_and_settles_every_position_once():
    model = uniform_mock()
    cfg = SamplerConfig(steps=10, temperature=1.0, temperature_end=0.5, entropy_bound=0.5, seed=3, stop_entropy=None)
    tr = sample(model, cfg, template="ab████████cd", batch_size=3)
    gen_pos = ~tr.fixed[0]
    assert tr.process == "uniform" and tr.n_steps == 10 and tr.tokens.shape[0] == 11
    assert (tr.tokens[..., ~gen_pos] == tr.tokens[:1][..., ~gen_pos]).all()  # the given text never changes
    assert not (tr.tokens[0][:, gen_pos] == MASK).any()  # row 0: the block's random start, never [MASK]
    assert not (tr.final == MASK).any() and not (tr.proposals == MASK).any()  # [MASK] is not a text token
    assert not (tr.committed & tr.remasked).any()
    live = tr.committed | tr.remasked | tr.settled
    assert live[:, :, gen_pos].all() and not live[:, :, ~gen_pos].any()  # every step touches every position
    assert (tr.settled.sum(axis=0)[:, gen_pos] == 1).all() and tr.settled[-1][:, gen_pos].all()
    assert (tr.committed_at[:, gen_pos] == 9).all() and (tr.committed_at[:, ~gen_pos] == -1).all()
    # settled tokens are the draft: the argmax of p(x0 | x_t) given the canvas of the last call
    post = own_model_logits(model.table[None].expand(3, -1, -1), torch.as_tensor(tr.tokens[-2]), model.ts[-1])
    np.testing.assert_array_equal(tr.final[:, gen_pos], post.argmax(-1)[:, gen_pos].numpy())
    np.testing.assert_allclose(tr.temperatures, [0.5 + 0.5 * (10 - s) / 10 for s in range(10)], rtol=1e-6)


def test_each_step_reads_the_canvas_it_sees_with_its_own_tokens_put_back():
    """Our own model's network leaves each position's own token out (the optimum of the ELBO it trains on,
    diffusion.uniform_posterior_logits); the run reads p(x0 | x_t), so a token on the canvas (one accepted
    the step before) is evidence for itself: each step's entropies are those of that posterior, given the
    canvas the model saw and the t it was told, not the network's output alone."""
    model = uniform_mock(L=8, seed=4)
    cfg = SamplerConfig(steps=6, temperature=0.9, entropy_bound=2.0, seed=0, stop_entropy=None)
    tr = sample(model, cfg, length=8, batch_size=2)
    assert (torch.stack(model.ts[1:]) < 1).any()  # some steps see part of the canvas as clean
    for s in range(6):
        post = own_model_logits(model.table[None].expand(2, -1, -1), torch.as_tensor(tr.tokens[s]), model.ts[s])
        np.testing.assert_allclose(-tr.scores[s], token_entropy(post / 0.9).numpy(), rtol=1e-5, atol=1e-6)


def test_the_same_seed_gives_the_same_run_and_the_stop_ends_blocks_early():
    model = uniform_mock()
    model.table = model.table * 10  # so sure of its argmax that no token on the canvas outweighs it
    cfg = SamplerConfig(steps=40, temperature=0.3, entropy_bound=0.5, seed=1, stop_entropy=5.0, stable_steps=2)
    a, b = sample(model, cfg, length=12, batch_size=2), sample(model, cfg, length=12, batch_size=2)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    # this mock's draft never changes: stable from step 3 on (two equal drafts before it), and confident
    assert a.n_steps == 3 and a.settled[2].all()
    with pytest.raises(ValueError, match="one generator"):
        sample(model, cfg, length=12, generator=[gen(0), gen(1)])


def test_blocks_settle_left_to_right():
    tr = sample(uniform_mock(), SamplerConfig(steps=4, block_length=4, seed=0, stop_entropy=None), length=12)
    settled = [np.flatnonzero(tr.settled[:, 0, p])[0] for p in range(12)]
    assert settled == [3] * 4 + [7] * 4 + [11] * 4
    assert (tr.tokens[:4, 0, 4:] == MASK).all()  # a block not started holds the placeholder


def test_draws_and_noise_follow_their_distributions_over_seeds():
    """Over 400 seeds: the first step's draw at a position follows softmax(logits / T), and the noise
    that replaces what is not accepted is uniform over the real tokens (never [MASK])."""
    model = uniform_mock(L=6, seed=2)
    T, n = 0.7, 400
    drawn, noise = [], []
    for seed in range(n):
        tr = sample(model, SamplerConfig(steps=2, temperature=T, entropy_bound=0.01, seed=seed, stop_entropy=None),
                    length=6)
        drawn.append(tr.proposals[0, 0])
        renoised = tr.remasked[0, 0]
        noise.extend(tr.tokens[1, 0][renoised].tolist())
    drawn = np.stack(drawn)  # (n, 6)
    want = torch.softmax(model.table[:6, :MASK] / T, dim=1).numpy()  # (6, 4)
    got = np.stack([(drawn == v).mean(axis=0) for v in range(MASK)], axis=1)  # (6, 4)
    assert np.abs(got - want).max() < 4 * np.sqrt(0.25 / n)  # within 4 standard errors
    counts = np.bincount(noise, minlength=MASK + 1)
    assert counts[MASK] == 0 and len(noise) > 1000
    assert np.abs(counts[:MASK] / len(noise) - 1 / MASK).max() < 4 * np.sqrt(0.25 / len(noise))


def test_our_own_uniform_state_checkpoint_samples_through_the_loader(tmp_path):
    """A checkpoint whose metadata says process=uniform (run.py train --process uniform): loaded by the one
    loader, sampled by the uniform process over the whole canvas (no cache), t the share it sees as noise."""
    from explorer import load_checkpoint
    from explorer.checkpoint import save_checkpoint
    from explorer.data.patterns import pattern_tokenizer
    from tests.support.models import make_model

    tok = pattern_tokenizer()
    net = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=16, n_layer=1, n_embd=32, n_head=2,
                     seed=1, time_conditioning="adaln")
    save_checkpoint(net, tmp_path / "u.safetensors", {"tokenizer": tok.to_dict(), "process": "uniform"},
                    dtype=torch.float32)
    model = load_checkpoint(tmp_path / "u.safetensors")
    seen = []
    forward = model.forward
    model.forward = lambda x, t: (seen.append(t.clone()), forward(x, t))[1]
    cfg = SamplerConfig(steps=5, entropy_bound=2.0, seed=0, stop_entropy=None)
    plan = plan_run(model, cfg, template="AB" + "█" * 10)
    assert plan.process == "uniform" and plan.n_blocks == 1 and plan.steps == (5,)
    tr = sample(model, cfg, plan=plan, batch_size=2)
    assert tr.process == "uniform" and tr.nfe == 5 and not (tr.final == tok.mask_id).any()
    assert tr.final[0, :2].tolist() == tok.encode("AB")
    assert torch.equal(seen[0], torch.ones(2))  # the first call sees only noise
    renoised = tr.remasked.sum(axis=2)[:-1] / 10  # (steps - 1, rows): what the next call sees as noise
    np.testing.assert_allclose(torch.stack(seen[1:]).numpy(), renoised, rtol=1e-6)
