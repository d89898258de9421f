"""Metrics that collapse cannot fool: one-symbol patterns and repetitive text never win.

Hand-made inputs with known answers; the sweep / CLI paths run on tiny models built here (CPU, seconds).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from explorer import experiments, metrics
from explorer.cli import main as cli_main
from explorer.experiments import aggregate, ranking_metric, sweep, sweet_spot
from explorer.plots import LABELS
from explorer.sampling import SamplerConfig
from tests.support import ROOT
from tests.support.models import PeriodicDenoiser

ONE_SYMBOL = [4] * 24  # 'EEEE...': a one-symbol tiling
PERIOD_3 = [0, 1, 2] * 8  # 'ABCABC...'


# ----------------------------------------------------------------------------- patterns, by hand

def test_one_symbol_tiling_scores_one_on_pattern_quality_but_is_flagged_collapsed():
    assert metrics.pattern_quality(ONE_SYMBOL) == 1.0  # the notebook's measure stays as defined
    assert metrics.pattern_quality_p2(ONE_SYMBOL) == 0.0
    assert metrics.distinct_symbols(ONE_SYMBOL) == 1 and metrics.collapsed(ONE_SYMBOL) is True


def test_real_period3_tiling_is_not_collapsed():
    assert metrics.pattern_quality(PERIOD_3) == 1.0
    assert metrics.pattern_quality_p2(PERIOD_3) == 1.0
    assert metrics.distinct_symbols(PERIOD_3) == 3 and metrics.collapsed(PERIOD_3) is False


def test_period2_quality_ignores_units_of_one_repeated_symbol():
    almost = [0] * 23 + [1]  # 'AAAA...AB': the notebook's measure finds a near-perfect period 2 of 'AA'
    assert metrics.pattern_quality(almost) == pytest.approx(21 / 22)
    assert metrics.pattern_quality_p2(almost) == 0.0 and not metrics.collapsed(almost)
    broken = [0, 1, 2] * 7 + [0, 1, 1]  # one wrong symbol at the end: both measures agree
    assert metrics.pattern_quality_p2(broken) == metrics.pattern_quality(broken) == pytest.approx(20 / 21)
    two = [3, 3, 5] * 8  # a real unit may repeat a symbol ('DDF'): still period 3
    assert metrics.pattern_quality_p2(two) == 1.0 and metrics.distinct_symbols(two) == 2


def test_batched_scores_match_row_by_row():
    rows = np.array([ONE_SYMBOL, PERIOD_3, [0] * 23 + [1], list(range(12)) * 2])
    table = metrics.pattern_scores(torch.tensor(rows))
    assert list(table.columns) == ["pattern_quality", "pattern_quality_p2", "distinct_symbols", "collapsed"]
    assert table["collapsed"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert table["distinct_symbols"].tolist() == [1, 3, 2, 12]
    assert table["pattern_quality_p2"].tolist() == [metrics.pattern_quality_p2(r) for r in rows]
    assert table["pattern_quality"].tolist() == [metrics.pattern_quality(r) for r in rows]


def test_pattern_cell_reports_collapsed_share_and_symbols_used():
    texts = ["EEEEEEEEEEEE", "ABCABCABCABC", "FFFFFFFFFFFF", "ABABABABABAB"]
    ids = np.array([[ord(c) - 65 for c in t] for t in texts])
    table = pd.concat([pd.DataFrame({"sampler": "diffusion", "steps": 4, "text": texts}),
                       metrics.pattern_scores(ids)], axis=1)
    row = aggregate(table, ["steps"]).iloc[0]
    assert row["collapsed_mean"] == 0.5 and row["pattern_quality_mean"] == 1.0
    assert row["pattern_quality_p2_mean"] == 0.5 and row["distinct_symbols_mean"] == 1.75
    assert row["symbols_used"] == 5  # A B C E F


def _pattern_summary():
    """Confidence reaches 1.0 on the notebook's pattern quality at 4 steps only by collapsing to one symbol."""
    return pd.DataFrame({"sampler": "diffusion", "steps": [1, 2, 4], "strategy": "confidence",
                         "pattern_quality_mean": [0.3, 0.8, 1.0], "pattern_quality_p2_mean": [0.3, 0.8, 0.0],
                         "collapsed_mean": [0.0, 0.0, 1.0], "pattern_quality_std": 0.1})


