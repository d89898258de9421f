"""Training (explorer/train.py) on tiny corpora built in the test: a tiny model overfits, LR schedules,
save and resume, time limits, EMA weights and `python run.py train --resume`. (Stopping a training
process by a signal: tests/integration/test_train_signals.py.)"""
import math

import pytest
import torch

from explorer import load_checkpoint
from explorer.train import TrainConfig, Trainer, lr_at
from tests.support.models import TINY_TEXT
from tests.support.training import TINY, FixedBatchCorpus


def _mean(xs):
    return sum(xs) / len(xs)


@pytest.mark.slow
# the AR model halves its loss long before 100 steps (to about 1% of its first losses); diffusion, whose
# masking ratio changes every step, needs about 130 and is given 200
@pytest.mark.parametrize("kind,weighting,steps", [("diffusion", "uniform", 200), ("diffusion", "elbo", 200),
                                                  ("ar", "elbo", 100)])
def test_tiny_model_overfits_tiny_corpus(tmp_path, kind, weighting, steps):
    corpus = FixedBatchCorpus(TINY_TEXT, name="tiny")
    cfg = TrainConfig(**{**TINY, "batch_size": 8, "block_size": 24}, kind=kind, weighting=weighting, max_steps=steps)
    trainer = Trainer(cfg, tmp_path / "m.safetensors", corpus=corpus)
    losses = [r["loss"] for r in trainer.run() if r["type"] == "train"]
    assert len(losses) == steps
    assert _mean(losses[-20:]) < 0.5 * _mean(losses[:10])


def test_lr_schedules_warm_up_then_decay():
    base = dict(lr=1.0, warmup_steps=10, max_steps=110, min_lr_ratio=0.1)
    cos, lin, const = (TrainConfig(**base, lr_schedule=s) for s in ("cosine", "linear", "constant"))
    assert lr_at(0, cos) == pytest.approx(0.1)
    assert lr_at(9, cos) == pytest.approx(1.0)
    assert lr_at(60, cos) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr_at(60, lin) == pytest.approx(1 - 0.9 * 0.5)
    assert lr_at(110, cos) == pytest.approx(0.1) and lr_at(110, lin) == pytest.approx(0.1)
    assert lr_at(100, const) == 1.0
    assert lr_at(60, cos, rewarm_from=60) == pytest.approx(lr_at(60, cos) / 10)  # re-warm after resume
    with pytest.raises(ValueError, match="lr_schedule"):
        TrainConfig(lr_schedule="step")


@pytest.mark.slow
def test_save_resume_continues_the_run(tmp_path, tiny_corpus):
    out = tmp_path / "run.safetensors"
    t1 = Trainer(TrainConfig(**TINY, max_steps=30), out, corpus=tiny_corpus, command="first")
    list(t1.run())
    t1.save({"nelbo_nats_per_char": 1.0})
    m = load_checkpoint(out)
    assert m.meta["training_state"]["step"] == 30
    assert m.meta["commands"] == ["first"]
    assert m.meta["words"] == tiny_corpus.words

    t2 = Trainer(TrainConfig(**{**TINY, "n_embd": 999}, max_steps=50), out, resume=out,
                 corpus=tiny_corpus, command="second")
    assert t2.cfg.n_embd == 64  # architecture comes from the checkpoint, not the new flags
    records = [r for r in t2.run() if r["type"] == "train"]
    assert [r["step"] for r in records] == list(range(31, 51))
    t2.save()
    meta = load_checkpoint(out).meta
    assert meta["commands"] == ["first", "second"]
    assert meta["training_state"]["resumed_at"] == [30]
    assert len(meta["curves"]["train"]) == 50


def test_max_minutes_stops_early(tmp_path, tiny_corpus):
    t = Trainer(TrainConfig(**TINY, max_steps=10_000, max_minutes=0.001), tmp_path / "x.safetensors",
                corpus=tiny_corpus)
    steps = [r for r in t.run() if r["type"] == "train"]
    assert 0 < len(steps) < 10_000


