"""Hugging Face models through the real loader: tiny models written to a temp dir by the
test, loaded with `--checkpoint DIR` / load_checkpoint, sampled by the project's own sampler."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from explorer import load_checkpoint  # noqa: E402
from explorer.checkpoint import CheckpointError  # noqa: E402
from explorer.cli import main as cli_main  # noqa: E402
from explorer.data.tokenizer import MASK_GLYPH  # noqa: E402
from explorer.hf import HFOptions  # noqa: E402
from explorer.sampling import SamplerConfig, sample  # noqa: E402
from explorer.sampling.template import parse_template  # noqa: E402

from tests.support.hf import bert_dir, modernbert_dir, remote_code_dir  # noqa: E402


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return bert_dir(tmp_path_factory.mktemp("bert"))


def test_masked_lm_has_the_checkpoint_contract(bert):
    model = load_checkpoint(str(bert))
    tok = model.tokenizer
    assert model.config.family == "mlm" and model.config.kind == "diffusion"
    assert model.config.mask_id == tok.tok.mask_token_id and model.config.block_size == 64
    ids = tok.encode("to be or not to be")
    x = torch.tensor([ids, ids])
    logits = model(x, torch.full((2,), 0.5))
    assert logits.shape == (2, len(ids), model.config.vocab_size)
    raw = model.net(input_ids=x).logits
    text = [i for i in range(model.config.vocab_size) if i not in tok.special_ids]
    assert torch.allclose(logits[..., text], raw[..., text])  # aligned: row i predicts token i
    assert tok.special_ids and torch.isinf(logits[..., tok.special_ids]).all()  # [CLS], [SEP] ... never text
    assert tok.decode(ids) == "to be or not to be"
    assert tok.decode([ids[0], model.config.mask_id, ids[1]]) == f"to{MASK_GLYPH}be"
    assert model.meta["family"] == "mlm" and model.meta["dtype"] == "fp32"
    assert model.meta["parameters"] == sum(p.numel() for p in model.parameters()) > 0
    assert model.meta["source"] == str(bert)


def test_template_counts_model_tokens(bert):
    model = load_checkpoint(str(bert))
    canvas = parse_template("to be [___] that is █", model.tokenizer, context=model.config.block_size)
    fixed_ids = model.tokenizer.encode("to be ") + model.tokenizer.encode(" that is ")
    assert canvas.n_generate == 6  # five for [___], one for █: tokens, not characters
    assert canvas.tokens[canvas.fixed].tolist() == fixed_ids
    with pytest.raises(ValueError, match="context is 64"):
        parse_template("to be " * 40 + "█", model.tokenizer, context=model.config.block_size)


def test_cli_sample_json_on_a_model_directory(bert, capsys):
    rc = cli_main(["sample", "--checkpoint", str(bert), "--template", "to be [___] the question",
                   "-n", "2", "--steps", "3", "--json", "--device", "cpu"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(out["texts"]) == 2
    assert all(t.startswith("to be") and t.endswith("the question") and MASK_GLYPH not in t for t in out["texts"])
    assert out["nfe"] == 3 and out["tokens_per_forward"] == pytest.approx(5 / 3, abs=1e-3)
    assert len(out["token_strings"][0]) == len(out["tokens"][0])


def test_modernbert_samples_through_the_same_path(tmp_path):
    model = load_checkpoint(str(modernbert_dir(tmp_path)))
    traj = sample(model, SamplerConfig(steps=4, seed=1), batch_size=2, length=12)
    assert traj.final.shape == (2, 12) and (traj.final != model.config.mask_id).all()
    assert traj.nfe == 4
    again = sample(model, SamplerConfig(steps=4, seed=1), batch_size=2, length=12)
    assert (again.final == traj.final).all()  # same seed, same tokens


@pytest.mark.parametrize("style", ["llada", "dream"])
def test_remote_code_runs_only_with_the_flag(tmp_path, capsys, style):
    d = remote_code_dir(tmp_path / style, style)
    rc = cli_main(["sample", "--checkpoint", str(d), "--length", "8", "--steps", "2", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "--trust-remote-code" in err and "Traceback" not in err
    rc = cli_main(["sample", "--checkpoint", str(d), "--length", "8", "--steps", "2", "--device", "cpu",
                   "--trust-remote-code", "--json"])
    assert rc == 0 and len(json.loads(capsys.readouterr().out)["tokens"][0]) == 8
    model = load_checkpoint(str(d), hf=HFOptions(trust_remote_code=True))
    assert model.config.family == style and model.config.shift_logits == (style == "dream")
    x = torch.tensor([model.tokenizer.encode("to be or not to be")])
    raw = model.net(input_ids=x).logits
    got = model(x)
    if style == "dream":  # logits[:, i] comes from position i - 1; position 0 reads its own
        assert torch.allclose(got[:, 1:], raw[:, :-1]) and torch.allclose(got[:, 0], raw[:, 0])
    else:
        assert torch.allclose(got, raw)


@pytest.mark.parametrize("style", ["llada", "dream"])
def test_remote_code_models_refuse_the_kv_cache(tmp_path, capsys, style):
    """This stand-in's forward takes no past_key_values: a run with the cache on is one error line, and the
    dashboard's model card says so (the sidebar disables the knob from it). (Remote code that takes them:
    test_cached_remote_code.py.)"""
    from explorer.dashboard.checkpoints import describe

    d = remote_code_dir(tmp_path / style, style)
    rc = cli_main(["sample", "--checkpoint", str(d), "--length", "8", "--steps", "4", "--block-length", "4",
                   "--cache", "dual", "--device", "cpu", "--trust-remote-code"])
    err = capsys.readouterr().err  # (the tiny model's writing shows a progress bar there too)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err
    assert errors[0].endswith(f"this {style} model does not: set cache to none")
    assert describe(load_checkpoint(str(d), hf=HFOptions(trust_remote_code=True)), style)["kv_cache"] is False


def test_overrides_win_over_the_config(tmp_path):
    d = remote_code_dir(tmp_path / "m", "llada")
    model = load_checkpoint(str(d), hf=HFOptions(trust_remote_code=True, family="dream", mask_id=5,
                                                 shift_logits=False))
    assert (model.config.family, model.config.mask_id, model.config.shift_logits) == ("dream", 5, False)


def test_bad_models_get_clear_messages(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError, match="offline"):
        load_checkpoint("hf:nobody/no-such-model")
    with pytest.raises(CheckpointError, match="hf:ORG/NAME"):
        load_checkpoint("hf:just-a-name")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="not a transformers model directory"):
        load_checkpoint(str(tmp_path / "empty"))
    no_mask = bert_dir(tmp_path / "nomask", mask_token=False)
    rc = cli_main(["sample", "--checkpoint", str(no_mask), "--length", "4", "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "--mask-id" in err and "Traceback" not in err
    model = load_checkpoint(str(no_mask), hf=HFOptions(mask_id=1))
    assert model.config.mask_id == 1


def test_a_served_dashboard_opens_only_listed_models(bert):
    with pytest.raises(CheckpointError, match="serve --models"):
        load_checkpoint("hf:org/name", allow_paths=False)
    with pytest.raises(CheckpointError, match="not a plain name"):
        load_checkpoint(str(bert), allow_paths=False)  # a path from a URL is never opened
    listed = HFOptions(allowed=(str(bert),))
    assert load_checkpoint(str(bert), allow_paths=False, hf=listed).config.family == "mlm"
    with pytest.raises(CheckpointError, match="not one of the models"):
        load_checkpoint("hf:org/other", allow_paths=False, hf=listed)


def test_serve_refuses_a_malformed_models_entry(capsys):
    rc = cli_main(["serve", "--models", "hf:no-org", "--no-show", "--port", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and "--models" in err and "hf:ORG/NAME" in err


def test_serve_reads_each_listed_models_config_before_it_starts(tmp_path, capsys, monkeypatch):
    """A listed model that no session could open (not cached on an offline server, an unreadable config,
    remote code not allowed) is one error line at start: the server used to start, and every student who
    picked it got a failed load."""
    from tests.support.hf import remote_code_dir

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "config.json").write_text("not json")
    llada = remote_code_dir(tmp_path / "llada")
    capsys.readouterr()  # (transformers' progress bar while writing it)
    for models, needle in (("hf:org/not-cached", "not in the local Hugging Face cache"),
                           (str(tmp_path / "garbled"), "unreadable config.json"),
                           (str(llada), "ships its own modelling code (auto_map in config.json); it runs only if "
                                        "you pass --trust-remote-code")):
        assert cli_main(["serve", "--models", models, "--no-show", "--port", "0", "--offline"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: --models") and needle in err[0], err


def test_sweep_scores_tokens_under_a_causal_judge_the_user_names(bert, tmp_path, capsys):
    from tests.support.hf import gpt2_dir

    judge = gpt2_dir(tmp_path / "gpt")
    out = tmp_path / "sweep.csv"
    rc = cli_main(["sweep", "--checkpoint", str(bert), "--judge", str(judge), "--steps", "1,4",
                   "--strategy", "confidence,random", "--n", "2", "--length", "12", "--device", "cpu",
                   "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    import pandas as pd

    table = pd.read_csv(out)
    assert len(table) == 8 and (table["gen_ppl"] > 1).all()
    rc = cli_main(["sample", "--checkpoint", str(judge), "--length", "4", "--device", "cpu"])
    assert rc == 2 and "judge" in capsys.readouterr().err  # a causal LM is not sampled here


def test_token_models_are_scored_over_their_tokens(bert):
    from explorer.experiments import sample_kind, score_samples

    model = load_checkpoint(str(bert))
    assert sample_kind(model) == "tokens"
    final = np.array([[7, 7, 8, 8], [7, 8, 9, 10]])
    table = score_samples("tokens", final, ["x", "y"])
    assert table["entropy"].tolist() == pytest.approx([np.log(2), np.log(4)])  # token ids, not the texts
    assert table["distinct_2"].tolist() == pytest.approx([1.0, 1.0]) and table["distinct_3"].tolist() == [1.0, 1.0]
    assert score_samples("tokens", np.array([[5, 5, 5, 5]]), ["z"])["distinct_2"].tolist() == [pytest.approx(1 / 3)]


def test_a_chat_prompt_is_rendered_with_the_models_chat_template(bert, capsys):
    from explorer.sampling.template import as_chat

    model = load_checkpoint(str(bert))
    rendered = as_chat("to be or not", model.tokenizer)
    assert rendered == "[CLS] to be or not [SEP] answer"
    rc = cli_main(["sample", "--checkpoint", str(bert), "--prompt", "to be or not", "--chat", "--length", "16",
                   "--steps", "2", "--json", "--device", "cpu"])
    out = json.loads(capsys.readouterr().out)
    prompt_ids = model.tokenizer.encode(rendered)
    assert rc == 0 and out["tokens"][0][: len(prompt_ids)] == prompt_ids  # the template's special tokens kept
    assert len(out["tokens"][0]) == 16
    with pytest.raises(ValueError, match="takes no"):
        as_chat("to be █", model.tokenizer)
    from explorer.data.tokenizer import CharTokenizer

    with pytest.raises(ValueError, match="chat template"):
        as_chat("hi", CharTokenizer("hi"))


def test_a_long_context_model_gets_a_sensible_canvas_by_default(tmp_path, capsys):
    """A Hugging Face model's context can be 4k-131k tokens: without --length the CLI samples 256 tokens,
    or a plain prompt plus 128, never the whole context."""
    d = bert_dir(tmp_path / "long", context=512)
    rc = cli_main(["sample", "--checkpoint", str(d), "--steps", "2", "--json", "--device", "cpu"])
    assert rc == 0 and len(json.loads(capsys.readouterr().out)["tokens"][0]) == 256
    rc = cli_main(["sample", "--checkpoint", str(d), "--prompt", "to be or not", "--steps", "2", "--json",
                   "--device", "cpu"])
    model = load_checkpoint(str(d))
    assert rc == 0 and len(json.loads(capsys.readouterr().out)["tokens"][0]) == len(model.tokenizer.encode("to be or not")) + 128
