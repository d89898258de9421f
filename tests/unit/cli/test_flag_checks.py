"""Every flag of train, sample, evaluate and sweep: a value out of range is one `error: ...` line and exit
status 2 before anything is loaded or trained; outputs are checked writable before a run starts; Ctrl-C
saves a training run at any moment, the held-out metrics at its end included. (test_flags_fuzz.py throws
generated values at the same flags.)"""
from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from explorer import load_checkpoint
from explorer.cli import main
from explorer.train import TrainConfig, Trainer
from tests.support.dashboard import save_tiny_checkpoints
from tests.support.models import TINY_TEXT

TINY_TRAIN = ["--block-size", "16", "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--batch-size", "2",
              "--max-steps", "2", "--eval-every", "1", "--eval-sequences", "2", "--precision", "fp32",
              "--device", "cpu"]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A checkpoints/ of tiny models, a tiny training text, and a file that is not a folder; cwd is tmp_path."""
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(ckpts))
    monkeypatch.chdir(tmp_path)
    save_tiny_checkpoints(ckpts)
    (tmp_path / "tiny.txt").write_text(TINY_TEXT * 4)
    (tmp_path / "afile").write_text("not a folder")
    return tmp_path


def one_error_line(capsys, needle: str) -> str:
    """The run's stderr holds exactly one `error:` line (the last), containing `needle`, and no traceback."""
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0] and "Traceback" not in err, err
    assert err.rstrip().splitlines()[-1] == errors[0]
    return err


def train_args(*extra):
    return ["train", "--out", "run", "--data", "tiny.txt", *TINY_TRAIN, *extra]


