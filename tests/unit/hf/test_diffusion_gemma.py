"""DiffusionGemma-style (uniform-state, block diffusion) models through the real loader and the project's
own sampler: a tiny random DiffusionGemma written with save_pretrained to a temp dir, loaded by its
config (no remote code), sampled, and held token for token to transformers' own `generate`."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers.models.diffusion_gemma")

from explorer import load_checkpoint  # noqa: E402
from explorer.sampling import SamplerConfig, plan_run, sample  # noqa: E402
from explorer.sampling.uniform import model_process  # noqa: E402

from tests.support.hf import diffusion_gemma_dir  # noqa: E402

CANVAS = 8  # the tiny model's block (DiffusionGemma's canvas_length)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    return load_checkpoint(str(diffusion_gemma_dir(tmp_path_factory.mktemp("dgemma"), canvas_length=CANVAS)))


def test_loads_by_its_config_as_a_uniform_state_model(gemma):
    from transformers import DiffusionGemmaForBlockDiffusion

    assert isinstance(gemma.net, DiffusionGemmaForBlockDiffusion)
    assert model_process(gemma) == "uniform" and gemma.config.process == "uniform"
    assert gemma.config.cached and gemma.config.canvas_length == CANVAS and gemma.config.kind == "diffusion"
    assert gemma.meta["family"] == "diffusion_gemma" and gemma.meta["model_config"]["process"] == "uniform"
    # the model ships no generation settings: DiffusionGemma's defaults, as the project's knobs; its canvas
    # the whole context (128 positions here) less the BOS token a run without a prompt starts from
    assert gemma.meta["sampler_defaults"] == {"length": 127, "steps": 48, "entropy_bound": 0.1, "temperature": 0.8,
                                              "temperature_end": 0.4, "stable_steps": 1, "stop_entropy": 0.005}
    assert gemma.config.block_size == 127 and gemma.config.context == 128
    x = torch.randint(0, gemma.config.vocab_size, (2, CANVAS))
    logits = gemma(x, torch.ones(2))  # the plain contract: one block after the BOS token
    assert logits.shape == (2, CANVAS, gemma.config.vocab_size) and logits.dtype == torch.float32


def test_a_run_at_its_default_length_fills_the_context_after_the_bos_token(gemma):
    """The dashboard's first run takes the model's default length: it once asked for the whole context,
    and the BOS token in front made it one position too long (an error at the last block)."""
    tr = sample(gemma, SamplerConfig(steps=2, seed=0, stop_entropy=None), batch_size=1)
    assert tr.final.shape == (1, 127)
    with pytest.raises(ValueError, match="exceeds the model's context of 127"):
        sample(gemma, SamplerConfig(steps=2, seed=0), length=128, batch_size=1)


def test_the_cache_is_encoded_once_and_matches_the_whole_prefix(gemma):
    """Appending in two pieces or at once gives the decoder the same context."""
    prefix = torch.tensor([[7, 8, 9, 10, 11, 12]])
    block = torch.tensor([[20, 21, 22, 23, 24, 25, 26, 27]])
    whole, split = gemma.new_cache(), gemma.new_cache()
    whole.append(prefix)
    split.append(prefix[:, :4])
    gemma(block, None, cache=split)
    split.append(prefix[:, 4:])
    a, b = gemma(block, None, cache=whole), gemma(block, None, cache=split)
    assert whole.pending is None and whole.length == split.length == 6
    torch.testing.assert_close(a, b)


def test_the_prompt_and_each_earlier_block_are_encoded_once(gemma, monkeypatch):
    encoder, widths = gemma.net.model.encoder, []
    forward = encoder.forward
    monkeypatch.setattr(encoder, "forward", lambda *a, **k: (widths.append(k["input_ids"].shape[1]), forward(*a, **k))[1])
    tr = sample(gemma, SamplerConfig(steps=3, seed=0, stop_entropy=None), template=gemma.tokenizer.decode([7, 8, 9])
                + "█" * (3 * CANVAS), batch_size=2)
    assert widths == [3, CANVAS, CANVAS] and tr.nfe == 9  # the prompt, then blocks 0 and 1; 3 decoder calls a block


def _generate(gemma, prompt: list[int], rows: int, seed: int, new: int, cfg: SamplerConfig):
    """transformers' own DiffusionGemma generate with the same knobs, after torch.manual_seed(seed)."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    stop = (dict(confidence_threshold=cfg.stop_entropy, stability_threshold=cfg.stable_steps)
            if cfg.stop_entropy is not None else dict(confidence_threshold=None, stability_threshold=None))
    torch.manual_seed(seed)
    out = gemma.net.generate(torch.tensor([prompt] * rows), max_new_tokens=new, max_denoising_steps=cfg.steps,
                             t_max=cfg.temperature, t_min=cfg.temperature_end,
                             sampler_config=EntropyBoundSamplerConfig(entropy_bound=cfg.entropy_bound), **stop)
    return out.sequences.numpy(), out.tokens_per_forward.numpy()


