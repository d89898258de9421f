"""Training a uniform-state diffusion model (TrainConfig.process = "uniform", `run.py train --process uniform`):
its config checks, its loss in the training step, the process in the checkpoint's metadata (and the loader's
reading of it), --init-from an AR checkpoint and --resume, on tiny corpora built in the test."""
from __future__ import annotations

import pytest
import torch

from explorer import diffusion, load_checkpoint
from explorer.checkpoint import process_of
from explorer.train import TrainConfig, Trainer
from tests.support.models import TINY_TEXT
from tests.support.training import TINY, FixedBatchCorpus


def test_process_is_checked_with_the_kind_and_the_weighting():
    assert TrainConfig().process == "masked"
    with pytest.raises(ValueError, match="process must be one of"):
        TrainConfig(process="gaussian")
    with pytest.raises(ValueError, match="needs kind diffusion"):
        TrainConfig(process="uniform", kind="ar")
    with pytest.raises(ValueError, match="weighting uniform is for the masked process only"):
        TrainConfig(process="uniform", weighting="uniform")


def test_uniform_training_step_feeds_no_mask_and_saves_its_process(tmp_path, tiny_corpus, monkeypatch):
    out = tmp_path / "u.safetensors"
    trainer = Trainer(TrainConfig(**TINY, process="uniform", max_steps=2), out, corpus=tiny_corpus)
    seen = []
    forward = trainer.model.forward
    monkeypatch.setattr(trainer.model, "forward", lambda x, t: seen.append(x.clone()) or forward(x, t))
    records = [r for r in trainer.run() if r["type"] == "train"]
    assert [r["step"] for r in records] == [1, 2] and all(r["loss"] > 0 for r in records)
    mask_id = trainer.model.config.mask_id
    assert seen and all((x != mask_id).all() for x in seen)  # uniform noise, never [MASK]
    trainer.save()
    model = load_checkpoint(out)
    assert model.meta["process"] == "uniform" and model.meta["train_config"]["process"] == "uniform"
    assert process_of(model) == "uniform"


def test_masked_and_ar_checkpoints_read_as_masked(tmp_path, tiny_corpus):
    masked = Trainer(TrainConfig(**TINY, max_steps=1), tmp_path / "m.safetensors", corpus=tiny_corpus)
    assert masked.metadata()["process"] == "masked"
    ar = Trainer(TrainConfig(**TINY, kind="ar", max_steps=1), tmp_path / "a.safetensors", corpus=tiny_corpus)
    assert "process" not in ar.metadata()
    assert process_of({}) == "masked" and process_of(object()) == "masked"  # older files, Hugging Face models


def test_uniform_validation_and_final_metrics_are_the_uniform_bound(tmp_path, tiny_corpus):
    trainer = Trainer(TrainConfig(**TINY, process="uniform", max_steps=1), tmp_path / "u.safetensors",
                      corpus=tiny_corpus)
    val = trainer.validate()
    assert val["nats_per_char"] == pytest.approx(diffusion.uniform_nelbo(trainer.model, trainer.val, n_t=4)["nats_per_char"])
    metrics = trainer.final_metrics()
    assert {"nelbo_nats_per_char", "accuracy_t0.3_L32", "changed_accuracy_t0.3_L32"} <= set(metrics)
    assert all(0 <= metrics[k] <= 1 for k in metrics if "accuracy" in k)


@pytest.mark.slow
def test_uniform_model_learns_a_tiny_corpus(tmp_path):
    corpus = FixedBatchCorpus(TINY_TEXT, name="tiny")
    cfg = TrainConfig(**{**TINY, "batch_size": 8, "block_size": 24}, process="uniform", max_steps=150)
    losses = [r["loss"] for r in Trainer(cfg, tmp_path / "u.safetensors", corpus=corpus).run() if r["type"] == "train"]
    assert sum(losses[-30:]) / 30 < 0.75 * sum(losses[:10]) / 10  # noisy: each step draws its own t


@pytest.mark.slow
def test_cli_uniform_run_starts_from_an_ar_checkpoint_and_resumes(tmp_path):
    from explorer.cli import main

    data = tmp_path / "tiny.txt"
    data.write_text(TINY_TEXT * 4)
    ar, out = tmp_path / "ar.safetensors", tmp_path / "u.safetensors"
    arch = ["--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--eval-every", "5",
            "--eval-sequences", "2", "--precision", "fp32", "--device", "cpu", "--data", str(data)]
    assert main(["train", "--out", str(ar), "--kind", "ar", "--max-steps", "2", *arch]) == 0
    assert main(["train", "--out", str(out), "--process", "uniform", "--init-from", str(ar), "--shift-logits", "true",
                 "--max-steps", "3", *arch]) == 0
    first = load_checkpoint(out)
    assert first.meta["process"] == "uniform" and first.config.shift_logits
    assert main(["train", "--out", str(out), "--resume", str(out), "--max-steps", "5"]) == 0
    resumed = load_checkpoint(out)
    assert resumed.meta["process"] == "uniform" and resumed.meta["training_state"]["step"] == 5
    assert resumed.meta["training_state"]["resumed_at"] == [3]
    assert not all(torch.equal(a, b) for a, b in zip(first.parameters(), resumed.parameters()))
