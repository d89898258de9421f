import pytest
import torch

from explorer.model import CanvasKV, KVCache, ModelConfig, Transformer
from tests.support.models import make_model


@pytest.mark.parametrize("tc", ["none", "adaln"])
def test_denoiser_shapes_and_bidirectionality(tc):
    m = make_model(time_conditioning=tc)
    x = torch.randint(0, 11, (3, 10))
    t = torch.full((3,), 0.5)
    logits = m(x, t)
    assert logits.shape == (3, 10, 12) and logits.dtype == torch.float32
    # bidirectional: changing the last token changes the logits at position 0
    x2 = x.clone()
    x2[:, -1] = (x2[:, -1] + 1) % 11
    assert not torch.allclose(m(x2, t)[:, 0], logits[:, 0])


def test_adaln_depends_on_t_and_none_ignores_it():
    m = make_model(time_conditioning="adaln")
    for block in m.blocks:  # leave adaLN-Zero init so t actually matters
        torch.nn.init.normal_(block.ada[1].weight, std=0.05)
    x = torch.randint(0, 11, (2, 8))
    assert not torch.allclose(m(x, torch.tensor([0.1, 0.1])), m(x, torch.tensor([0.9, 0.9])))
    m0 = make_model(time_conditioning="none")
    assert torch.allclose(m0(x, torch.tensor([0.1, 0.1])), m0(x, torch.tensor([0.9, 0.9])))
    with pytest.raises(ValueError, match="pass t"):
        m(x)


def test_weight_tying_and_context_limit():
    m = make_model()
    assert m.head.weight is m.tok_emb.weight
    with pytest.raises(ValueError, match="context"):
        m(torch.zeros(1, 17, dtype=torch.long), torch.ones(1))


def test_ar_is_causal_and_kv_cache_matches_full_forward():
    m = make_model(kind="ar")
    x = torch.randint(0, 11, (2, 12))
    full = m(x)
    x2 = x.clone()
    x2[:, -1] = (x2[:, -1] + 1) % 11
    assert torch.allclose(m(x2)[:, :-1], full[:, :-1], atol=1e-5)  # the future does not leak
    cache = KVCache()
    steps = [m(x[:, :5], cache=cache)]
    for i in range(5, 12):
        steps.append(m(x[:, i:i + 1], cache=cache))
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


@pytest.mark.parametrize("tc", ["none", "adaln"])
def test_canvas_cache_window_forward_reads_the_rest_from_the_cache(tc):
    """Block diffusion's cache: a full forward writes every layer's keys and values; a window forward of the
    same canvas gives the full forward's logits there, while a change outside the window goes unseen (the
    cached entries are what the canvas was: the approximation), exactly so for one layer, whose keys and
    values outside the window only the tokens there (and t) decide."""
    m = make_model(time_conditioning=tc, n_layer=2)
    x, t = torch.randint(0, 11, (2, 16)), torch.tensor([0.5, 0.25])
    with torch.no_grad():
        full, kv = m(x, t), CanvasKV()
        assert torch.equal(m(x, t, cache=kv), full) and len(kv.k) == 2 and kv.k[0].shape == (2, 4, 16, 8)
        assert torch.allclose(m(x[:, 4:8], t, cache=CanvasKV(4, kv.k, kv.v)), full[:, 4:8], atol=1e-5)  # dual
        assert torch.allclose(m(x[:, 4:], t, cache=CanvasKV(4, kv.k, kv.v)), full[:, 4:], atol=1e-5)  # prefix
        x2 = x.clone()
        x2[:, 5] = (x2[:, 5] + 1) % 11  # inside the window: a two-layer model's rest is stale
        window = m(x2[:, 4:8], t, cache=CanvasKV(4, kv.k, kv.v))
        assert not torch.allclose(window, m(x2, t)[:, 4:8], atol=1e-4)
        one = make_model(time_conditioning=tc, n_layer=1)
        kv = CanvasKV()
        one(x, t, cache=kv)
        assert torch.allclose(one(x2[:, 4:8], t, cache=CanvasKV(4, kv.k, kv.v)), one(x2, t)[:, 4:8], atol=1e-5)
        with pytest.raises(ValueError, match="written by a full forward first"):
            m(x[:, :4], t, cache=CanvasKV(0))
        with pytest.raises(ValueError, match="outside the cached canvas"):
            m(x[:1, :4], t[:1], cache=CanvasKV(0, kv.k, kv.v))


def test_config_validation_and_round_trip():
    cfg = ModelConfig(vocab_size=10, mask_id=9, n_embd=32, n_head=4)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="kind"):
        ModelConfig(vocab_size=10, mask_id=9, kind="gpt")
    with pytest.raises(ValueError, match="unknown model config"):
        ModelConfig.from_dict({**cfg.to_dict(), "flash": True})
    d = 32  # a block: attention 4d^2 + 4d, MLP 8d^2 + 5d, two LayerNorms 4d; the head shares tok_emb's weights
    assert Transformer(cfg).n_params == 10 * d + 256 * d + 6 * (12 * d * d + 13 * d) + 2 * d  # + final LayerNorm