CASES = [  # seed, rows, steps, entropy_bound, stop_entropy, stable_steps
    (0, 1, 48, 0.1, 0.005, 1),  # DiffusionGemma's defaults (a random model never stops early)
    (0, 3, 12, 0.5, 4.0, 1),  # a loose stop: blocks end early, rows at different steps
    (5, 2, 10, 2.0, 4.2, 2),
    (7, 4, 6, 0.1, None, 1),  # no stop rule: every step
    (0, 3, 12, 0.5, 4.36, 0),  # confidence alone: rows of a block stop at different steps
]


@pytest.mark.parametrize("seed,rows,steps,bound,stop,stable", CASES)
def test_reproduces_transformers_generate_token_for_token(gemma, seed, rows, steps, bound, stop, stable):
    """The same seed gives generate's tokens: the project draws generate's random numbers (torch.randint
    for a block's start and each re-noising, torch.multinomial for the denoised canvas, in its order and
    shapes) from its own CPU generator seeded as generate's global one (explorer/sampling/uniform.py)."""
    cfg = SamplerConfig(steps=steps, temperature=0.8, temperature_end=0.4, entropy_bound=bound, seed=seed,
                        stop_entropy=stop, stable_steps=stable)
    prompt = [7, 8, 9]
    plan = plan_run(gemma, cfg, template=gemma.tokenizer.decode(prompt) + "█" * (2 * CANVAS))
    assert plan.canvas.tokens[plan.canvas.fixed].tolist() == prompt and plan.blocks.max() == 1
    tr = sample(gemma, cfg, plan=plan, batch_size=rows)
    want, per_forward = _generate(gemma, prompt, rows, seed, 2 * CANVAS, cfg)
    np.testing.assert_array_equal(tr.final, want)
    # as many decoder calls: generate's tokens per forward is 16 / the steps each row took (a row's steps
    # are those with an event in it: every live position is accepted or re-noised, or settles)
    stepped = (tr.committed | tr.remasked | tr.settled)[:, :, 3:].any(axis=2).sum(axis=0)  # (rows,)
    np.testing.assert_allclose(per_forward, 2 * CANVAS / stepped, rtol=1e-6)
    assert tr.nfe == stepped.max()


@pytest.mark.parametrize("rows,pick", [(1, (0, 3)), (3, (0, 3)), (3, (1, 12))])
def test_ends_rows_at_their_end_of_sequence_as_generate_does(gemma, rows, pick):
    """With end-of-sequence ids (a model's generation_config.json), a block holding one ends its row: the
    tokens after it are padding, later blocks too, and no block is generated once every row has ended."""
    from dataclasses import replace

    cfg = SamplerConfig(steps=4, temperature=0.8, temperature_end=0.4, entropy_bound=0.1, seed=2, stop_entropy=None)
    prompt, new = [7, 8, 9], 3 * CANVAS
    template = gemma.tokenizer.decode(prompt) + "█" * new
    free = sample(gemma, cfg, template=template, batch_size=rows)
    eos, pad = int(free.final[pick]), 0  # a token the run writes: its row ends there
    ending = gemma.config
    try:
        gemma.config = replace(ending, eos_ids=(eos,), pad_id=pad)
        tr = sample(gemma, cfg, template=template, batch_size=rows)
    finally:
        gemma.config = ending
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    torch.manual_seed(2)
    want = gemma.net.generate(torch.tensor([prompt] * rows), max_new_tokens=new, max_denoising_steps=4, t_max=0.8,
                              t_min=0.4, sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.1),
                              confidence_threshold=None, stability_threshold=None, eos_token_id=eos,
                              pad_token_id=pad).sequences.numpy()
    n = want.shape[1]
    np.testing.assert_array_equal(tr.final[:, :n], want)
    assert (tr.final[:, n:] == pad).all() and (tr.final[pick[0], pick[1] + 1:] == pad).all()
    assert tr.n_steps == 4 * (n - 3) // CANVAS  # the blocks generate wrote, no more


