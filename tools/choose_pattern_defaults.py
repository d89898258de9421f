"""Choose a patterns checkpoint's sampler defaults: the strategy, schedule, temperature and step count whose
samples score the best period-2 pattern quality (the "Sampling Strategies & Speed Tradeoffs" notebook's measure,
counting only periods of at least 2, so that a one-symbol collapse cannot fool it).

    python tools/choose_pattern_defaults.py --checkpoint patterns --n 64 --threads 2 [--write patterns]

Sweeps strategy x schedule x temperature x steps with experiments.sweep (the same seeds in every cell) and
prints one row per setting, best first: period-2 quality and the notebook's pattern quality (mean ± std).
The recommended setting is the best period-2 mean; a setting within 0.005 of it with fewer steps wins
(as good, and cheaper). --write stores it as the checkpoint's `sampler_defaults` (where the CLI and the
dashboard start; without it, confidence at 32 steps collapses every sample to one repeated symbol) and its
figures as metrics.pattern_bars; the weights are not touched.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import pandas as pd  # noqa: E402

from explorer.cli import CLIError, report_errors  # noqa: E402
from explorer.cli.sweep import parse_list  # noqa: E402

KNOBS = ["strategy", "schedule", "temperature", "steps"]
METRIC = "pattern_quality_p2"
TIE = 0.005  # period-2 quality this close to the best counts as as good


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="patterns", help="a patterns checkpoint: a name in checkpoints/ or a path")
    p.add_argument("--n", type=int, default=64, help="samples per setting")
    p.add_argument("--strategies", default="confidence,margin,entropy,random,left_to_right")
    p.add_argument("--schedules", default="remaining,linear")
    p.add_argument("--temperatures", default="0.7,1.0")
    p.add_argument("--steps", default="4,6,8,10,12,16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's choice)")
    p.add_argument("--write", default=None, metavar="CHECKPOINT",
                   help="store the recommended setting (sampler_defaults) and its figures in this checkpoint's "
                        "metadata")
    args = p.parse_args(argv)
    args.argv = list(argv)
    return args


def grid(args) -> dict:
    """strategy x schedule x temperature x steps, checked against the sampler's registries before any model loads."""
    from explorer.sampling.config import SCHEDULES, STRATEGIES

    vary = {"strategy": parse_list(args.strategies, str, "--strategies"),
            "schedule": parse_list(args.schedules, str, "--schedules"),
            "temperature": parse_list(args.temperatures, float, "--temperatures"),
            "steps": parse_list(args.steps, int, "--steps")}
    for flag, names, valid in (("--strategies", vary["strategy"], STRATEGIES),
                               ("--schedules", vary["schedule"], SCHEDULES)):
        unknown = [n for n in names if n not in valid]
        if unknown:
            raise CLIError(f"{flag}: unknown {', '.join(unknown)}; valid: {', '.join(valid)}")
    if args.n < 1 or min(vary["steps"]) < 1:
        raise CLIError("--n and every --steps value must be at least 1")
    return vary


def best_setting(summary: pd.DataFrame) -> pd.Series:
    """The best period-2 mean; among settings within TIE of it, the fewest steps, then the best mean."""
    col = f"{METRIC}_mean"
    best = summary[col].max()
    close = summary[summary[col] >= best - TIE]
    return close.sort_values(["steps", col], ascending=[True, False]).iloc[0]


def table(summary: pd.DataFrame) -> str:
    shown = summary.sort_values(f"{METRIC}_mean", ascending=False)
    rows = [f"{r.strategy:>14} {r.schedule:>7} {r.temperature:>5g} {int(r.steps):>5}   "
            f"{getattr(r, METRIC + '_mean'):.3f} ± {getattr(r, METRIC + '_std'):.3f}   "
            f"{r.pattern_quality_mean:.3f} ± {r.pattern_quality_std:.3f}" for r in shown.itertuples()]
    head = f"{'strategy':>14} {'schedule':>7} {'T':>5} {'steps':>5}   period-2 quality   pattern quality"
    return "\n".join([head, *rows])


def figures(top: pd.Series, n: int) -> dict:
    return {"pattern_quality_p2": round(float(top[f"{METRIC}_mean"]), 4),
            "pattern_quality": round(float(top["pattern_quality_mean"]), 4), "samples": n}


def run(args) -> int:
    import torch

    from explorer.checkpoint import load_checkpoint, update_metadata
    from explorer.experiments import sample_kind, sweep
    from explorer.sampling import SamplerConfig

    vary = grid(args)
    torch.set_flush_denormal(True)
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_checkpoint(args.checkpoint, "cpu")
    if sample_kind(model) != "patterns":
        raise CLIError(f"{args.checkpoint} is not a patterns model: tools/choose_defaults.py chooses for text")
    _, summary = sweep(model, SamplerConfig(seed=args.seed), vary, args.n, args.seed)
    print(table(summary))
    top = best_setting(summary)
    setting = {"strategy": str(top["strategy"]), "schedule": str(top["schedule"]),
               "temperature": float(top["temperature"]), "steps": int(top["steps"])}
    print(f"\nrecommended: {setting}: period-2 quality {top[f'{METRIC}_mean']:.3f}, "
          f"pattern quality {top['pattern_quality_mean']:.3f} ({args.n} samples)")
    if args.write:
        command = "python tools/choose_pattern_defaults.py " + " ".join(args.argv)
        path = update_metadata(args.write, {"sampler_defaults": setting, "metrics": {
            "pattern_bars": figures(top, args.n), "pattern_bars_command": command}})
        print(f"wrote sampler_defaults to {path}")
    return 0


def main(argv=None) -> int:
    return report_errors(run, parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