def test_sweet_spot_ranks_patterns_by_period2_quality():
    summary = _pattern_summary()
    assert sweet_spot(summary, "pattern_quality")["steps"].item() == 4  # fooled: 0.8 < 0.9 * 1.0
    spot = sweet_spot(summary)  # default: the collapse-proof reading
    assert ranking_metric(summary) == "pattern_quality_p2"
    assert spot["steps"].item() == 2 and spot["best_steps"].item() == 2
    assert ranking_metric(summary.drop(columns="pattern_quality_p2_mean")) == "pattern_quality"


def test_plot_star_follows_the_rule_on_the_plotted_metric_and_the_legend_states_it():
    """The star obeys the caption's rule on the curve it sits on: on pattern quality the fewest steps reaching
    90% of that curve's best (4 here, though collapsed), on the period->=2 reading its own (2)."""
    import holoviews as hv

    from explorer.plots import quality_speed_plot

    summary = _pattern_summary().assign(pattern_quality_p2_std=0.1)
    for metric, steps, value in (("pattern_quality", 4, 1.0), ("pattern_quality_p2", 2, 0.8)):
        plot = quality_speed_plot(summary, metric, speed=False)
        star = next(el for el in plot if isinstance(el, hv.Scatter) and el.label.startswith("sweet spot"))
        assert star.dimension_values("steps").tolist() == [steps]
        assert star.dimension_values(metric).tolist() == [value]  # on the plotted curve, >= 90% of its best
        assert value >= 0.9 * summary[f"{metric}_mean"].max()
        assert star.label == f"sweet spot: fewest steps reaching 90% of the best {LABELS[metric]}"


def test_sweep_on_a_one_symbol_denoiser_is_flagged():
    class OneSymbol(PeriodicDenoiser):
        def forward(self, x, t=None):
            logits = torch.full((*x.shape, self.config.vocab_size), -5.0)
            logits[..., 4] = 5.0  # always 'E'
            return logits  # (B, L, V)

    table, summary = sweep(OneSymbol(), SamplerConfig(temperature=0), {"steps": [2]}, n_samples=3,
                           reference=np.tile(PERIOD_3[:12], (3, 1)))
    diff, ref = summary.iloc[0], summary.iloc[1]
    assert (diff["pattern_quality_mean"], diff["pattern_quality_p2_mean"], diff["collapsed_mean"]) == (1.0, 0.0, 1.0)
    assert diff["symbols_used"] == 1 and ref["symbols_used"] == 3 and ref["collapsed_mean"] == 0.0
    assert (table.loc[table["sampler"] == "diffusion", "text"] == "E" * 12).all()


# ----------------------------------------------------------------------------- text, by hand

def test_ref_distance_by_hand():
    d = metrics.ref_distance([math.log(8.0), math.log(2.0)], [3.0, 3.5], ref_gen_nll=math.log(2.0), ref_entropy=3.0)
    assert d[0] == pytest.approx(math.log(4) / math.log(4))  # 4x the reference's gen-PPL: one bar
    assert d[1] == pytest.approx(0.5 / 0.35)
    assert metrics.passes_reference_bars(8.0, 3.3, 2.0, 3.0) and not metrics.passes_reference_bars(8.1, 3.0, 2.0, 3.0)
    assert not metrics.passes_reference_bars(4.0, 2.6, 2.0, 3.0)