BAD = {
    # train: every number parsed against TrainConfig's ranges; names and architecture checked before building
    "train lr inf": (train_args("--lr", "inf"), "argument --lr: expected a finite number in (0, 10], got 'inf'"),
    "train lr nan": (train_args("--lr", "nan"), "argument --lr: expected a finite number in (0, 10], got 'nan'"),
    "train lr 0": (train_args("--lr", "0"), "argument --lr: expected a finite number in (0, 10], got '0'"),
    "train no heads": (train_args("--n-head", "0"), "argument --n-head: expected an integer in [1, 512], got '0'"),
    "train threads -2": (train_args("--threads", "-2"), "argument --threads: expected an integer in [0, 1024]"),
    "train huge context": (train_args("--block-size", "1000000000"), "argument --block-size: expected an integer "
                                                                     "in [1, 65536], got '1000000000'"),
    "train context 1e9": (train_args("--block-size", "1e9"), "argument --block-size: expected an integer"),
    "train no layers": (train_args("--n-layer", "-1"), "argument --n-layer: expected an integer in [1, 512]"),
    "train weight decay -1": (train_args("--weight-decay", "-1"), "argument --weight-decay: expected a finite "
                                                                  "number in [0, 10], got '-1'"),
    "train warmup -5": (train_args("--warmup-steps", "-5"), "argument --warmup-steps: expected an integer in [0, "),
    "train eps 0": (train_args("--eps", "0"), "argument --eps: expected a finite number in (0, 1), got '0'"),
    "train ema 1": (train_args("--ema", "1"), "argument --ema: expected a finite number in [0, 1), got '1'"),
    "train bool maybe": (train_args("--stratified", "maybe"), "argument --stratified: expected true or false"),
    "train unknown kind": (train_args("--kind", "gpt"), "argument --kind: invalid choice: 'gpt'"),
    "train heads not dividing": (train_args("--n-head", "3"), "n_embd (16) must be divisible by n_head (3)"),
    "train adaLN causal": (train_args("--kind", "ar", "--time-conditioning", "adaln"),
                           "time_conditioning 'adaln' is for diffusion models, not kind 'ar'"),
    "train min length": (train_args("--min-length", "17"), "min_length must be in [0, block_size=16], got 17"),
    "train too big for memory": (train_args("--n-embd", "32768", "--n-layer", "512", "--n-head", "512"),
                                 "parameters needs about"),
    "train out under a file": (["train", "--out", "afile/run.safetensors", "--data", "tiny.txt", *TINY_TRAIN],
                               "--out afile/run.safetensors: afile is a file, not a folder"),
    "train out a folder": (["train", "--out", "checkpoints/", "--data", "tiny.txt", *TINY_TRAIN],
                           "--out checkpoints: is a directory"),
    "train out empty": (["train", "--out", "", "--data", "tiny.txt", *TINY_TRAIN], "--out '': give a checkpoint"),
    "train resume missing": (train_args("--resume", "nope"), "no checkpoint 'nope'"),
    # sample
    "sample n huge": (["sample", "--checkpoint", "tiny", "-n", "100000000"],
                      "argument -n/--n/--num-samples: expected an integer in [1, 1024], got '100000000'"),
    "sample n 1e9": (["sample", "--checkpoint", "tiny", "-n", "1e9"], "argument -n/--n/--num-samples: expected"),
    "sample length 0": (["sample", "--checkpoint", "tiny", "--length", "0"], "argument --length: expected an integer"),
    "sample length huge": (["sample", "--checkpoint", "tiny", "--length", "1000000000"],
                           "length 1000000000 exceeds the model's context of 24"),
    "sample device": (["sample", "--checkpoint", "tiny", "--device", "tpu"], "argument --device: invalid choice"),
    "sample mask id": (["sample", "--checkpoint", "tiny", "--mask-id", "-1"], "argument --mask-id: expected an "
                                                                              "integer >= 0, got '-1'"),
    "sample shift logits": (["sample", "--checkpoint", "tiny", "--shift-logits", "maybe"],
                            "argument --shift-logits: expected true or false, got 'maybe'"),
    "sample control characters": (["sample", "--checkpoint", "a\x1eb\nc"],
                                  "no checkpoint 'a\\x1eb\\nc' (looked for "),
    # evaluate
    "evaluate val sequences": (["evaluate", "--checkpoint", "tiny", "--val-sequences", "-5"],
                               "argument --val-sequences: expected an integer in [0, 1000000], got '-5'"),
    "evaluate temperature": (["evaluate", "--checkpoint", "tiny", "--temperature", "nan"],
                             "argument --temperature: expected a finite number, got 'nan'"),
    "evaluate steps": (["evaluate", "--checkpoint", "tiny", "--steps", "0"], "argument --steps: expected an integer"),
    "evaluate threads": (["evaluate", "--checkpoint", "tiny", "--threads", "-2"], "argument --threads: expected"),
    # sweep
    "sweep plot suffix": (["sweep", "--checkpoint", "tiny", "--plot", "x.xyz"], "--plot x.xyz: name a .html or .png"),
    "sweep plot under a file": (["sweep", "--checkpoint", "tiny", "--plot", "afile/x.html"],
                                "--plot afile/x.html: afile is a file, not a folder"),
    "sweep out under a file": (["sweep", "--checkpoint", "tiny", "--out", "afile/x.csv"],
                               "--out afile/x.csv: afile is a file, not a folder"),
    "sweep out a folder": (["sweep", "--checkpoint", "tiny", "--out", "checkpoints"], "--out checkpoints: is a dir"),
    "sweep seed": (["sweep", "--checkpoint", "tiny", "--seed", "-1"], "argument --seed: expected an integer in [0, "),
    "sweep seed huge": (["sweep", "--checkpoint", "tiny", "--seed", str(2**63 - 1)], "argument --seed: expected an "
                                                                                   "integer in [0, 4294967295]"),
    "sweep batch size": (["sweep", "--checkpoint", "tiny", "--batch-size", "0"], "argument --batch-size: expected"),
    "sweep n": (["sweep", "--checkpoint", "tiny", "-n", "-3"], "argument -n/--n: expected an integer in [1, "),
    "sweep block length past int64": (["sweep", "--checkpoint", "tiny", "--block-length", "4," + str(2**63)],
                                      "block_length must be an integer below 2^63"),
    "sweep timeout": (["sweep", "--checkpoint", "tiny", "--scheduler-timeout", "nan"],
                      "argument --scheduler-timeout: expected a finite number in (0, 86400], got 'nan'"),
}


# the train cases build a Trainer (model and corpus) before they refuse: slow
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c.startswith("train") else c for c in BAD])
def test_bad_flag_is_one_error_line_before_any_work(env, capsys, case):
    argv, needle = BAD[case]
    assert main(argv) == 2
    err = one_error_line(capsys, needle)
    assert "training diffusion" not in err  # refused before a model was built or a step run
    assert not (env / "checkpoints" / "run.safetensors").exists() and not (env / "x.csv").exists()


