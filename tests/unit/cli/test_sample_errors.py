"""Bad input to `python run.py sample`: a bad template, knob or checkpoint is one `error: ...` line naming the
problem and exit 2, with nothing on stdout; uneven blocks are accepted."""
from __future__ import annotations

import json

import pytest

from explorer.cli import main
from tests.support.dashboard import LENGTH


@pytest.mark.parametrize("argv, needle", [
    (["--template", "ABé"], "does not know: 'é'"),
    (["--template", ""], "the template is empty"),
    (["--template", "ABC", "--length", "3"], "leaves nothing to generate"),
    (["--template", "A" * 40], f"the model's context is {LENGTH}"),
    (["--steps", "0"], "steps must be an integer in [1, 4096], got 0"),
    (["--steps", "99999999"], "steps must be an integer in [1, 4096]"),
    (["--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["--temperature", "-0.5"], "temperature must be in [0, 100], got -0.5"),
    (["--temperature", "nan"], "argument --temperature: expected a finite number, got 'nan'"),
    (["--top-p", "0"], "top_p must be in (0, 1], got 0.0"),
    (["--top-p", "1.01"], "top_p must be in (0, 1], got 1.01"),
    (["--top-k", "-3"], "top_k must be an integer >= 0 (0 = off), got -3"),
    (["--strategy", "best"], "unknown strategy 'best'; valid: confidence, margin"),
    (["--cache", "dual"], "cache 'dual' needs block_length > 0"),
    (["--cache", "nearby", "--block-length", "4"], "unknown cache 'nearby'; valid: none, prefix, dual"),
    (["--checkpoint", "truncated"], "truncated.safetensors is not a readable safetensors checkpoint"),
    (["--checkpoint", "notes"], "notes.safetensors is not a readable safetensors checkpoint"),
    (["--checkpoint", "foreign"], "has no mdlm-explorer metadata"),
    (["--checkpoint", "future"], "has format version '2'"),
    (["--checkpoint", "other-version"], "unknown model config keys: ['rotary_base']"),
    (["--checkpoint", "../nope"], "no checkpoint '../nope'"),
])
def test_cli_bad_input_is_one_error_line(ckpts, capsys, argv, needle):
    argv = ["--checkpoint", "tiny", *argv] if "--checkpoint" not in argv else argv
    assert cli("--steps", "2", *argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


def test_cli_uneven_blocks_work(ckpts, capsys):
    assert cli("--checkpoint", "tiny", "--steps", "10", "--block-length", "5", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)["texts"][0]) == LENGTH


def cli(*argv) -> int:
    """`python run.py sample ...`'s exit status (argparse's own errors exit rather than return)."""
    try:
        return main(["sample", *argv])
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("argv, needle", [
    # the AR baseline reads the proposal knobs (temperature, top-k, top-p, seed), not a diffusion schedule
    (["--checkpoint", "tiny-ar", "--steps", "3", "--strategy", "margin", "--remask", "0.5"],
     "--steps 3, --strategy margin, --remask 0.5: an autoregressive model's sampler does not read them"),
    (["--checkpoint", "tiny-uniform", "--strategy", "margin"],
     "--strategy margin: a uniform-state model's sampler does not read it"),
    (["--checkpoint", "tiny", "--stop-entropy", "0.1"], "--stop-entropy 0.1: a masked model's sampler does not read it"),
])
def test_a_knob_the_models_sampler_does_not_read_is_refused_not_ignored(ckpts, capsys, argv, needle):
    """The run would have been the one without it, printed as if the knob had been applied."""
    from tests.support.dashboard import save_twins

    save_twins(ckpts, names=("tiny-masked", "tiny-uniform"))
    assert cli(*argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and needle in lines[0], err
    # what it does read still runs
    assert cli("--checkpoint", argv[1], "--temperature", "0.5", "--seed", "2", "--json") == 0


@pytest.mark.parametrize("command", ["sample", "sweep"])
def test_hugging_face_overrides_on_a_checkpoint_of_this_project_are_refused(ckpts, capsys, command):
    """--hf-family, --mask-id and --shift-logits describe a Hugging Face model; this project's checkpoints say
    their own, so the flags were ignored without a word."""
    argv = [command, "--checkpoint", "tiny", "--steps", "2", "--hf-family", "llada", "--mask-id", "3"]
    assert main([*argv, *(["-n", "2"] if command == "sweep" else [])]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0] == ("error: --hf-family, --mask-id: for Hugging Face models only; tiny is a "
                                            "checkpoint of this project, which says its own"), err