def _text_table():
    """Held-out text (gen-PPL ~5, entropy ~3.2), a step count that writes `the the the` (gen-PPL 1.5,
    entropy from the text itself) and one that is close to real text."""
    repetitive = "the the the the the the the the the the the the "
    ref = pd.DataFrame({"sampler": "reference", "gen_nll": np.log([4.5, 5.5]), "entropy": [3.15, 3.25]})
    cells = pd.DataFrame({"sampler": "diffusion", "steps": [8, 8, 64, 64],
                          "gen_nll": np.log([6.5, 7.5, 1.5, 1.5]),
                          "entropy": [3.0, 3.1, metrics.char_entropy(repetitive), metrics.char_entropy(repetitive)],
                          "word_validity": [0.8, 0.8, 1.0, 1.0]})
    table = pd.concat([cells, ref], ignore_index=True)
    return table.assign(gen_ppl=np.exp(table["gen_nll"]))


def test_repetitive_text_is_far_from_the_reference_although_its_gen_ppl_is_lowest():
    table = _text_table()
    assert metrics.char_entropy("the the the the ") < 1.4  # 4 symbols: t h e and space
    summary = aggregate(table, ["steps"])
    by_steps = summary[summary["sampler"] == "diffusion"].set_index("steps")
    assert by_steps.loc[64, "gen_ppl_mean"] < by_steps.loc[8, "gen_ppl_mean"]
    assert by_steps.loc[64, "ref_distance_mean"] > 3 > 1 > by_steps.loc[8, "ref_distance_mean"]
    ref = summary[summary["sampler"] == "reference"].iloc[0]
    assert 0 < ref["ref_distance_mean"] < by_steps.loc[8, "ref_distance_mean"]  # its own spread: the floor
    assert ranking_metric(summary, "gen_ppl") == "ref_distance"
    assert sweet_spot(summary)["steps"].item() == 8 and sweet_spot(summary, "gen_ppl")["steps"].item() == 64
    assert sweet_spot(summary, "word_validity")["steps"].item() == 64  # fooled, so not the default


def test_no_reference_row_no_ref_distance():
    table = _text_table()
    no_ref = table[table["sampler"] != "reference"]
    assert "ref_distance" not in experiments.with_ref_distance(no_ref)
    summary = aggregate(no_ref, ["steps"])
    assert "ref_distance_mean" not in summary
    assert ranking_metric(summary) == "gen_ppl" and sweet_spot(summary)["steps"].item() == 64


def test_text_sweep_with_judge_and_reference_carries_ref_distance(text_models):
    corpus, model, judge = text_models  # test_sweep's tiny text model and AR judge
    ref = experiments.reference_samples(model, corpus, 24, n=3, seed=0)
    table, summary = sweep(model, SamplerConfig(), {"steps": [2, 4]}, n_samples=2, judge=judge, reference=ref)
    ref_rows = table[table["sampler"] == "reference"]
    expect = metrics.ref_distance(table["gen_nll"], table["entropy"], ref_rows["gen_nll"].mean(),
                                  ref_rows["entropy"].mean())
    np.testing.assert_allclose(table["ref_distance"], expect)
    assert summary["ref_distance_mean"].notna().all() and "ref_distance_mean" in sweet_spot(summary)


# ----------------------------------------------------------------------------- CLI

def test_cli_sweep_prints_collapse_metrics_and_ranks_by_period2(ckpt_dir, capsys):
    assert cli_main(["sweep", "--checkpoint", "pat", "--steps", "1,2", "--n", "2"]) == 0
    out = capsys.readouterr().out
    for col in ("pattern_quality_p2", "distinct_symbols", "collapsed", "symbols_used"):
        assert col in out.splitlines()[0]
    assert "sweet spot by pattern_quality_p2" in out


def test_cli_refuses_metrics_of_the_other_kind(ckpt_dir, capsys):
    assert cli_main(["sweep", "--checkpoint", "txt", "--metric", "collapsed", "--judge", "none"]) == 2
    assert "not measured on a text checkpoint" in capsys.readouterr().err
    assert cli_main(["sweep", "--checkpoint", "txt", "--metric", "ref_distance", "--judge", "none"]) == 2
    assert "needs an AR judge" in capsys.readouterr().err
    assert cli_main(["sweep", "--checkpoint", "txt", "--metric", "ref_distance", "--judge", "ar",
                     "--no-reference"]) == 2
    assert "drop --no-reference" in capsys.readouterr().err


