"""Data-parallel training: `torchrun --nproc-per-node 2 run.py train ...` on 2 CPU processes
(gloo) trains exactly what one process trains with the same seed and global batch: the same losses,
gradient norms and weights. Tiny corpus and model, a few steps; every run in its own temp dir."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from explorer import diffusion, load_checkpoint
from explorer.distributed import Ranks, from_env
from explorer.train import TrainConfig, Trainer
from tests.support import ROOT
from tests.support.models import TINY_TEXT, make_model

MODEL = ["--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--precision", "fp32",
         "--device", "cpu", "--threads", "1", "--lr", "3e-3", "--warmup-steps", "1", "--eval-sequences", "2"]


@pytest.fixture
def workdir(tmp_path):
    data = tmp_path / "tiny.txt"
    data.write_text(TINY_TEXT * 4)
    env = {**os.environ, "MDLM_EXPLORER_CHECKPOINTS": str(tmp_path / "checkpoints"), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    return tmp_path, data, env


def train_cmd(procs: int, data: Path, out: str, *extra: str) -> list[str]:
    # --standalone: torchrun picks a free port (other test runs may be training at the same time)
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(procs)]
    return [*(launch if procs > 1 else [sys.executable]), "run.py", "train", "--out", out, "--data", str(data),
            *MODEL, *extra]


def run(cmd, env) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_two_processes_train_what_one_process_trains(workdir, monkeypatch):
    from explorer.cli import main

    tmp, data, env = workdir
    # variable rows per step (--min-length: 5 rows split 2 + 3, or more), and the weight average
    common = ["--max-steps", "5", "--eval-every", "5", "--save-every", "100", "--seed", "3", "--batch-size", "5",
              "--min-length", "4", "--short-fraction", "0.5", "--ema", "0.9"]
    # the one process: `run.py train` in this process, as a process of its own would run it (its imports
    # already paid for); the two: torchrun's
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", env["MDLM_EXPLORER_CHECKPOINTS"])
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert main(train_cmd(1, data, "one", *common)[2:]) == 0
    two = run(train_cmd(2, data, "two", *common), env)
    assert two.stderr.count("training ") == 1 and "x 2 processes" in two.stderr  # rank 0 alone reports
    assert sorted(p.name for p in (tmp / "checkpoints").iterdir()) == ["one.safetensors", "two.safetensors"]
    one, two = load_checkpoint(tmp / "checkpoints" / "one.safetensors"), load_checkpoint(tmp / "checkpoints" / "two.safetensors")
    for curve in ("train", "grad_norm", "val"):  # grad norms: the all-reduced gradient has the full batch's scale
        a, b = torch.tensor(one.meta["curves"][curve]), torch.tensor(two.meta["curves"][curve])
        assert a.shape == b.shape and len(a) == (1 if curve == "val" else 5)
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    assert one.meta["training_state"]["tokens"] == two.meta["training_state"]["tokens"]
    assert two.meta["commands"][0].startswith("torchrun --nproc-per-node 2 run.py train")
    a, b = one.state_dict(), two.state_dict()
    assert a.keys() == b.keys()
    for name in a:  # stored in fp16: a rounding step apart at most
        torch.testing.assert_close(b[name].float(), a[name].float(), rtol=2e-3, atol=1e-4, msg=name)
    assert one.meta["metrics"] == pytest.approx(two.meta["metrics"], rel=1e-3)


def test_ctrl_c_under_torchrun_saves_on_rank_0_and_resume_goes_on(workdir):
    """(The AR baseline here: its loss path under DDP runs too.)"""
    tmp, data, env = workdir
    out = tmp / "checkpoints" / "run.safetensors"
    cmd = train_cmd(2, data, "run", "--kind", "ar", "--batch-size", "4", "--max-steps", "1000000",
                    "--eval-every", "1000000", "--save-every", "20")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not out.exists():  # the first periodic save: both ranks are stepping
            assert proc.poll() is None and time.monotonic() < deadline, "training did not get going"
            time.sleep(0.2)
        saved = load_checkpoint(out).meta["training_state"]["step"]
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends torchrun; it passes it on to every rank
        _, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert err.count("interrupted at step") == 1, err[-3000:]  # rank 0 saved, once
    step = load_checkpoint(out).meta["training_state"]["step"]
    assert step >= saved > 0 and f"interrupted at step {step}: saved" in err
    run(train_cmd(2, data, "run", "--resume", "run", "--max-steps", str(step + 3)), env)
    meta = load_checkpoint(out).meta
    assert meta["training_state"]["step"] == step + 3 and meta["training_state"]["resumed_at"] == [step]
    assert [s for s, _ in meta["curves"]["train"][-3:]] == [step + 1, step + 2, step + 3]


# ---------------------------------------------------------------------------------- in process


def test_ranks_split_every_row_once_and_come_from_torchruns_environment():
    for n in (2, 5, 64, 201):
        slices = [Ranks(r, 3).rows(n) for r in range(3)]
        rows = [i for s in slices for i in range(n)[s]]
        sizes = [len(range(n)[s]) for s in slices]
        assert rows == list(range(n)) and max(sizes) - min(sizes) <= 1
    assert from_env({}) == Ranks() and not Ranks().active
    got = from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert got == Ranks(3, 4, 1) and got.active and not got.is_main
    with pytest.raises(ValueError, match="bad torchrun environment"):
        from_env({"RANK": "4", "WORLD_SIZE": "4", "LOCAL_RANK": "0"})


@pytest.mark.parametrize("weighting", ["elbo", "uniform"])
def test_the_shares_of_a_batchs_slices_add_up_to_its_loss_and_gradient(weighting):
    model = make_model(vocab_size=12, mask_id=11, block_size=16).train()
    g = torch.Generator().manual_seed(0)
    x0 = torch.randint(0, 11, (5, 16), generator=g)  # (B, L)
    t, xt, masked = diffusion.draw_noise(x0, 11, generator=g)
    masked[3:] = False  # a slice with nothing masked must still give every weight a gradient
    xt = torch.where(masked, torch.full_like(xt, 11), x0)
    full_loss = diffusion.weighted_loss(diffusion.masked_ce(model(xt, t), x0, masked, 11), masked, t, weighting)
    full_grads = torch.autograd.grad(full_loss, list(model.parameters()))
    total, grads = 0.0, [torch.zeros_like(p) for p in model.parameters()]
    for rows in (slice(0, 2), slice(2, 3), slice(3, 5)):
        share = diffusion.loss_share(model, x0[rows], xt[rows], t[rows], masked[rows], 11, weighting,
                                     n_rows=5, n_masked=int(masked.sum()))
        for acc, gr in zip(grads, torch.autograd.grad(share, list(model.parameters()))):
            acc += gr  # autograd.grad raises if a weight got no gradient (unused)
        total += share.item()
    assert total == pytest.approx(full_loss.item(), rel=1e-5)
    for a, b in zip(grads, full_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_more_processes_than_rows_is_refused_clearly(workdir, monkeypatch, capsys):
    tmp, data, _ = workdir
    with pytest.raises(ValueError, match="--batch-size 2 is smaller than the 4 processes"):
        Trainer(TrainConfig(batch_size=2, device="cpu"), tmp / "x.safetensors", ranks=Ranks(0, 4))
    from explorer.cli import main

    for k, v in {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)
    assert main(["train", "--out", str(tmp / "y.safetensors"), "--data", str(data), "--batch-size", "2", *MODEL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --batch-size 2 is smaller than the 4 processes: each process trains at least one row "
                   "of every batch"]