def test_rows_that_stop_early_are_held_while_the_others_step(gemma):
    """The case where rows of one block settle at different steps (generate holds a finished row)."""
    # a random model's entropy barely falls (about ln 80): the stop is set where the rows cross it
    cfg = SamplerConfig(steps=12, temperature=0.8, temperature_end=0.4, entropy_bound=0.5, seed=0,
                        stop_entropy=4.36, stable_steps=0)
    tr = sample(gemma, cfg, template=gemma.tokenizer.decode([7, 8, 9]) + "█" * (2 * CANVAS), batch_size=3)
    first_block = [int(np.flatnonzero(tr.settled[:, r, 3]).min()) for r in range(3)]
    assert len(set(first_block)) > 1, first_block
    assert (tr.settled.sum(axis=0)[:, 3:] == 1).all()  # every generated position settles once
    for r, s in enumerate(first_block):  # held: nothing is accepted or re-noised in a settled row
        later = slice(s + 1, None)
        assert not tr.committed[later, r, 3:3 + CANVAS].any() and not tr.remasked[later, r, 3:3 + CANVAS].any()
        assert (tr.tokens[s + 1:, r, 3:3 + CANVAS] == tr.final[r, 3:3 + CANVAS]).all()


def test_run_py_sample_runs_it_block_by_block(gemma, capsys):
    """python run.py sample --checkpoint DIR: the prompt, then two blocks of the model's canvas."""
    import json

    from explorer.cli import main as cli_main

    rc = cli_main(["sample", "--checkpoint", str(gemma.path), "--template", "to be", "--length", str(2 + 2 * CANVAS),
                   "--steps", "6", "--stop-entropy", "4.3", "--seed", "1", "-n", "2", "--json", "--device", "cpu"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(out["tokens"][0]) == 2 + 2 * CANVAS and out["nfe"] <= 12
    assert all(t.startswith("to be") for t in out["texts"])
    cfg = SamplerConfig(steps=6, stop_entropy=4.3, seed=1, temperature=0.8, temperature_end=0.4, entropy_bound=0.1)
    want = sample(gemma, cfg, template="to be", length=2 + 2 * CANVAS, batch_size=2)  # the model's recommended knobs
    assert out["tokens"] == want.final.tolist()


def test_a_cached_model_continues_a_prompt_only(gemma):
    with pytest.raises(ValueError, match="continue"):
        plan_run(gemma, SamplerConfig(steps=4), template="██ b d ██")


def test_inspect_says_a_block_cached_model_has_no_whole_text_view(tmp_path, monkeypatch):
    """Inspect shows a model a whole noised text; a DiffusionGemma denoises one block over a cache: the tab
    says so (in the page's notice) and computes nothing, rather than calling it a way it was never run."""
    from explorer.dashboard import checkpoints as dashboard_checkpoints
    from explorer.dashboard.runtime.cache import LISTED_MODELS
    from explorer.dashboard.tabs import build_tab
    from explorer.dashboard.tabs.explore import open_session

    path = str(diffusion_gemma_dir(tmp_path / "dg", canvas_length=CANVAS))
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([path])  # a listed model, as `serve --models` lists it
    state = open_session(checkpoint=path, device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Inspect", state)
    state.load(wait=True)
    assert model_process(state.model) == "uniform"
    tab.on_shown()
    assert "one block at a time over a cache" in tab.notice and view.notice.visible
    assert tab.predictions is None and not tab.refresh_predictions() and view.forward.object == ""
    from explorer.metrics import topk_predictions

    with pytest.raises(ValueError, match="one block at a time"):  # and the metric says so too
        topk_predictions(state.model, [1, 2, 3], t=0.5)
    state.close()
