"""The diffusion sampler against a mock denoiser whose logits are known, plus a tiny real Transformer."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from explorer.model import ModelConfig, Transformer
from explorer.sampling import (SCHEDULES, STRATEGIES, SamplerConfig, SamplingCancelled, StepRecord, sample,
                               sample_any)
from explorer.sampling import config as config_module
from explorer.sampling.sampler import call_model
from explorer.sampling.proposals import draw, filter_logits, inverse_cdf, never_weight_zero
from tests.support.models import MASK, PROBS, TOK, MockDenoiser, make_model, random_mock, table_from_probs

# The order each strategy commits support.models.PROBS's six positions in.
EXPECTED_ORDER = {"confidence": [2, 4, 3, 0, 1, 5], "margin": [2, 4, 3, 1, 5, 0],
                  "entropy": [2, 3, 0, 4, 5, 1], "left_to_right": [0, 1, 2, 3, 4, 5]}


def commits_per_step(tr) -> list[int]:
    return tr.committed[:, 0].sum(axis=1).tolist()


def test_registries_match_config_names_and_unknown_names_list_valid_ones():
    assert tuple(STRATEGIES) == config_module.STRATEGIES
    assert tuple(SCHEDULES) == config_module.SCHEDULES
    with pytest.raises(ValueError, match="confidence, margin, entropy, random, left_to_right"):
        SamplerConfig(strategy="best")
    with pytest.raises(ValueError, match="remaining, linear, cosine"):
        SamplerConfig(schedule="exp")
    # the schedule's older name is read as the current one (saved links and sweeps keep working)
    assert SamplerConfig(schedule="seed") == SamplerConfig(schedule="remaining")
    with pytest.raises(ValueError, match="remask"):
        SamplerConfig(remask=0.2, threshold=0.9)


@pytest.mark.parametrize("strategy", sorted(EXPECTED_ORDER))
def test_strategy_commits_in_expected_order(strategy):
    model = MockDenoiser(table_from_probs(PROBS))
    tr = sample(model, SamplerConfig(steps=6, temperature=0, strategy=strategy))
    order = np.argsort(tr.committed_at[0], kind="stable").tolist()
    assert order == EXPECTED_ORDER[strategy]
    assert (tr.final[0] == 0).all()  # greedy proposals: 'a' everywhere, [MASK] (logit 20) never


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_each_commit_takes_the_best_scores_of_the_step(strategy):
    tr = sample(random_mock(), SamplerConfig(steps=5, strategy=strategy, seed=3), batch_size=3)
    for s in range(tr.n_steps):
        committed = tr.committed_at == s  # (B, L)
        masked = tr.tokens[s] == MASK
        for b in range(3):
            won, lost = tr.scores[s, b][committed[b]], tr.scores[s, b][masked[b] & ~committed[b]]
            assert len(won) and (len(lost) == 0 or won.min() >= lost.max())


def test_random_strategy_order_depends_on_seed():
    model = MockDenoiser(table_from_probs(PROBS))
    order = lambda seed: tuple(sample(model, SamplerConfig(steps=6, strategy="random", seed=seed)).committed_at[0])
    orders = [order(s) for s in range(6)]
    assert all(sorted(o) == list(range(6)) for o in orders)  # one position per step, every position once
    assert len(set(orders)) == 6 and order(3) == orders[3]  # six seeds, six orders; a seed repeats its own


SCHEDULE_CASES = {  # (N, S) -> commits per step
    "linear": {(10, 4): [3, 3, 2, 2], (3, 5): [1, 1, 1, 0, 0], (6, 6): [1] * 6, (7, 1): [7]},
    "remaining": {(10, 4): [2, 2, 3, 3], (3, 5): [1, 1, 1, 0, 0], (6, 6): [1] * 6, (7, 1): [7]},
    "cosine": {(10, 4): [1, 2, 4, 3], (3, 5): [1, 0, 1, 1, 0], (7, 1): [7], (12, 3): [2, 4, 6]},
}


@pytest.mark.parametrize("name", list(SCHEDULE_CASES))
def test_schedule_counts_direct(name):
    for (N, S), expected in SCHEDULE_CASES[name].items():
        n, got = torch.tensor([N]), []
        for s in range(S):
            k = int(SCHEDULES[name](n, torch.tensor([N]), s, S))
            got.append(k)
            n = n - k
        assert got == expected, (N, S)


@pytest.mark.parametrize("name", list(SCHEDULE_CASES))
def test_schedule_counts_through_the_sampler(name):
    for (N, S), expected in SCHEDULE_CASES[name].items():
        tr = sample(random_mock(L=N), SamplerConfig(steps=S, schedule=name), batch_size=2)
        assert commits_per_step(tr) == expected, (N, S)
        assert (tr.final != MASK).all()


CONFIGS = [dict(steps=1), dict(steps=7, schedule="remaining"), dict(steps=20, schedule="cosine"),
           dict(steps=5, block_length=5), dict(steps=6, remask=0.5, remask_t_on=1.0),
           dict(threshold=0.5), dict(steps=4, strategy="random", top_p=0.5, top_k=2, temperature=2.0)]


@pytest.mark.parametrize("knobs", CONFIGS, ids=str)
def test_invariants(knobs):
    """No [MASK] left, [MASK] never proposed, steps+1 snapshots, fixed positions untouched."""
    model = random_mock(L=12)
    tr = sample(model, SamplerConfig(**knobs), batch_size=4, template="ab██[___]██c")
    S = tr.n_steps
    assert tr.tokens.shape == (S + 1, 4, 12) and tr.scores.shape == (S, 4, 12) == tr.proposals.shape
    assert (tr.final != MASK).all() and (tr.tokens[-1] == tr.final).all()
    assert (tr.proposals != MASK).all()
    fixed = tr.fixed[0]
    assert fixed.tolist() == [True] * 2 + [False] * 9 + [True]
    assert (tr.tokens[:, :, fixed] == np.array(TOK.encode("abc"))).all()
    assert (tr.committed_at[:, fixed] == -1).all() and (tr.committed_at[:, ~fixed] >= 0).all()
    assert np.isnan(tr.scores[:, :, fixed]).all() and np.isnan(tr.confidence[:, :, fixed]).all()
    assert model.config.mask_id not in tr.proposals


def test_committed_at_agrees_with_the_snapshots():
    tr = sample(random_mock(), SamplerConfig(steps=5, seed=1), batch_size=2)
    for b in range(2):
        for p, c in enumerate(tr.committed_at[b]):
            assert tr.tokens[c, b, p] == MASK and (tr.tokens[c + 1:, b, p] == tr.final[b, p]).all()
            assert tr.commit_confidence[b, p] == pytest.approx(tr.confidence[c, b, p])


def test_determinism_by_seed_and_generator():
    model = random_mock()
    cfg = SamplerConfig(steps=4, strategy="random", remask=0.3, remask_t_on=1.0, seed=7)
    a, b = sample(model, cfg, batch_size=3), sample(model, cfg, batch_size=3)
    c = sample(model, cfg, batch_size=3, generator=torch.Generator().manual_seed(7))
    for key in ("tokens", "scores", "proposals", "confidence", "remasked", "committed_at"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
        np.testing.assert_array_equal(getattr(a, key), getattr(c, key))
    assert a.seed == 7 and c.seed == -1
    d = sample(model, cfg.replace(seed=8), batch_size=3)
    assert not np.array_equal(a.tokens, d.tokens)


def test_record_false_keeps_final_nfe_and_timings_only():
    model = random_mock()
    cfg = SamplerConfig(steps=4, seed=2)
    full, lean = sample(model, cfg, batch_size=2), sample(model, cfg, batch_size=2, record=False)
    assert lean.tokens is None and lean.scores is None and not lean.recorded
    np.testing.assert_array_equal(full.final, lean.final)
    assert lean.nfe == full.nfe and len(lean.step_seconds) == 4 and lean.seconds > 0


def test_temperature_zero_is_greedy():
    model = random_mock(L=10)
    tr = sample(model, SamplerConfig(steps=3, temperature=0, strategy="random"), batch_size=3)
    expected = model.table[:, :MASK].argmax(dim=1).numpy()  # [MASK] excluded although its logit is 20
    assert (tr.final == expected).all()


def test_temperature_annealing_is_linear_across_steps():
    tr = sample(random_mock(), SamplerConfig(steps=5, temperature=1.5, temperature_end=0.5))
    np.testing.assert_allclose(tr.temperatures, [1.5, 1.25, 1.0, 0.75, 0.5], rtol=1e-6)


def test_filter_top_k_then_top_p_on_a_known_distribution():
    logits = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05]).log()
    kept = lambda **kw: torch.isfinite(filter_logits(logits, **kw)).nonzero().flatten().tolist()
    assert kept(top_p=0.9) == [0, 1, 2, 3]  # 0.85 < 0.9, 0.95 reaches it
    assert kept(top_p=0.65) == [0, 1]  # 0.4 < 0.65, then 0.7 reaches it
    assert kept(top_p=0.05) == [0]  # always at least one
    assert kept(top_k=3) == [0, 1, 2]
    assert kept(top_k=2, top_p=0.5) == [0]  # top-p on what top-k kept: 0.4/0.7 = 0.57 >= 0.5
    assert kept(top_k=0, top_p=1.0) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_draws_follow_the_tempered_distribution(temperature):
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    n = 40_000
    logits = p.log().expand(n, -1)
    tokens = draw(logits, temperature, torch.Generator().manual_seed(0))
    freq = torch.bincount(tokens, minlength=4).double() / n
    expected = torch.softmax(p.double().log() / temperature, dim=0)
    assert torch.allclose(freq, expected, atol=0.01), (freq, expected)
    # top-p applies to the tempered distribution: at T=2 it is flatter, so 0.75 needs three tokens
    filtered = draw(logits, temperature, torch.Generator().manual_seed(0), top_p=0.75)
    assert set(filtered.unique().tolist()) == ({0, 1} if temperature == 1.0 else {0, 1, 2})


def test_inverse_cdf_maps_each_uniform_to_its_tokens_interval_and_never_to_a_zero_weight_token():
    """Weights 0.5 / 0 / 0.3 / 0.2 (-inf: [MASK] or filtered out): [0, .5) -> 0, [.5, .8) -> 2, [.8, 1) -> 3;
    the largest uniform (1 - 2^-53) still lands on the last token of positive weight, never on the -inf
    one after it: u x total, rounded to nearest, stays under the total."""
    scaled = torch.tensor([0.5, 0.0, 0.3, 0.2, 0.0], dtype=torch.float64).log()  # (V,) last: -inf, as [MASK]
    u = torch.tensor([0.0, 0.25, 0.4999, 0.5, 0.79, 0.8, 0.95, 1 - 2**-53], dtype=torch.float64)
    tokens = inverse_cdf(scaled.expand(len(u), -1), u)
    assert tokens.tolist() == [0, 0, 0, 2, 2, 3, 3, 3]
    peaked = torch.tensor([[0.0, -1e4, float("-inf")]], dtype=torch.float64)  # unnormalised, far apart
    assert inverse_cdf(peaked, torch.tensor([1 - 2**-53], dtype=torch.float64)).tolist() == [0]
    totals = torch.rand(100_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2.0**40 + 1
    assert ((1 - 2**-53) * totals < totals).all()


def test_off_the_cpu_a_drawn_weight_zero_token_becomes_the_most_likely_one():
    """A GPU's parallel cumulative sum may give a weight-0 token an interval a rounding step wide: such a
    draw (or one past the end) is replaced by the argmax; every other draw is kept."""
    scaled = torch.tensor([[0.0, float("-inf"), 1.0, float("-inf")]] * 4, dtype=torch.float64)
    assert never_weight_zero(scaled, torch.tensor([0, 1, 3, 4])).tolist() == [0, 2, 2, 2]
    assert never_weight_zero(scaled, torch.tensor([2, 0, 2, 0])).tolist() == [2, 0, 2, 0]

def test_a_draw_takes_one_seeded_float64_uniform_per_entry():
    """One uniform per entry, not one per vocabulary entry: the cost of drawing no longer grows with V (a real
    model's 126k tokens), and the generator moves by exactly the entries drawn."""
    logits = torch.randn(6, 5000, generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(0)
    first = draw(logits, 1.0, g)
    after = torch.rand(1, generator=g, dtype=torch.float64)
    reference = torch.Generator().manual_seed(0)
    u = torch.rand(6, generator=reference, dtype=torch.float64)  # (6,) the draw's uniforms
    assert torch.equal(after, torch.rand(1, generator=reference, dtype=torch.float64))
    assert torch.equal(first, inverse_cdf(logits.double(), u))
    assert torch.equal(first, draw(logits, 1.0, torch.Generator().manual_seed(0)))  # seeded


def test_threshold_commits_all_above_gamma_and_at_least_one_per_call():
    model = MockDenoiser(table_from_probs(PROBS))
    tr = sample(model, SamplerConfig(threshold=0.6, temperature=0))
    assert commits_per_step(tr) == [3, 1, 1, 1]  # .9 .7 .65 together, then .5, .4, .35 one by one
    assert sorted(np.flatnonzero(tr.committed_at[0] == 0)) == [2, 3, 4]
    assert tr.nfe == tr.n_steps == len(model.ts) == 4
    low = sample(model, SamplerConfig(threshold=0.0, temperature=0))
    assert low.nfe == 1 and (low.final != MASK).all()


def test_threshold_with_a_batch_finishes_every_row():
    tr = sample(random_mock(L=16), SamplerConfig(threshold=0.9, strategy="margin"), batch_size=5)
    assert (tr.final != MASK).all()
    assert all((tr.committed_at == s).any() for s in range(tr.n_steps))


def _check_revision_is_lowest_confidence(tr, eta):
    """Replay the run: each revision sends back the ceil(eta*d) lowest-confidence decoded tokens."""
    for b in range(tr.batch_size):
        conf = {}
        for s in range(tr.n_steps):
            for p in np.flatnonzero(tr.committed[s, b]):
                conf[p] = tr.confidence[s, b, p]
            back = np.flatnonzero(tr.remasked[s, b])
            if len(back):
                assert len(back) == math.ceil(eta * len(conf) - 1e-9)
                assert max(conf[p] for p in back) <= min((c for p, c in conf.items() if p not in back),
                                                         default=np.inf)
            for p in back:
                del conf[p]


def test_revision_remasks_lowest_confidence_and_still_finishes():
    for schedule in SCHEDULES:
        cfg = SamplerConfig(steps=8, schedule=schedule, remask=0.25, remask_t_on=1.0, remask_t_off=0.0, seed=4)
        tr = sample(random_mock(L=12), cfg, batch_size=3)
        assert tr.remasked.any(), schedule
        assert not tr.remasked[-1].any()  # never at the last step
        assert (tr.final != MASK).all()
        decoded = (tr.tokens[:-1] != MASK) | tr.committed  # (S, B, L) after each step's commits
        assert (decoded[tr.remasked]).all()
        assert (tr.tokens[1:][tr.remasked] == MASK).all()
        _check_revision_is_lowest_confidence(tr, 0.25)


def test_revision_window_limits_when_it_happens():
    cfg = SamplerConfig(steps=10, remask=0.5, remask_t_on=0.5, remask_t_off=0.2, seed=1)
    tr = sample(random_mock(L=20), cfg, batch_size=2)
    for s in np.flatnonzero(tr.remasked.any(axis=(1, 2))):
        for b in np.flatnonzero(tr.remasked[s].any(axis=1)):
            after_commit = (tr.tokens[s + 1, b] == MASK).sum() - tr.remasked[s, b].sum()
            assert 0.2 <= after_commit / 20 <= 0.5
    assert (tr.final != MASK).all()


def test_blocks_never_commit_beyond_the_current_block():
    tr = sample(random_mock(L=12), SamplerConfig(steps=6, block_length=4), batch_size=3,
                template="a██████████b")  # 10 to generate: blocks of 4, 4, 2
    assert tr.blocks.tolist() == [-1, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, -1]
    assert tr.n_steps == 6
    step_block = np.repeat([0, 1, 2], 2)  # steps split 2, 2, 2
    for s in range(6):
        committed = tr.committed_at == s  # (B, L)
        assert (tr.blocks[np.nonzero(committed)[1]] == step_block[s]).all()
    assert (tr.final != MASK).all()


def test_blocks_split_steps_unevenly_and_give_each_block_a_step():
    tr = sample(random_mock(L=10), SamplerConfig(steps=7, block_length=4))  # blocks 4, 4, 2
    assert [int(tr.committed_at[0][tr.blocks == b].max()) for b in range(3)] == [2, 4, 6]  # 3, 2, 2 steps
    few = sample(random_mock(L=8), SamplerConfig(steps=2, block_length=2))
    assert few.n_steps == 4 and (few.final != MASK).all()


def test_model_is_called_only_when_the_canvas_changed():
    for tc in ("none", "adaln"):
        model = random_mock(L=3, time_conditioning=tc)
        tr = sample(model, SamplerConfig(steps=5, schedule="cosine"))  # commits 1, 0, 1, 1, 0
        assert commits_per_step(tr) == [1, 0, 1, 1, 0]
        assert tr.called_model.tolist() == [True, True, False, True, False]
        assert tr.nfe == len(model.ts) == 3
        idle = tr.scores[4]  # nothing left to commit: no proposals at all
        assert np.isnan(idle).all()


def test_model_sees_the_masked_fraction_of_each_row():
    model = random_mock(L=10)
    sample(model, SamplerConfig(steps=3, temperature=50), batch_size=2, template="ab████████")
    # Step 1: both rows are the same canvas, computed as one row (call_model); then each row its own.
    assert model.ts[0].tolist() == pytest.approx([0.8])
    assert model.ts[1].tolist() == pytest.approx([0.5, 0.5])  # linear schedule: 3, 3, 2 of 8
    assert model.ts[2].tolist() == pytest.approx([0.2, 0.2])


def test_identical_rows_are_computed_once_and_given_to_every_row():
    model = make_model(vocab_size=5, mask_id=MASK, block_size=6, time_conditioning="adaln")
    rows_seen = []
    model.register_forward_hook(lambda mod, args, out: rows_seen.append(args[0].shape[0]))
    x = torch.tensor([[1, 2, MASK, MASK, 3, MASK]] * 4)
    t = torch.full((4,), 0.5)
    with torch.no_grad():
        out = call_model(model, x, t)
        assert rows_seen == [1] and out.shape == (4, 6, 5)
        assert torch.equal(out[3], model(x[:1], t[:1])[0])
        x[2, 0] = 0  # the rows differ now: the whole batch goes through
        assert torch.equal(call_model(model, x, t), model(x, t))
    assert rows_seen == [1, 1, 4, 4]


def test_on_step_sees_every_step_and_can_cancel():
    seen = []
    tr = sample(random_mock(), SamplerConfig(steps=4), batch_size=2, on_step=seen.append)
    assert [r.index for r in seen] == [0, 1, 2, 3] and isinstance(seen[0], StepRecord)
    np.testing.assert_array_equal(seen[-1].tokens, tr.final)
    with pytest.raises(SamplingCancelled) as info:
        sample(random_mock(), SamplerConfig(steps=4), on_step=lambda r: r.index < 1)
    assert info.value.step == 1


def test_should_stop_cancels_after_the_step_it_trips_without_building_records(monkeypatch):
    import explorer.sampling.recorder as recorder

    calls = []
    stop = lambda: calls.append(1) or len(calls) >= 2  # noqa: E731  trips after the second step
    monkeypatch.setattr(recorder, "StepRecord", None)  # record=False + should_stop must never build one
    with pytest.raises(SamplingCancelled, match="should_stop") as info:
        sample(random_mock(), SamplerConfig(steps=8), record=False, should_stop=stop)
    assert info.value.step == 1 and len(calls) == 2
    never = sample(random_mock(), SamplerConfig(steps=4), record=False, should_stop=lambda: False)
    assert never.tokens is None and len(never.step_seconds) == 4


def test_length_template_and_batch_errors():
    model = random_mock(L=12)
    with pytest.raises(ValueError, match="context"):
        sample(model, SamplerConfig(), length=13)
    with pytest.raises(ValueError, match="'x'"):
        sample(model, SamplerConfig(), template="abx█")
    with pytest.raises(ValueError, match="batch_size"):
        sample(model, SamplerConfig(), batch_size=0)
    model.tokenizer = None
    with pytest.raises(ValueError, match="tokenizer"):
        sample(model, SamplerConfig(), template="ab█")
    assert sample(model, SamplerConfig(steps=2), length=5).final.shape == (1, 5)


def test_plain_prompt_fills_the_context_and_length_sets_the_canvas():
    tr = sample(random_mock(L=12), SamplerConfig(steps=3), template="abc")
    assert tr.length == 12 and tr.fixed[0].sum() == 3
    assert sample(random_mock(L=12), SamplerConfig(steps=3), template="abc", length=6).length == 6


def tiny_transformer(kind="diffusion", time_conditioning="adaln") -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=TOK.vocab_size, mask_id=MASK, block_size=16, n_layer=2, n_head=2, n_embd=16,
                      kind=kind, time_conditioning=time_conditioning)
    model = Transformer(cfg)
    model.tokenizer = TOK
    return model


def test_real_transformer_end_to_end_and_mode_restored():
    model = tiny_transformer()
    model.train()
    cfg = SamplerConfig(steps=4, strategy="margin", schedule="cosine", top_p=0.9)
    a = sample_any(model, cfg, batch_size=3, template="ab[___]")
    b = sample_any(model, cfg, batch_size=3, template="ab[___]")
    assert model.training  # eval inside, restored after
    assert a.kind == "diffusion" and a.length == 7 and (a.final != MASK).all() and a.nfe <= 4
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert all(t.startswith("ab") and len(t) == 7 for t in a.texts())
