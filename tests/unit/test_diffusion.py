import math

import pytest
import torch
import torch.nn.functional as F

from explorer import diffusion
from tests.support.models import make_model


def test_masked_fraction_matches_t_and_fixed_positions_survive():
    g = torch.Generator().manual_seed(0)
    x0 = torch.zeros(2000, 50, dtype=torch.long)
    fixed = torch.zeros(50, dtype=torch.bool)
    fixed[:5] = True
    for t in (0.1, 0.5, 0.9):
        xt, masked = diffusion.forward_mask(x0, torch.full((2000,), t), mask_id=7, fixed=fixed, generator=g)
        assert not masked[:, :5].any()
        assert (xt[masked] == 7).all() and (xt[~masked] == 0).all()
        assert abs(masked[:, 5:].float().mean().item() - t) < 0.01


def test_sample_t_range_and_stratification():
    g = torch.Generator().manual_seed(0)
    t = diffusion.sample_t(8, eps=1e-3, stratified=True, generator=g)
    assert t.min() >= 1e-3 and t.max() <= 1
    # one draw per stratum of width 1/8
    assert sorted(int((v - 1e-3) / (1 - 1e-3) * 8) for v in t.tolist()) == list(range(8))


def _hand_example():
    # 1 row, 3 positions, vocab 4 with mask id 3; positions 0 and 2 masked
    logits = torch.tensor([[[2.0, 0.0, 0.0, 9.0], [0.0, 1.0, 0.0, 9.0], [0.0, 0.0, 3.0, 9.0]]])
    x0 = torch.tensor([[0, 1, 1]])
    masked = torch.tensor([[True, False, True]])
    return logits, x0, masked


def test_masked_ce_excludes_mask_logit_and_unmasked_positions():
    logits, x0, masked = _hand_example()
    ce = diffusion.masked_ce(logits.clone(), x0, masked, mask_id=3)
    p0 = -math.log(math.exp(2) / (math.exp(2) + 2))  # mask logit (9.0) is excluded
    p2 = -math.log(1 / (2 + math.exp(3)))
    assert ce[0, 1] == 0
    assert ce[0, 0].item() == pytest.approx(p0, rel=1e-5)
    assert ce[0, 2].item() == pytest.approx(p2, rel=1e-5)


def test_uniform_and_elbo_weightings_by_hand():
    logits, x0, masked = _hand_example()
    ce = diffusion.masked_ce(logits.clone(), x0, masked, mask_id=3)
    t = torch.tensor([0.5])
    total = ce.sum().item()
    assert diffusion.weighted_loss(ce, masked, t, "uniform").item() == pytest.approx(total / 2)
    assert diffusion.weighted_loss(ce, masked, t, "elbo").item() == pytest.approx(total / (0.5 * 3))
    with pytest.raises(ValueError, match="weighting"):
        diffusion.weighted_loss(ce, masked, t, "other")


def test_nelbo_is_deterministic_and_positive():
    m = make_model(block_size=16)
    tokens = torch.randint(0, 11, (6, 16), generator=torch.Generator().manual_seed(1))
    a = diffusion.nelbo(m, tokens, n_t=4, seed=3)
    b = diffusion.nelbo(m, tokens, n_t=4, seed=3)
    assert a == b
    assert a["nats_per_char"] > 0
    assert a["bits_per_char"] == pytest.approx(a["nats_per_char"] / math.log(2))


def test_nelbo_of_uniform_predictor_is_log_vocab():
    class Uniform(torch.nn.Module):
        config = type("C", (), {"mask_id": 4})()

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x, t):
            return torch.zeros(*x.shape, 5) + self.w

    tokens = torch.randint(0, 4, (64, 32), generator=torch.Generator().manual_seed(0))
    # E[(1/t) * #masked * log 4 / L] = log 4 for every t: the estimate must land close to it
    assert diffusion.nelbo(Uniform(), tokens, n_t=8)["nats_per_char"] == pytest.approx(math.log(4), rel=0.03)


def test_ar_loss_matches_manual_cross_entropy():
    m = make_model(kind="ar")
    x = torch.randint(0, 11, (2, 9))
    logits = m(x[:, :-1]).clone()
    logits[..., 11] = float("-inf")
    expected = F.cross_entropy(logits.reshape(-1, 12), x[:, 1:].reshape(-1))
    assert diffusion.ar_loss(m, x, 11).item() == pytest.approx(expected.item(), rel=1e-5)
