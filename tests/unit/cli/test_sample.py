"""`python run.py sample` on tiny checkpoints written to tmp_path."""
from __future__ import annotations

import json

import pytest
import torch

from explorer.checkpoint import save_checkpoint
from explorer.cli import main
from explorer.data.tokenizer import CharTokenizer
from explorer.model import ModelConfig, Transformer

TOK = CharTokenizer("abcdefgh \n")


def write_checkpoint(path, kind="diffusion"):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=TOK.vocab_size, mask_id=TOK.mask_id, block_size=16, n_layer=1, n_head=2,
                      n_embd=16, kind=kind)
    return save_checkpoint(Transformer(cfg), path, {"tokenizer": TOK.to_dict()})


@pytest.fixture
def ckpt(tmp_path):
    return str(write_checkpoint(tmp_path / "tiny.safetensors"))


def run(capsys, *argv):
    rc = main(["sample", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_output(ckpt, capsys):
    rc, out, _ = run(capsys, "--checkpoint", ckpt, "--steps", "4", "--length", "12", "-n", "3", "--json",
                     "--template", "ab██", "--strategy", "margin", "--seed", "1")
    assert rc == 0
    d = json.loads(out)
    assert len(d["texts"]) == 3 and all(len(t) == 12 and t.startswith("ab") for t in d["texts"])
    assert [TOK.decode(ids) for ids in d["tokens"]] == d["texts"]
    assert 1 <= d["nfe"] <= 4 and d["config"]["strategy"] == "margin" and d["seconds"] > 0
    rc, again, _ = run(capsys, "--checkpoint", ckpt, "--steps", "4", "--length", "12", "-n", "3", "--json",
                       "--template", "ab██", "--strategy", "margin", "--seed", "1")
    assert json.loads(again)["texts"] == d["texts"]


def test_plain_text_output(ckpt, capsys):
    rc, out, err = run(capsys, "--checkpoint", ckpt, "--steps", "2", "--length", "6", "-n", "2", "--threshold", "0.5")
    assert rc == 0 and out.count("--- sample") == 2 and "NFE" in err


def test_the_sample_count_is_spelled_as_sweep_spells_it(ckpt, capsys):
    """`sweep --n 30` and `sample --n 3` (this was refused: '--n could match --num-samples, --no-cache')."""
    for flag in ("--n", "-n", "--num-samples"):
        rc, out, _ = run(capsys, "--checkpoint", ckpt, "--steps", "2", "--length", "6", flag, "3", "--json")
        assert rc == 0 and len(json.loads(out)["texts"]) == 3


def test_ar_checkpoint(tmp_path, capsys):
    path = str(write_checkpoint(tmp_path / "ar.safetensors", kind="ar"))
    rc, out, _ = run(capsys, "--checkpoint", path, "--prompt", "abc", "--length", "10", "--json", "--no-cache")
    d = json.loads(out)
    assert rc == 0 and d["kind"] == "ar" and d["nfe"] == 7 and d["texts"][0].startswith("abc")


@pytest.mark.parametrize("argv, needle", [
    (["--strategy", "best"], "valid: confidence"),
    (["--top-p", "2"], "top_p"),
    (["--template", "ab€"], "'€'"),
    (["--length", "99"], "context"),
    (["-n", "0"], "-n"),
    (["--remask", "0.2", "--threshold", "0.9"], "remask"),
])
def test_bad_input_is_one_error_line(ckpt, capsys, argv, needle):
    rc, out, err = run(capsys, "--checkpoint", ckpt, *argv)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


def test_missing_checkpoint_and_default_name(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    rc, _, err = run(capsys)
    assert rc == 2 and "shakespeare" in err and len(err.strip().splitlines()) == 1
    write_checkpoint(tmp_path / "shakespeare.safetensors")
    rc, out, _ = run(capsys, "--steps", "2", "--json")
    assert rc == 0 and len(json.loads(out)["texts"][0]) == 16  # the model's whole context