# ----------------------------------------------------------------------------- tools/choose_defaults.py

def _choose_defaults():
    import importlib.util

    path = ROOT / "tools" / "choose_defaults.py"
    spec = importlib.util.spec_from_file_location("choose_defaults", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_choose_defaults_marks_the_bars_recommends_from_them_and_writes_it(ckpt_dir, capsys):
    from explorer.checkpoint import read_metadata

    tool = _choose_defaults()
    out = ckpt_dir / "defaults.csv"
    argv = ["--checkpoint", "txt", "--judge", "ar", "--data", str(ckpt_dir / "tiny.txt"), "--lengths", "24",
            "--prompt", "To be", "--completion", "8", "--steps", "1,2", "--strategies", "confidence,random,nope",
            "--temperatures", "1.0", "--n", "2", "--n-reference", "4", "--out", str(out),
            "--write", str(ckpt_dir / "txt.safetensors"), "--default-length", "20"]
    assert tool.main(argv) == 0
    printed = capsys.readouterr()
    assert "skipping strategies not in the registry: nope" in printed.err
    rows = pd.read_csv(out)
    assert set(rows["block"]) == {"24 characters", "1 prompts + 8 masked"} and len(rows) == 2 * (4 + 1)
    for _, block in rows.groupby("block"):
        ref, cells = block[block["sampler"] == "reference"].iloc[0], block[block["sampler"] == "diffusion"]
        expect = [metrics.passes_reference_bars(g, e, ref["gen_ppl_pooled"], ref["entropy_mean"])
                  for g, e in zip(cells["gen_ppl_pooled"], cells["entropy_mean"])]
        assert cells["passes"].astype(bool).tolist() == expect
        assert cells["ref_distance_mean"].is_monotonic_increasing  # best first
    cells = rows[rows["sampler"] == "diffusion"].astype({"passes": bool})
    per = cells.groupby(["strategy", "temperature", "steps"]).agg(p=("passes", "sum"), d=("ref_distance_mean", "mean"))
    top = per.sort_values(["p", "d"], ascending=[False, True]).index[0]
    assert f"strategy={top[0]}, temperature={top[1]:g}, steps={int(top[2])}" in printed.out
    assert printed.out.count("held-out text (reference)") == 2
    # --write stored that setting, and its figures in each block, in the checkpoint
    meta = read_metadata(ckpt_dir / "txt.safetensors")
    assert meta["sampler_defaults"] == {"strategy": top[0], "temperature": top[1], "steps": int(top[2]), "length": 20}
    bars = meta["metrics"]["text_bars"]
    assert set(bars) == {"24 characters", "1 prompts + 8 masked"}
    for name, bar in bars.items():
        block = rows[rows["block"] == name]
        ref = block[block["sampler"] == "reference"].iloc[0]
        mine = block[(block["strategy"] == top[0]) & (block["temperature"] == top[1]) & (block["steps"] == top[2])].iloc[0]
        assert bar["gen_ppl"] == pytest.approx(mine["gen_ppl_pooled"]) and bar["ref_entropy"] == pytest.approx(ref["entropy_mean"])
        assert bar["passes"] == metrics.passes_reference_bars(bar["gen_ppl"], bar["entropy"], bar["ref_gen_ppl"],
                                                              bar["ref_entropy"])
    assert "--write" in meta["metrics"]["text_bars_command"]


def test_choose_defaults_bad_input_is_one_error_line(ckpt_dir, capsys):
    tool = _choose_defaults()
    assert tool.main(["--checkpoint", "pat"]) == 2
    assert capsys.readouterr().err.startswith("error: --checkpoint pat: a diffusion model of text is needed")
    assert tool.main(["--checkpoint", "txt", "--judge", "ar", "--steps", "2,x"]) == 2
    assert "--steps" in capsys.readouterr().err
