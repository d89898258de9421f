"""The samples a seed gives: final tokens of sampler runs over every path (one generator, one per row,
merged and packed through sample_many, the AR baseline), kept in tests/unit/sampling/seed_runs.json so
that a change to the sampler's code cannot change them unnoticed (test_seed_stability.py).

The fixture was first written by the sampler as it was before its step became one shared definition
(sampling/step.py), and the shared step reproduced every entry. Rewrite it only when samples are meant
to change (and say so in the commit), with:

    python -m tests.support.seed_runs --write

The models are built here, not in models.py, so that a change to the test helpers cannot move the
fixture: small random Transformers (seeded) over a 10-letter alphabet, and the shipped patterns
checkpoint. Every token id is below 16, so a row is written as one hex digit per position.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from explorer.checkpoint import load_checkpoint
from explorer.data.tokenizer import CharTokenizer
from explorer.model import ModelConfig, Transformer
from explorer.sampling import SamplerConfig as C
from explorer.sampling import sample, sample_ar, sample_many

FIXTURE = Path(__file__).resolve().parents[1] / "unit" / "sampling" / "seed_runs.json"
TEMPLATE = "ab█c[___]█d██"


class EosTokenizer(CharTokenizer):
    """'d' (id 3) ends a sequence: the EOS rules have something to act on."""
    eos_ids = [3]


def tiny(kind: str = "diffusion", time_conditioning: str = "none", tokenizer=None):
    tok = tokenizer or CharTokenizer("abcdefghij")
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=16, n_layer=2,
                                    n_head=4, n_embd=32, kind=kind, time_conditioning=time_conditioning)).eval()
    if time_conditioning == "adaln":  # adaLN starts at zero: perturbed so that t matters
        with torch.no_grad():
            for block in model.blocks:
                block.ada[1].weight.normal_(0, 0.2, generator=torch.Generator().manual_seed(1))
    model.tokenizer = tok
    return model


CONFIGS = {
    "confidence": C(steps=6),
    "margin, hot, top-k": C(steps=5, strategy="margin", temperature=1.4, top_k=5),
    "entropy, greedy, cosine": C(steps=7, strategy="entropy", temperature=0, schedule="cosine"),
    "random, remaining": C(steps=4, strategy="random", schedule="remaining", temperature=0.8),
    "left_to_right, top-p": C(steps=8, strategy="left_to_right", top_p=0.7),
    "blocks": C(steps=9, block_length=5, strategy="margin"),
    "blocks, greedy": C(steps=5, block_length=4, temperature=0),
    "remask": C(steps=10, remask=0.3, remask_t_on=0.9, schedule="cosine"),
    "remask, random, blocks": C(steps=9, strategy="random", remask=0.5, block_length=6),
    "threshold": C(threshold=0.1, temperature=1.2),
    "threshold, blocks, annealed": C(threshold=0.2, block_length=4, temperature=1.5, temperature_end=0.3,
                                     strategy="random"),
    "factor": C(factor=1.0, temperature=0.9),
    "annealed": C(steps=6, temperature=1.5, temperature_end=0.1, strategy="margin"),
    "alg_temp": C(steps=6, alg_temp=0.5, temperature=1.1),
    "alg_temp, blocks": C(steps=6, alg_temp=0.3, block_length=5),
    "guidance": C(steps=5, cfg_scale=1.5),
    "one step": C(steps=1, temperature=0.7),
}
EOS_CONFIGS = {"eos both": C(steps=6, suppress_eos="both", temperature=1.2),
               "eos confidence, greedy": C(steps=6, suppress_eos="confidence", temperature=0)}
# a sweep's cells: merged where merge_key allows (the first six), packed otherwise
MANY = [dict(config=C(steps=s, strategy=st, schedule=sc, temperature=T, top_k=9, seed=i), batch_size=n, record=False)
        for i, (s, st, sc, T, n) in enumerate([(1, "confidence", "linear", 1.0, 3), (3, "random", "remaining", 0.7, 20),
                                               (7, "margin", "cosine", 1.3, 7), (12, "entropy", "linear", 0.0, 16),
                                               (5, "left_to_right", "remaining", 1.0, 1),
                                               (2, "confidence", "cosine", 0.0, 5)])]
MANY += [dict(config=C(threshold=0.3, seed=5), batch_size=4, record=False),
         dict(config=C(steps=6, block_length=5, seed=6), batch_size=18, record=False),
         dict(config=C(steps=6, remask=0.2, seed=8), batch_size=2, record=True)]


def gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def written(traj) -> str:
    """Final rows as hex digits, '/' between rows, then NFE and steps."""
    rows = "/".join("".join(f"{int(t):x}" for t in row) for row in traj.final)
    return f"{rows} nfe={traj.nfe} steps={traj.n_steps}"


def _diffusion_runs(name: str, model, configs: dict, templates) -> dict:
    out = {}
    for template in templates:
        for label, config in configs.items():
            if config.cfg_scale > 0 and template is None:  # guidance needs a prompt
                continue
            key = f"{name} | {template} | {label}"
            out[f"{key} | 3 rows, seed 7"] = lambda c=config.replace(seed=7), t=template: sample(
                model, c, template=t, batch_size=3)
            out[f"{key} | a generator per row"] = lambda c=config, t=template: sample(
                model, c, template=t, generator=gens([3, 11, 3]))
    return out


def runs() -> dict:
    """name -> a function returning that run's Trajectory (or, for sample_many, its list)."""
    patterns = load_checkpoint("patterns")
    p_template = patterns.tokenizer.decode([0, 1]) + "█" * 5 + patterns.tokenizer.decode([2]) + "[___]"
    out = {}
    out.update(_diffusion_runs("tiny", tiny(), CONFIGS, (None, TEMPLATE)))
    out.update(_diffusion_runs("tiny, EOS", tiny(tokenizer=EosTokenizer("abcdefghij")), EOS_CONFIGS, (None, TEMPLATE)))
    out.update(_diffusion_runs("tiny, adaLN", tiny(time_conditioning="adaln"),
                               {k: CONFIGS[k] for k in ("confidence", "random, remaining", "threshold", "alg_temp")},
                               (None,)))
    out.update(_diffusion_runs("patterns", patterns, CONFIGS, (None, p_template)))
    for merge in (True, False):
        out[f"patterns | sample_many, merge={merge}"] = lambda m=merge: sample_many(patterns, MANY, merge=m)
    ar = tiny(kind="ar")
    for prompt in (None, "abc"):
        for label in ("confidence", "annealed", "left_to_right, top-p", "margin, hot, top-k"):
            key, config = f"tiny AR | {prompt} | {label}", CONFIGS[label]
            out[f"{key} | 2 rows"] = lambda c=config, p=prompt: sample_ar(ar, c, prompt=p, length=12, batch_size=2)
            out[f"{key} | a generator per row"] = lambda c=config, p=prompt: sample_ar(
                ar, c, prompt=p, length=12, generator=gens([1, 2, 1]))
    return out


def results() -> dict:
    """name -> what the run gives, as the fixture writes it (a sample_many: one entry per run)."""
    out = {}
    for name, run in runs().items():
        got = run()
        if isinstance(got, list):
            out.update({f"{name} | run {i}": written(traj) for i, traj in enumerate(got)})
        else:
            out[name] = written(got)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {FIXTURE.name} (else: compare)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    got = results()
    if args.write:
        FIXTURE.write_text(json.dumps(got, indent=0, sort_keys=True, ensure_ascii=False) + "\n")
        print(f"wrote {len(got)} runs to {FIXTURE}")
        return
    want = json.loads(FIXTURE.read_text())
    changed = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    print(f"{len(changed)} of {len(want)} runs differ" + "".join(f"\n  {k}" for k in changed))


if __name__ == "__main__":
    main()
