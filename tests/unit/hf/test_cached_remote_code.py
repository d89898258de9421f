"""LLaDA- and Dream-style remote code whose forward takes past_key_values (as Fast-dLLM runs them), under the
sampler's `cache` knob: the wrapper keeps each layer's keys and values at a block's full forward and runs
later steps on a window that reads them; exact where nothing outside the window changed, window-sized
calls, the same random draws as the uncached run, and one-line refusals where the forward cannot take it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from explorer import load_checkpoint  # noqa: E402
from explorer.cli import main as cli_main  # noqa: E402
from explorer.hf import HFOptions  # noqa: E402
from explorer.model import CanvasKV  # noqa: E402
from explorer.sampling import SamplerConfig, sample  # noqa: E402

from tests.support.hf import cached_remote_code_dir, remote_code_dir  # noqa: E402
from tests.support.models import gen  # noqa: E402

L, BLOCK = 16, 4
TRUST = HFOptions(trust_remote_code=True)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(style, forward, layers) -> the loaded model; each written once, under a name of its own (transformers
    imports remote code by its directory's name)."""
    made = {}

    def get(style, forward="replace", layers=2, **kw):
        key = (style, forward, layers, tuple(sorted(kw.items())))
        if key not in made:
            name = "_".join(["cached", style, forward, str(layers), *(f"{k}{v}" for k, v in sorted(kw.items()))])
            d = cached_remote_code_dir(tmp_path_factory.mktemp(name) / name, style, forward, layers=layers, **kw)
            made[key] = load_checkpoint(str(d), hf=TRUST)
        return made[key]

    torch.set_num_threads(1)
    return get


