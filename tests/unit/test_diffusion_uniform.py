"""The uniform-state process of explorer/diffusion.py: forward_uniform's corruption, the continuous-time
ELBO (UDLM / Duo) against the discrete-time ELBO it is the limit of, and the held-out figures."""
import math

import pytest
import torch
import torch.nn.functional as F

from explorer import diffusion


class ConstantModel(torch.nn.Module):
    """Fixed logits (V,) at every position whatever the input: a denoiser whose output is known."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.logits = torch.nn.Parameter(logits.float(), requires_grad=False)
        self.config = type("Config", (), {"mask_id": logits.shape[0] - 1})()

    def forward(self, x, t):
        return self.logits.expand(*x.shape, -1)  # (B, L, V)


class OracleModel(torch.nn.Module):
    """Logits that put (almost) all mass on the clean text it is given: a perfect denoiser."""

    def __init__(self, x0: torch.Tensor, vocab_size: int):
        super().__init__()
        self.x0, self.dummy = x0, torch.nn.Parameter(torch.zeros(1), requires_grad=False)
        self.config = type("Config", (), {"mask_id": vocab_size - 1})()
        self.vocab_size = vocab_size

    def forward(self, x, t):
        return 30.0 * F.one_hot(self.x0[:x.shape[0]], self.vocab_size).float()  # (B, L, V)


@pytest.mark.parametrize("t", [0.1, 0.5, 0.9, 1.0])
def test_forward_uniform_changes_t_times_n_minus_1_over_n_of_the_tokens(t):
    n = 5  # few tokens, so a redraw that keeps its token (1 in 5) is frequent enough to see
    g = torch.Generator().manual_seed(0)
    x0 = torch.randint(0, n, (2000, 60), generator=g)
    fixed = torch.zeros(60, dtype=torch.bool)
    fixed[:6] = True
    xt, redrawn = diffusion.forward_uniform(x0, torch.full((2000,), t), n, fixed=fixed, generator=g)
    assert not redrawn[:, :6].any() and torch.equal(xt[:, :6], x0[:, :6])  # fixed positions survive
    assert torch.equal(xt[~redrawn], x0[~redrawn])
    assert xt.min() >= 0 and xt.max() < n  # noise is real tokens: [MASK] (id n) is never written
    free = (slice(None), slice(6, None))
    assert redrawn[free].float().mean().item() == pytest.approx(t, abs=0.01)
    assert (xt != x0)[free].float().mean().item() == pytest.approx(t * (n - 1) / n, abs=0.01)
    counts = torch.bincount(xt[redrawn], minlength=n).float()  # the redrawn tokens are uniform
    assert (counts / counts.sum() - 1 / n).abs().max() < 0.02


def test_forward_uniform_is_reproducible_from_its_generator():
    x0 = torch.zeros(4, 32, dtype=torch.long)
    a = diffusion.forward_uniform(x0, 0.5, 7, generator=torch.Generator().manual_seed(3))
    b = diffusion.forward_uniform(x0, 0.5, 7, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(u, v) for u, v in zip(a, b))


def test_uniform_elbo_terms_are_zero_for_a_perfect_predictor_and_positive_otherwise():
    g = torch.Generator().manual_seed(0)
    V = 9  # 8 tokens and [MASK]
    x0 = torch.randint(0, V - 1, (16, 20), generator=g)
    t = torch.linspace(0.01, 0.99, 16)
    xt, _ = diffusion.forward_uniform(x0, t, V - 1, generator=g)
    perfect = diffusion.uniform_elbo_terms(30.0 * F.one_hot(x0, V).float(), x0, xt, t)
    random = diffusion.uniform_elbo_terms(torch.randn(16, 20, V, generator=g), x0, xt, t)
    assert torch.isfinite(perfect).all() and torch.isfinite(random).all()
    assert perfect.abs().max() < 1e-4
    assert (random >= 0).all() and random.mean() > 0.1
    # the [MASK] logit is no prediction: raising it changes nothing
    logits = torch.randn(16, 20, V, generator=g)
    raised = logits.clone()
    raised[..., V - 1] = 50.0
    assert torch.allclose(diffusion.uniform_elbo_terms(logits, x0, xt, t),
                          diffusion.uniform_elbo_terms(raised, x0, xt, t))


def test_uniform_elbo_terms_stay_finite_at_the_ends_of_t_and_in_bf16():
    x0 = torch.tensor([[0, 1, 2, 3]])
    logits = torch.randn(1, 4, 5).bfloat16()
    for t in (1e-3, 1 - 1e-6):
        terms = diffusion.uniform_elbo_terms(logits, x0, torch.tensor([[3, 2, 1, 0]]), torch.tensor([t]))
        assert torch.isfinite(terms).all() and (terms >= 0).all()


def _discrete_elbo(p: torch.Tensor, x: int, steps: int) -> float:
    """The T-step ELBO's diffusion terms for one token x of a model that predicts the mean p (N,) at every
    step: sum over steps of E_{z_t} KL(q(z_s | z_t, x) || q(z_s | z_t, p)), the posteriors written out."""
    n = p.shape[0]
    onehot = F.one_hot(torch.tensor(x), n).double()
    t = torch.arange(1, steps + 1, dtype=torch.float64) / steps  # (T,)
    a_t, a_s = 1 - t, 1 - (t - 1 / steps)  # (T,)
    a_ts = (a_t / a_s)[:, None, None]  # (T, 1, 1)
    eye = torch.eye(n, dtype=torch.float64)
    lik = a_ts * eye + (1 - a_ts) / n  # (T, z_t, z_s): q(z_t | z_s)

    def posterior(mean):  # (T, z_t, z_s)
        prior = a_s[:, None, None] * mean + (1 - a_s[:, None, None]) / n
        w = lik * prior
        return w / w.sum(-1, keepdim=True)

    P, Q = posterior(onehot), posterior(p.double())
    kl = torch.where(P > 0, P * (P / Q).log(), torch.zeros(())).sum(-1)  # (T, z_t)
    q_t = a_t[:, None] * onehot + (1 - a_t[:, None]) / n  # (T, z_t)
    return (q_t * kl).sum().item()


def test_continuous_time_elbo_is_the_limit_of_the_discrete_time_elbo():
    """The integral over t of E_{z_t} uniform_elbo_terms equals the T-step ELBO for large T (both written
    out for one token and a fixed prediction), so the terms are the right rates, not just a positive loss."""
    n, x = 5, 2
    logits = torch.randn(n + 1, generator=torch.Generator().manual_seed(0))
    p = torch.softmax(logits[:n].double(), -1)
    ts = torch.linspace(1e-4, 1 - 1e-4, 4001)  # (K,)
    K = ts.shape[0]
    z = torch.arange(n).repeat(K, 1)  # (K, n): every value z_t can take, one per position
    terms = diffusion.uniform_elbo_terms(logits.expand(K, n, n + 1), torch.full((K, n), x), z, ts)  # (K, n)
    q_t = (1 - ts)[:, None] * F.one_hot(torch.tensor(x), n) + ts[:, None] / n  # (K, n): q(z_t | x)
    continuous = torch.trapezoid((q_t * terms).sum(-1).double(), ts.double()).item()
    discrete = _discrete_elbo(p, x, steps=2000)
    assert continuous == pytest.approx(discrete, abs=0.01)
    assert discrete >= -math.log(p[x].item()) - 1e-6  # a bound on the model's -log p(x)


def test_uniform_nelbo_of_a_uniform_predictor_is_log_n_and_deterministic():
    n = 8
    tokens = torch.randint(0, n, (12, 32), generator=torch.Generator().manual_seed(0))
    model = ConstantModel(torch.zeros(n + 1))
    a = diffusion.uniform_nelbo(model, tokens, n_t=8, seed=1)
    assert a == diffusion.uniform_nelbo(model, tokens, n_t=8, seed=1)
    # predicting the uniform distribution whatever the noise: the bound sits at log N (up to the eps cut-off)
    assert a["nats_per_char"] == pytest.approx(math.log(n), rel=0.02)
    assert a["bits_per_char"] == pytest.approx(a["nats_per_char"] / math.log(2))


def test_uniform_nelbo_and_accuracy_of_a_perfect_predictor():
    n = 8
    tokens = torch.randint(0, n, (12, 32), generator=torch.Generator().manual_seed(0))
    oracle = OracleModel(tokens, n + 1)
    assert diffusion.uniform_nelbo(oracle, tokens, n_t=4)["nats_per_char"] < 1e-3
    acc = diffusion.uniform_accuracy(oracle, tokens, 0.5)
    assert acc == {"all": 1.0, "changed": 1.0}
    # always id n-1: far surer of it than any position's own token can argue against (log 9 at t = 0.5)
    blind = diffusion.uniform_accuracy(ConstantModel(torch.zeros(n + 1).index_fill(0, torch.tensor([n - 1]), 30.0)),
                                       tokens, 0.5)
    assert blind["all"] == pytest.approx((tokens == n - 1).float().mean().item())


class IidData:
    """Text whose characters are drawn independently from m (n of them): the best network the uniform ELBO
    can train is known, and so is the exact posterior p(x0 | x_t) at each position."""

    def __init__(self, n=6, rows=48, length=64):
        self.m = torch.tensor([0.4, 0.25, 0.15, 0.1, 0.06, 0.04])[:n]
        self.m = self.m / self.m.sum()
        self.x0 = torch.multinomial(self.m, rows * length, replacement=True,
                                    generator=torch.Generator().manual_seed(0)).view(rows, length)

    def posterior(self, xt, t):
        """(B, L, n) p(x0 | x_t) ∝ m(x) q(x_t | x), q(z | x) = (1 - t)[x = z] + t/n."""
        n = self.m.numel()
        t = t.reshape(-1, 1, 1)
        lik = torch.nn.functional.one_hot(xt, n) * (1 - t) + t / n  # (B, L, n)
        post = lik * self.m
        return post / post.sum(-1, keepdim=True)


class PosteriorModel(torch.nn.Module):
    """The exact p(x0 | x_t) of IidData as its network's output: a denoiser that reads its own token."""

    def __init__(self, data: IidData):
        super().__init__()
        self.data, self.config = data, type("Config", (), {"mask_id": data.m.numel()})()

    def forward(self, x, t):
        post = self.data.posterior(x, t)
        return torch.cat([post.log(), torch.full((*x.shape, 1), -1e9)], dim=-1)  # (B, L, n + 1)


