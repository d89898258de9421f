"""`run.py evaluate`'s held-out figures of a uniform-state checkpoint (metadata process=uniform): its own
NELBO bound and denoising accuracy, not the masked process's figures, which would score it on [MASK] inputs
it never saw."""
from __future__ import annotations

import torch

from explorer import diffusion
from explorer.cli.evaluate import print_accuracy, print_likelihood
from tests.support.models import make_model


def _model(process: str):
    model = make_model(vocab_size=9, mask_id=8, block_size=16)
    model.meta = {"process": process, "metrics": {}}
    return model


def test_uniform_checkpoint_gets_its_own_bound_and_accuracy(capsys):
    val = torch.randint(0, 8, (6, 16), generator=torch.Generator().manual_seed(0))
    model = _model("uniform")
    print_likelihood(model, val)
    print_accuracy(model, val, seed=0)
    out = capsys.readouterr().out
    expected = diffusion.uniform_nelbo(model, val)["bits_per_char"]
    assert f"NELBO (uniform-state process): {expected:.4f} bits/char" in out
    assert "positions the noise changed" in out and "masked positions" not in out
    assert f"{diffusion.uniform_accuracy(model, val, 0.5)['all']:13.3f}" in out


def test_masked_checkpoint_keeps_the_masked_figures(capsys):
    val = torch.randint(0, 8, (6, 16), generator=torch.Generator().manual_seed(0))
    model = _model("masked")
    print_likelihood(model, val)
    out = capsys.readouterr().out
    assert f"held-out NELBO: {diffusion.nelbo(model, val)['bits_per_char']:.4f} bits/char" in out


def test_the_quality_line_names_the_knobs_a_uniform_state_sampler_reads(capsys):
    """The line said 'confidence' for a sampler that reads no strategy: it names the entropy bound."""
    from types import SimpleNamespace

    from explorer.cli.evaluate import print_quality
    from explorer.sampling import SamplerConfig

    args = SimpleNamespace(n=1, seed=0, length=8, batch_size=1)
    print_quality(_model("uniform"), None, args, None, SamplerConfig(steps=2, entropy_bound=5.0, temperature=0.5))
    out = capsys.readouterr().out
    assert "sampler: 2 steps, entropy bound 5, temperature 0.5" in out and "confidence" not in out