@pytest.mark.parametrize("argv, needle", [
    (["sample", "--checkpoint", "tiny", "--temperature", "1e-320"],
     "argument --temperature: expected a finite number, got '1e-320' (too close to 0 to compute with: write 0)"),
    (["sweep", "--checkpoint", "tiny", "--top-p", "0.5,5e-324"], "--top-p: '5e-324' is not a valid value in"),
    (["evaluate", "--checkpoint", "tiny", "--temperature", "1e-310"], "argument --temperature: expected a finite"),
])
def test_subnormal_numbers_are_refused(env, capsys, argv, needle):
    """A subnormal temperature made the sampler divide into an overflow (an index past the vocabulary)."""
    torch.set_flush_denormal(False)  # as a plain `python run.py` runs; the tests flush them to zero (conftest)
    assert main(argv) == 2
    one_error_line(capsys, needle)


def test_every_train_flag_is_checked_by_the_config_too():
    """The Python API and a resumed checkpoint's stored train_config meet the same ranges as the flags."""
    for bad in ({"lr": float("inf")}, {"n_layer": -1}, {"n_layer": "6"}, {"weight_decay": -1.0}, {"threads": -2},
                {"warmup_steps": -5}, {"block_size": 10**9}, {"stratified": "yes"}, {"kind": "gpt"}, {"data": 3}):
        with pytest.raises(ValueError, match=f"^{next(iter(bad))} must be"):
            TrainConfig(**bad)


@pytest.mark.slow
@pytest.mark.parametrize("key, change, needle", [
    ("train_config", {"lr": "fast"}, "error: lr must be a number in (0, 10], got 'fast'"),
    ("training_state", {"step": "3"}, "its training state is incomplete or malformed; it cannot be resumed"),
    ("training_state", {"resumed_at": None}, "its training state is incomplete or malformed"),
])
def test_resuming_a_checkpoint_with_lying_run_metadata_is_one_error_line(env, capsys, key, change, needle):
    """A stored train_config or training state is JSON: a mistyped value is refused, not met mid-run."""
    assert main(train_args()) == 0
    path = env / "checkpoints" / "run.safetensors"
    with safe_open(str(path), "pt") as f:
        header, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    meta = json.loads(header["meta"])
    meta[key].update(change)
    save_file(tensors, str(path), metadata={**header, "meta": json.dumps(meta)})
    capsys.readouterr()
    assert main(["train", "--out", "run", "--resume", "run", "--max-steps", "3"]) == 2
    one_error_line(capsys, needle)


def _send_sigint(method):
    """`method` with a Ctrl-C (a real SIGINT to this process, handled by the CLI's handler) at its start."""
    def wrapped(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return method(*args, **kwargs)
    return wrapped


@pytest.mark.slow
def test_ctrl_c_during_the_final_metrics_saves_the_run(env, capsys, monkeypatch):
    """The held-out metrics after the last step take minutes on a real split; a Ctrl-C there saves the run
    (all its steps, the last validation estimate) instead of losing it. A second Ctrl-C during that save
    does not cut it short."""
    monkeypatch.setattr(Trainer, "final_metrics", _send_sigint(Trainer.final_metrics))
    monkeypatch.setattr(Trainer, "save", _send_sigint(Trainer.save))
    assert main(train_args()) == 130
    err = capsys.readouterr().err
    path = env / "checkpoints" / "run.safetensors"
    meta = load_checkpoint(path).meta
    assert meta["training_state"]["step"] == 2 and "val_estimate_nats_per_char" in meta["metrics"]
    assert f"interrupted at step 2: saved {path}" in err and "saving first" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize("process_handler", ["default", "a server's"])
def test_ctrl_c_while_loading_is_a_line_not_a_traceback(env, capsys, monkeypatch, process_handler):
    """Whatever SIGINT handler the process had: a server started on the main thread (Panel's) leaves one
    that only stops its loop, and the load must still stop."""
    seen = []
    handler = signal.default_int_handler if process_handler == "default" else (lambda *a: seen.append(a))
    before = signal.signal(signal.SIGINT, handler)
    try:
        monkeypatch.setattr(Trainer, "__init__", _send_sigint(Trainer.__init__))
        assert main(train_args()) == 130
        assert signal.getsignal(signal.SIGINT) is handler and seen == []  # the process's handler is back
    finally:
        signal.signal(signal.SIGINT, before)
    err = capsys.readouterr().err
    assert "interrupted before training started: nothing saved" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_diverging_run_is_one_error_line(env, capsys, monkeypatch):
    """A loss that turns NaN (too high an lr, in real runs) stops the run with one line saying what to do."""
    import explorer.train as train_module

    real = train_module.diffusion.loss_share
    monkeypatch.setattr(train_module.diffusion, "loss_share", lambda *a, **k: real(*a, **k) * float("nan"))
    assert main(train_args()) == 2
    one_error_line(capsys, "error: loss became nan at step 0; lower --lr")
