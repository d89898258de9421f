"""AR-to-diffusion adaptation (a shorter route to a good diffusion model, as Dream adapted Qwen): a diffusion
model that starts from a causal checkpoint's weights, its logits read one position to the left (shift_logits)."""
from __future__ import annotations

import pytest
import torch

from explorer import diffusion, load_checkpoint
from explorer.cli import main
from explorer.model import ModelConfig, Transformer
from explorer.train import TrainConfig, Trainer
from tests.support.models import TINY_TEXT
from tests.support.training import TINY, FixedBatchCorpus


def test_shifted_logits_are_read_one_position_to_the_left():
    cfg = ModelConfig(vocab_size=12, mask_id=11, block_size=16, n_layer=1, n_head=2, n_embd=16)
    torch.manual_seed(0)
    plain = Transformer(cfg).eval()
    shifted = Transformer(ModelConfig(**{**cfg.to_dict(), "shift_logits": True})).eval()
    shifted.load_state_dict(plain.state_dict())
    x = torch.randint(0, 11, (3, 10))
    a, b = plain(x, torch.ones(3)), shifted(x, torch.ones(3))
    assert torch.equal(b[:, 1:], a[:, :-1]) and torch.equal(b[:, 0], a[:, 0])
    with pytest.raises(ValueError, match="shift_logits is for diffusion"):
        ModelConfig(**{**cfg.to_dict(), "kind": "ar", "shift_logits": True})


@pytest.fixture(scope="module")
def trained_ar(tmp_path_factory):
    """A tiny AR model that has learned the fixed batch a little, saved as a checkpoint (trained once for
    the module: the tests only read it)."""
    path = tmp_path_factory.mktemp("trained_ar") / "ar.safetensors"
    corpus = FixedBatchCorpus(TINY_TEXT, name="tiny")
    cfg = TrainConfig(**{**TINY, "batch_size": 8, "block_size": 24}, kind="ar", max_steps=150)
    trainer = Trainer(cfg, path, corpus=corpus)
    list(trainer.run())
    trainer.save({"val_ce_nats_per_char": 1.0})
    return corpus, cfg, path


@pytest.mark.slow
def test_adaptation_starts_from_the_ar_weights_and_beats_a_random_start(tmp_path, trained_ar):
    corpus, ar_cfg, ar_path = trained_ar
    ar = load_checkpoint(ar_path)
    base = {**TINY, "batch_size": 8, "block_size": 24, "kind": "diffusion"}
    adapted = Trainer(TrainConfig(**base, init_from=str(ar_path), shift_logits=True, max_steps=1),
                      tmp_path / "d.safetensors", corpus=corpus)
    mine, theirs = adapted.model.state_dict(), ar.state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)
    assert adapted.model.config.kind == "diffusion" and adapted.model.config.shift_logits
    scratch = Trainer(TrainConfig(**base, max_steps=1), tmp_path / "s.safetensors", corpus=corpus)
    x0 = corpus.batch(8, 24)
    nelbo = [diffusion.nelbo(t.model.eval(), x0, n_t=8)["nats_per_char"] for t in (adapted, scratch)]
    assert nelbo[0] < 0.8 * nelbo[1], nelbo  # the AR model's knowledge carries over


@pytest.mark.slow
def test_init_from_a_checkpoint_of_another_shape_is_refused(tmp_path, trained_ar):
    corpus, _, ar_path = trained_ar
    cfg = TrainConfig(**{**TINY, "batch_size": 8, "block_size": 24, "n_embd": 32}, init_from=str(ar_path))
    with pytest.raises(ValueError, match="do not fit this architecture"):
        Trainer(cfg, tmp_path / "d.safetensors", corpus=corpus)


@pytest.mark.slow
def test_cli_init_from_a_missing_checkpoint_is_one_error_line(tmp_path, capsys):
    data = tmp_path / "tiny.txt"
    data.write_text(TINY_TEXT)
    rc = main(["train", "--out", str(tmp_path / "d.safetensors"), "--data", str(data), "--init-from",
               str(tmp_path / "nope.safetensors"), "--max-steps", "1", "--n-layer", "1", "--n-embd", "16",
               "--block-size", "16", "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "no checkpoint" in err[-1]
