"""Sweeps (explorer/experiments.py) on tiny models and mock denoisers with known logits: the table, its
aggregate and sweet spot, cancelling, bad input (CPU, seconds, no network)."""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from explorer import experiments
from explorer.experiments import SweepCancelled, aggregate, sweep, sweet_spot
from explorer.sampling import SamplerConfig
from tests.support.models import PeriodicDenoiser, tiny_patterns_model

TIMING = ["seconds", "solo_seconds", "tokens_per_s", "ms_per_sample"]


# ----------------------------------------------------------------------------- sweep tables

def test_sweep_table_shape_and_aggregate():
    model = tiny_patterns_model()
    calls = []
    table, summary = sweep(model, SamplerConfig(), {"steps": [1, 2, 4], "strategy": ["confidence", "random"]},
                           n_samples=5, seed=0, batch_size=3, progress=lambda d, t: calls.append((d, t)),
                           reference=np.tile([0, 1, 2], 4)[None].repeat(4, 0))
    assert len(table) == 3 * 2 * 5 + 4
    for col in ["sampler", "steps", "strategy", "seed", "sample", "batch_size", "length", "nfe", *TIMING,
                "text", "pattern_quality"]:
        assert col in table.columns
    diff = table[table["sampler"] == "diffusion"]
    assert (diff["nfe"] <= diff["steps"]).all() and (diff["tokens_per_s"] > 0).all()
    assert list(diff["sample"][:5]) == [0, 1, 2, 3, 4] and list(diff["seed"][:5]) == [0, 0, 0, 1, 1]
    assert diff["text"].str.len().eq(12).all() and diff["pattern_quality"].between(0, 1).all()
    assert (table.loc[table["sampler"] == "reference", "pattern_quality"] == 1.0).all()
    assert len(summary) == 7 and (summary["n"].iloc[:6] == 5).all()
    assert {"pattern_quality_mean", "pattern_quality_std", "pattern_quality_sem", "tokens_per_s_mean"} <= set(summary)
    assert calls[-1] == (30, 30) and [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_sweep_numbers_are_stable_for_a_fixed_seed():
    model = tiny_patterns_model()
    run = lambda seed: sweep(model, SamplerConfig(), {"steps": [2, 4]}, n_samples=4, seed=seed, batch_size=2)[0]
    a, b, c = run(7), run(7), run(8)
    pd.testing.assert_frame_equal(a.drop(columns=TIMING), b.drop(columns=TIMING))
    assert list(a["text"]) != list(c["text"])
    # batch j uses seed + j in every cell: a cell re-run alone reproduces its rows
    alone = sweep(model, SamplerConfig(), {"steps": [4]}, n_samples=4, seed=7, batch_size=2)[0]
    assert list(alone["text"]) == list(a.loc[a["steps"] == 4, "text"])


def test_known_denoiser_scores_perfect_patterns_and_sweet_spot_is_one_step():
    table, summary = sweep(PeriodicDenoiser(), SamplerConfig(temperature=0), {"steps": [1, 4, 12]}, n_samples=3)
    assert (table["pattern_quality"] == 1.0).all()
    assert (table["text"] == "ABCABCABCABC").all()
    spot = sweet_spot(summary, "pattern_quality")
    assert spot["steps"].tolist() == [1] and spot["best"].tolist() == [1.0]


def test_text_sweep_with_judge_ar_baseline_and_reference(text_models):
    corpus, model, judge = text_models
    ref = experiments.reference_samples(model, corpus, 24, n=3, seed=0)
    table, summary = sweep(model, SamplerConfig(), {"steps": [2, 8]}, n_samples=3, seed=0, judge=judge,
                           include_ar=True, reference=ref)
    assert list(summary["sampler"]) == ["diffusion", "diffusion", "ar", "reference"]
    for col in ["entropy", "distinct_2", "distinct_3", "word_validity", "gen_nll", "gen_ppl"]:
        assert col in table.columns
    ar = table[table["sampler"] == "ar"]
    assert (ar["nfe"] == 23).all()  # one call per generated char: position 0 holds the AR start token
    assert ar["steps"].isna().all()  # the AR row has no diffusion knobs
    assert np.isfinite(table["gen_ppl"]).all() and (table["gen_ppl"] >= 1).all()
    assert (summary["gen_ppl_pooled"] <= summary["gen_ppl_mean"] + 1e-9).all()  # Jensen
    ref_rows = table[table["sampler"] == "reference"]
    assert list(ref_rows["text"]) == ref
    # crops cut words at both ends, yet real text beats an untrained model's output by far
    assert ref_rows["word_validity"].mean() > 0.6 > table.loc[table["sampler"] == "diffusion", "word_validity"].mean()


def test_cancel_between_batches_keeps_partial_rows():
    model = tiny_patterns_model()
    stop = threading.Event()
    with pytest.raises(SweepCancelled) as info:
        sweep(model, SamplerConfig(), {"steps": [1, 2]}, n_samples=4, batch_size=2, cancel=stop,
              progress=lambda done, total: stop.set())
    assert info.value.done == 2 and info.value.total == 8 and len(info.value.table) == 2
    assert info.value.table.attrs["knobs"] == ["steps"]
    with pytest.raises(SweepCancelled) as info:
        sweep(model, SamplerConfig(), {"steps": [1]}, n_samples=2, cancel=lambda: True)
    assert info.value.done == 0 and info.value.table.empty


class TrippingDenoiser(PeriodicDenoiser):
    """PeriodicDenoiser that sets `stop` on its `trip_at`-th call, as a knob change would mid-cell."""

    def __init__(self, block_size, trip_at):
        super().__init__(block_size)
        self.stop, self.calls, self.trip_at = threading.Event(), 0, trip_at

    def forward(self, x, t=None):
        self.calls += 1
        if self.calls == self.trip_at:
            self.stop.set()
        return super().forward(x, t)


def test_cancel_during_a_long_cell_stops_within_a_step():
    # calls: 1 warm-up, 4 for the steps=4 cell (one per step: every step changes the canvas), then
    # the 64-step cell trips the cancel on its first call and must stop right after that step
    # (cell after cell: pack=False; the packed sweep's cancel is in sampling/test_packing.py)
    model = TrippingDenoiser(block_size=64, trip_at=1 + 4 + 1)
    with pytest.raises(SweepCancelled) as info:
        sweep(model, SamplerConfig(), {"steps": [4, 64]}, n_samples=2, cancel=model.stop, pack=False)
    assert model.calls == 6  # not 1 + 4 + 64
    assert info.value.done == 2 and info.value.total == 4
    assert info.value.table["steps"].tolist() == [4, 4]  # the stopped batch is dropped whole


def test_template_length_is_the_samplers_canvas_length(text_models):
    from explorer.sampling import parse_template, sample

    _, model, _ = text_models
    for template, length in [("To [___] be", None), ("To be", None), ("To be", 20), ("[___] or", 12)]:
        canvas = parse_template(template, model.tokenizer, length=length, context=model.config.block_size)
        drawn = sample(model, SamplerConfig(steps=2), length=length, template=template).final.shape[1]
        table, _ = sweep(model, SamplerConfig(), {"steps": [2]}, n_samples=1, length=length, template=template)
        assert table["length"].tolist() == [canvas.length] == [drawn], template
        assert experiments.canvas_length(model, length, template) == canvas.length
    assert experiments.canvas_length(model, None, "To be") == 24  # a plain prompt fills the context, not len()


def test_sweep_rejects_bad_input_before_sampling():
    model = tiny_patterns_model()
    with pytest.raises(ValueError, match="unknown sampler knob 'stepz'.*steps"):
        sweep(model, SamplerConfig(), {"stepz": [1]})
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        sweep(model, SamplerConfig(), {"steps": [1], "strategy": ["confidence", "nope"]})
    with pytest.raises(ValueError, match="'seed' cannot be varied"):
        sweep(model, SamplerConfig(), {"seed": [1, 2]})
    with pytest.raises(ValueError, match="non-empty list"):
        sweep(model, SamplerConfig(), {"steps": []})
    with pytest.raises(ValueError, match="causal"):
        sweep(model, SamplerConfig(), {"steps": [1]}, include_ar=model)
    with pytest.raises(ValueError, match="context"):
        sweep(model, SamplerConfig(), {"steps": [1]}, length=13)


def test_explicit_cells_fill_unvaried_knobs_from_the_base():
    cells = experiments.sweep_cells(SamplerConfig(steps=16), [{"steps": 2}, {"threshold": 0.9}])
    assert cells == [{"steps": 2, "threshold": None}, {"steps": 16, "threshold": 0.9}]


def test_each_adaptive_rule_is_swept_without_the_steps_and_one_at_a_time():
    """threshold, factor and entropy_bound each replace the step count: their cells are not crossed with
    the steps, nor with each other; a None among their values keeps the scheduled cells."""
    cells = experiments.cells_from_vary({"steps": [4, 16], "strategy": ["confidence"], "threshold": [None, 0.9],
                                         "factor": [1.0], "entropy_bound": [0.5, 2.0]})
    off = {"threshold": None, "factor": None, "entropy_bound": None}
    assert cells == [{"steps": 4, "strategy": "confidence", **off}, {"steps": 16, "strategy": "confidence", **off},
                     {"strategy": "confidence", **off, "threshold": 0.9}, {"strategy": "confidence", **off, "factor": 1.0},
                     {"strategy": "confidence", **off, "entropy_bound": 0.5},
                     {"strategy": "confidence", **off, "entropy_bound": 2.0}]
    assert experiments.cells_from_vary({"steps": [4], "entropy_bound": [1.0]}) == [{"entropy_bound": 1.0}]
    assert experiments.cells_from_vary({"steps": [4], "threshold": [None]}) == {"steps": [4], "threshold": [None]}


# ----------------------------------------------------------------------------- aggregate, sweet spot

def _summary(steps, means, metric="pattern_quality", **extra):
    return pd.DataFrame({"sampler": "diffusion", "steps": steps, f"{metric}_mean": means, **extra})


def test_aggregate_mean_std_sem_by_hand():
    table = pd.DataFrame({"sampler": "diffusion", "steps": [1, 1, 1, 2], "pattern_quality": [0.1, 0.2, 0.6, 1.0],
                          "nfe": [1, 1, 1, 2]})
    out = aggregate(table, ["steps"])
    row = out[out["steps"] == 1].iloc[0]
    assert row["n"] == 3 and row["pattern_quality_mean"] == pytest.approx(0.3)
    assert row["pattern_quality_std"] == pytest.approx(np.std([0.1, 0.2, 0.6], ddof=1))
    assert row["pattern_quality_sem"] == pytest.approx(np.std([0.1, 0.2, 0.6], ddof=1) / np.sqrt(3))


def test_aggregate_speed_is_per_batch_not_per_row():
    # rows 0-1 come from one sampler call (seed 0), row 2 from another (seed 1)
    table = pd.DataFrame({"sampler": "diffusion", "steps": 4, "seed": [0, 0, 1], "tokens_per_s": [10.0, 10.0, 20.0],
                          "pattern_quality": [1.0, 0.5, 0.0]})
    row = aggregate(table, ["steps"]).iloc[0]
    assert row["tokens_per_s_mean"] == pytest.approx(15.0) and row["pattern_quality_mean"] == pytest.approx(0.5)
    one_batch = aggregate(table[table["seed"] == 0], ["steps"]).iloc[0]
    assert np.isnan(one_batch["tokens_per_s_std"])  # one timing: no spread claimed


def test_sweet_spot_rule_both_directions():
    spot = sweet_spot(_summary([8, 1, 2, 4], [0.9, 0.1, 0.5, 0.85]), "pattern_quality")
    assert spot["steps"].tolist() == [4] and spot["best_steps"].tolist() == [8]  # 0.85 >= 0.9 * 0.9
    ppl = sweet_spot(_summary([1, 2, 4, 8], [30.0, 12.0, 10.5, 10.0], "gen_ppl"), "gen_ppl")
    assert ppl["steps"].tolist() == [4] and ppl["target"].iloc[0] == pytest.approx(10 / 0.9)
    with pytest.raises(ValueError, match="no better direction"):
        sweet_spot(_summary([1, 2], [3.0, 2.0], "entropy"), "entropy")
    assert sweet_spot(_summary([1, 2], [3.0, 2.0], "entropy"), "entropy", higher_is_better=False)["steps"].item() == 2


def test_sweet_spot_per_group_ignores_threshold_and_baseline_rows():
    s = pd.DataFrame({"sampler": ["diffusion"] * 5 + ["ar"],
                      "steps": [1, 2, 1, 2, 32, np.nan], "strategy": ["c", "c", "r", "r", "c", np.nan],
                      "threshold": [None, None, None, None, 0.9, None],
                      "pattern_quality_mean": [0.5, 1.0, 0.95, 1.0, 2.0, 9.0]})
    spot = sweet_spot(s, "pattern_quality", by=["strategy"])
    assert spot.set_index("strategy")["steps"].to_dict() == {"c": 2, "r": 1}