def test_cpu_training_flushes_denormals(tmp_path, tiny_corpus):
    torch.set_flush_denormal(False)  # undo conftest's flush: only the Trainer may turn it back on here
    assert torch.tensor(1e-42) * 1 != 0  # a denormal survives, so the check below can fail
    Trainer(TrainConfig(**TINY, max_steps=1), tmp_path / "y.safetensors", corpus=tiny_corpus)
    assert torch.tensor(1e-42) * 1 == 0  # denormal flushed to zero


@pytest.mark.slow
def test_cli_resume_keeps_the_runs_own_settings(tmp_path, monkeypatch):
    """`train --resume X --max-steps N` continues with X's lr/batch/schedule, not the CLI defaults."""
    from explorer.cli import main

    data = tmp_path / "tiny.txt"
    data.write_text(TINY_TEXT * 4)
    out = tmp_path / "run.safetensors"
    common = ["--n-layer", "1", "--n-embd", "32", "--block-size", "16", "--eval-every", "5", "--eval-sequences", "2",
              "--precision", "fp32", "--device", "cpu"]
    assert main(["train", "--out", str(out), "--data", str(data), "--max-steps", "5", "--lr", "0.002",
                 "--batch-size", "4", "--lr-schedule", "linear", *common]) == 0
    assert main(["train", "--out", str(out), "--resume", str(out), "--max-steps", "8"]) == 0
    cfg = load_checkpoint(out).meta["train_config"]
    assert (cfg["lr"], cfg["batch_size"], cfg["lr_schedule"], cfg["max_steps"]) == (0.002, 4, "linear", 8)


@pytest.mark.slow
def test_ema_averages_the_weights_and_is_what_is_evaluated_and_saved(tmp_path, tiny_corpus):
    out = tmp_path / "ema.safetensors"
    t = Trainer(TrainConfig(**TINY, max_steps=3, ema=0.9), out, corpus=tiny_corpus)
    assert t.eval_model is t.ema_model and not any(p.requires_grad for p in t.ema_model.parameters())
    before = [p.detach().clone() for p in t.ema_model.parameters()]
    t.train_step()
    for avg, old, live in zip(t.ema_model.parameters(), before, t.model.parameters()):
        assert torch.allclose(avg, 0.9 * old + 0.1 * live.detach(), atol=1e-6)  # one step of the average
    list(t.run())
    assert not all(torch.equal(a, b) for a, b in zip(t.ema_model.parameters(), t.model.parameters()))
    t.save()
    saved = load_checkpoint(out)  # the average is the checkpoint: stored in fp16
    for name, p in saved.named_parameters():
        assert torch.allclose(p, dict(t.ema_model.named_parameters())[name].half().float())
    val = t.validate()
    t.ema_model = None
    plain = t.validate()  # the same held-out batch through the live weights differs
    assert val["nats_per_char"] != plain["nats_per_char"] and saved.meta["train_config"]["ema"] == 0.9
    with pytest.raises(ValueError, match="ema"):
        TrainConfig(ema=1.0)


def test_a_resumed_run_keeps_the_sampler_knobs_its_checkpoint_recommends(tmp_path, tiny_corpus):
    """A checkpoint's sampler_defaults (its recommended knobs, chosen by measurement) survive a resume: without
    them the resumed model samples at the generic defaults."""
    from explorer.checkpoint import update_metadata

    out = tmp_path / "run.safetensors"
    t1 = Trainer(TrainConfig(**TINY, max_steps=2), out, corpus=tiny_corpus)
    list(t1.run())
    t1.save()
    update_metadata(out, {"sampler_defaults": {"temperature": 0.3, "steps": 12}})
    again = tmp_path / "again.safetensors"
    t2 = Trainer(TrainConfig(**TINY, max_steps=3), again, resume=out, corpus=tiny_corpus)
    list(t2.run())
    t2.save()
    assert load_checkpoint(again).meta["sampler_defaults"] == {"temperature": 0.3, "steps": 12}
    fresh = Trainer(TrainConfig(**TINY, max_steps=1), tmp_path / "fresh.safetensors", corpus=tiny_corpus)
    assert "sampler_defaults" not in fresh.metadata()