def canvas(model, rows=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(5, model.config.vocab_size, (rows, L), generator=g)
    x[:, 10:] = model.config.mask_id  # masks after the block, as a run has them
    return x


@pytest.mark.parametrize("style, forward", [("llada", "replace"), ("dream", "dream")])
@pytest.mark.parametrize("mode", ["prefix", "dual"])
def test_a_window_over_an_unchanged_canvas_gives_the_full_forwards_logits(models, style, forward, mode):
    model = models(style, forward)
    x, first = canvas(model), 8
    end = L if mode == "prefix" else first + BLOCK
    model.net.calls.clear()
    kv = CanvasKV()
    full = model(x, cache=kv)
    assert torch.equal(full, model(x))  # the write is the plain forward
    window = model(x[:, first:end], cache=CanvasKV(first, kv.k, kv.v))
    assert model.net.calls == [L, L, end - first]  # the window's input is the window alone
    own = 1 if model.config.shift_logits else 0  # Dream: the window's first row reads its own position
    assert torch.allclose(window[:, own:], full[:, first + own:end], atol=1e-5)
    alone = model(x[:, first:end])  # the same tokens without the cache: another context, other positions
    assert not torch.allclose(window[:, own:], alone[:, own:], atol=1e-3)


@pytest.mark.parametrize("style, forward", [("llada", "replace"), ("dream", "dream")])
@pytest.mark.parametrize("mode", ["prefix", "dual"])
def test_one_layer_cached_runs_equal_uncached_runs(models, style, forward, mode):
    """One layer: the keys and values outside the window depend only on the tokens there, which do not change
    during a block (the prefix is committed, what follows the block stays masked), so the cache is exact."""
    model = models(style, forward, layers=1)
    cfg = SamplerConfig(steps=8, block_length=BLOCK, temperature=1.0, seed=1)
    model.net.calls.clear()
    want = sample(model, cfg, batch_size=3, length=L)
    assert set(model.net.calls) == {L}
    model.net.calls.clear()
    got = sample(model, cfg.replace(cache=mode), batch_size=3, length=L)
    assert min(model.net.calls) < L  # windows ran
    assert np.array_equal(got.final, want.final)
    assert np.allclose(got.commit_confidence, want.commit_confidence, atol=1e-5)


@pytest.mark.parametrize("style, forward", [("llada", "past"), ("dream", "dream")])
def test_a_sampled_prefix_run_draws_as_the_uncached_run_does(models, style, forward):
    """Two layers (approximate): each step draws the same random numbers, in the same shapes, with or without
    the cache (the generators end in the same state), commits only the current block's positions, and runs
    the model on the block and what follows after each block's first call."""
    model = models(style, forward)
    cfg = SamplerConfig(steps=8, block_length=BLOCK, temperature=1.0, seed=1)
    runs = {}
    for mode in ("none", "prefix"):
        gens = [gen(7), gen(8)]
        model.net.calls.clear()
        runs[mode] = (sample(model, cfg.replace(cache=mode), generator=gens, length=L), gens, list(model.net.calls))
    (want, want_gens, want_calls), (got, got_gens, got_calls) = runs["none"], runs["prefix"]
    for a, b in zip(got_gens, want_gens):
        assert torch.equal(a.get_state(), b.get_state())
    assert got.nfe == want.nfe and not (got.final == model.config.mask_id).any()
    steps_per_block = cfg.steps // (L // BLOCK)
    block_of_step = got.committed_at // steps_per_block  # (B, L)
    assert np.array_equal(block_of_step, np.arange(L)[None, :].repeat(2, 0) // BLOCK)
    assert want_calls == [L] * len(want_calls)
    # both rows at once: each block's full forward, then the window from the block to the canvas' end (with
    # Dream's shifted logits from the position before the block, whose logits the block's first reads)
    early = int(model.config.shift_logits)
    assert got_calls == [n for b in range(L // BLOCK) for n in (L, L - b * BLOCK + (early if b else 0))]


def test_the_cache_is_read_where_the_canvas_changed(models):
    """Two layers, greedy: the cached run's confidences are not the uncached run's (stale keys and values
    of the prefix), while every position is still decoded."""
    model = models("llada", "replace")
    cfg = SamplerConfig(steps=8, block_length=BLOCK, temperature=0)
    want = sample(model, cfg, batch_size=1, length=L)
    got = sample(model, cfg.replace(cache="dual"), batch_size=1, length=L)
    assert not (got.final == model.config.mask_id).any()
    assert not np.allclose(got.confidence, want.confidence, equal_nan=True)


def test_the_cli_and_the_model_card_take_the_cache(models, capsys):
    from explorer.dashboard.checkpoints import describe

    model = models("llada", "replace")
    assert describe(model, "llada")["kv_cache"] is True and model.cache_modes == ("prefix", "dual")
    rc = cli_main(["sample", "--checkpoint", str(model.path), "--length", "8", "--steps", "4", "--block-length",
                   "4", "--cache", "dual", "--device", "cpu", "--trust-remote-code"])
    assert rc == 0, capsys.readouterr().err


def one_error_line(capsys, *argv) -> str:
    rc = cli_main(["sample", "--length", "8", "--steps", "4", "--block-length", "4", "--device", "cpu",
                   "--trust-remote-code", *argv])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err
    return errors[0]


def test_dual_on_a_forward_without_replace_position_is_one_line(models, capsys):
    model = models("llada", "past")
    assert model.canvas_kv and model.cache_modes == ("prefix",)
    line = one_error_line(capsys, "--checkpoint", str(model.path), "--cache", "dual")
    assert line.startswith("error: cache 'dual' needs a model whose forward also takes replace_position")
    assert line.endswith("this llada model's takes past_key_values only: set cache to prefix or none")
    with pytest.raises(ValueError, match="no replace_position"):  # the wrapper's own guard
        kv = CanvasKV()
        x = canvas(model)
        model(x, cache=kv)
        model(x[:, 4:8], cache=CanvasKV(4, kv.k, kv.v))


@pytest.mark.parametrize("kind", ["no past_key_values", "asserts them away"])
def test_a_forward_that_takes_no_cached_keys_is_refused_in_one_line(models, tmp_path, capsys, kind):
    """The first stand-in's forward has no past_key_values; the second names them and asserts they are None
    (LLaDA's released code): neither takes the cache, and a run with it on is one error line."""
    if kind == "no past_key_values":
        path = str(remote_code_dir(tmp_path / "plain_llada", "llada"))
        assert load_checkpoint(path, hf=TRUST).canvas_kv is False
    else:
        model = models("llada", "past", refuse_cache=True)
        assert model.canvas_kv is False and model.cache_modes == ()
        assert model(canvas(model)).shape == (2, L, model.config.vocab_size)  # it still samples uncached
        path = str(model.path)
    line = one_error_line(capsys, "--checkpoint", path, "--cache", "prefix")
    assert line.startswith("error: cache 'prefix' needs a model whose forward takes cached keys and values")
    assert line.endswith("this llada model does not: set cache to none")


@pytest.mark.parametrize("forward, offered", [("past", ["none", "prefix"]), ("replace", ["none", "prefix", "dual"])])
def test_the_sidebar_offers_the_cache_modes_the_model_takes(models, monkeypatch, forward, offered):
    """A model whose code takes the prefix cache only is offered none and prefix, and a link's dual is
    switched off with the notice that says so, as for any knob the model cannot take."""
    from explorer.dashboard import checkpoints as dashboard_checkpoints
    from explorer.dashboard.runtime.cache import LISTED_MODELS
    from explorer.dashboard.tabs.explore import open_session
    from explorer.dashboard.tabs.explore.controls import ControlsView

    path = str(models("llada", forward).path)
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([path], TRUST)
    s = open_session(checkpoint=path, device="cpu", auto_run=False, sweep_auto=False, block_length=4, cache="dual")
    s.load(wait=True)
    try:
        assert s.model_info["cache_modes"] == offered[1:]
        assert ControlsView(state=s.tabs["Explore"]).widgets["cache"].options == offered
        if "dual" in offered:
            assert s.cache == "dual" and "cache=dual" not in s.error
        else:
            assert s.cache == "none" and "cache=dual" in s.error
    finally:
        s.close()


def test_a_links_dual_cache_is_switched_off_for_a_prefix_only_model(models, monkeypatch):
    """The link's knobs are applied again once the model is loaded (urlstate's load hook): dual must still
    be switched off after that, not refused by the first run."""
    from explorer.dashboard import checkpoints as dashboard_checkpoints
    from explorer.dashboard.runtime.cache import LISTED_MODELS
    from explorer.dashboard.tabs.explore import open_session
    from explorer.dashboard.urlstate import UrlState

    path = str(models("llada", "past").path)
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([path], TRUST)
    s = open_session(checkpoint=path, device="cpu", auto_run=False, sweep_auto=False)
    url = UrlState(s)
    url.apply({"checkpoint": path, "block_length": "4", "cache": "dual"})
    s.load_hooks.append(url.hook)
    s.load(wait=True)
    try:
        assert s.cache == "none" and "cache=dual" in s.error
    finally:
        s.close()