def test_the_elbo_optimum_leaves_the_own_token_out_and_the_posterior_puts_it_back():
    """On independent characters the ELBO is tight (= the entropy of m) for the network that outputs m,
    whatever its input: x_theta is p(x0_i | the other positions), not p(x0_i | x_t), which scores worse.
    uniform_posterior_logits turns that network's output into the exact p(x0 | x_t), and the accuracy
    reads it: at t = 0.3 it scores what copying the input does, where argmax m alone scores m's largest share."""
    data = IidData()
    entropy = -(data.m * data.m.log()).sum().item()
    loo = ConstantModel(torch.cat([data.m.log(), torch.tensor([-1e9])]))
    tight = diffusion.uniform_nelbo(loo, data.x0, n_t=8)["nats_per_char"]
    assert tight == pytest.approx(entropy, rel=0.03)
    assert diffusion.uniform_nelbo(PosteriorModel(data), data.x0, n_t=8)["nats_per_char"] > tight + 0.5
    for t in (0.05, 0.5, 0.95):
        tt = torch.full((data.x0.shape[0],), t)
        xt, _ = diffusion.forward_uniform(data.x0, tt, data.m.numel(), generator=torch.Generator().manual_seed(1))
        got = diffusion.uniform_posterior_logits(loo(xt, tt), xt, tt).exp()
        torch.testing.assert_close(got, data.posterior(xt, tt), rtol=1e-4, atol=1e-6)
    acc = diffusion.uniform_accuracy(loo, data.x0, 0.3)["all"]
    assert acc > 0.7  # copying scores about 1 - 0.3 * 5/6 = 0.75 here; argmax m alone, about 0.4


@pytest.mark.slow
def test_uniform_loss_has_gradients_that_lower_it():
    """A few Adam steps on one batch and one draw of noise lower the loss."""
    from tests.support.models import make_model

    model = make_model(vocab_size=9, mask_id=8, block_size=16, n_layer=1).train()
    x0 = torch.randint(0, 8, (4, 16), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = diffusion.uniform_loss(model, x0, generator=torch.Generator().manual_seed(0))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.7 * losses[0]
