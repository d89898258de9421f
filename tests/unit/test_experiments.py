"""Sweeps, sweet spot, plots and the sweep / evaluate CLIs on tiny models (CPU, seconds, no network)."""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
import torch

from explorer import experiments
from explorer.checkpoint import save_checkpoint
from explorer.cli import main as cli_main
from explorer.data.corpus import TextCorpus
from explorer.data.patterns import pattern_tokenizer
from explorer.experiments import SweepCancelled, aggregate, sweep, sweet_spot
from explorer.model import ModelConfig
from explorer.sampling import SamplerConfig
from tests.conftest import TINY_TEXT, make_model


TIMING = ["seconds", "tokens_per_s", "ms_per_sample"]


def _patterns_model(block_size=12):
    tok = pattern_tokenizer(15)
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=block_size)
    model.tokenizer, model.meta = tok, {"corpus": {"name": "patterns", "kind": "patterns"}, "words": []}
    return model


class PeriodicDenoiser(torch.nn.Module):
    """Mock denoiser with known logits: always 90% on the symbol of 'ABCABC...' at each position, so
    every sample is a perfect period-3 pattern whatever the steps or strategy."""

    def __init__(self, block_size=12):
        super().__init__()
        tok = pattern_tokenizer(15)
        self.config = ModelConfig(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=block_size)
        self.tokenizer, self.meta = tok, {"corpus": {"name": "patterns", "kind": "patterns"}}
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, t=None):
        B, L = x.shape
        target = torch.arange(L) % 3  # (L,) A B C A B C ...
        probs = torch.full((B, L, self.config.vocab_size), 0.1 / (self.config.vocab_size - 2))
        probs[..., self.config.mask_id] = 1e-12
        probs[:, torch.arange(L), target] = 0.9
        return probs.log()  # (B, L, V)


@pytest.fixture(scope="module")
def text_models():
    corpus = TextCorpus(TINY_TEXT, name="tiny")
    tok = corpus.tokenizer
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=24)
    model.tokenizer, model.meta = tok, {"corpus": {"name": "tiny", "kind": "text"}, "words": corpus.words}
    judge = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=24, kind="ar", seed=1)
    judge.tokenizer = tok
    return corpus, model, judge


# ----------------------------------------------------------------------------- sweep tables

def test_sweep_table_shape_and_aggregate():
    model = _patterns_model()
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
    model = _patterns_model()
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
    model = _patterns_model()
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
    # (cell after cell: pack=False; the packed sweep's cancel is in test_sweep_packed.py)
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
    model = _patterns_model()
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


def test_sweet_spot_seed000_rule_both_directions():
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


# ----------------------------------------------------------------------------- plots

def test_quality_speed_plot_and_html(tmp_path, text_models):
    from explorer.plots import quality_speed_plot, save_plot, speed_plot

    corpus, model, judge = text_models
    cells = [{"steps": 2}, {"steps": 4}, {"threshold": 0.5}]
    _, summary = sweep(model, SamplerConfig(), cells, n_samples=2, judge=judge, include_ar=True,
                       reference=experiments.reference_samples(model, corpus, 24, n=2))
    rows = {name: summary[summary["sampler"] == name] for name in ("diffusion", "ar", "reference")}
    steps = rows["diffusion"][rows["diffusion"]["threshold"].isna()]  # the schedule cells, 2 and 4 steps
    for x, curve in (("steps", "diffusion"), ("nfe", "schedule")):
        shown = {(type(el).__name__, el.label): el for el in quality_speed_plot(summary, "gen_ppl", x=x)}
        mean = shown["Curve", curve]  # the cells' mean gen-PPL at their steps (= their NFE here)
        assert mean.dimension_values(0).tolist() == [2.0, 4.0]
        np.testing.assert_allclose(mean.dimension_values(1), steps["gen_ppl_mean"])
        ar = shown["Curve" if x == "steps" else "Scatter", "AR baseline"]  # a line; on NFE, a point at its NFE
        assert set(ar.dimension_values(1)) == {rows["ar"]["gen_ppl_mean"].iloc[0]}
        assert x == "steps" or ar.dimension_values(0).tolist() == [rows["ar"]["nfe_mean"].iloc[0]]
        assert set(shown["Curve", "held-out text"].dimension_values(1)) == {rows["reference"]["gen_ppl_mean"].iloc[0]}
    # gen-PPL and speed span decades: log axes (issue 15); bounded scores stay linear
    assert quality_speed_plot(summary, "gen_ppl").opts.get().kwargs["logy"] is True
    assert quality_speed_plot(summary, "entropy").opts.get().kwargs["logy"] is False
    path = save_plot(speed_plot(summary), tmp_path / "speed.html", resources="cdn")
    html = path.read_text()
    assert html.startswith("<!DOCTYPE html>") and "tokens / s vs denoising steps" in html and "AR baseline" in html
    with pytest.raises(ValueError, match="no diffusion rows"):
        quality_speed_plot(summary, "pattern_quality")


def test_quality_plot_stars_each_strategys_sweet_spot_and_sizes_as_asked():
    import holoviews as hv

    from explorer.plots import quality_speed_plot, speed_plot

    summary = _summary([1, 2, 4, 1, 2, 4], [0.5, 0.95, 1.0, 0.2, 0.6, 0.9])
    summary["strategy"] = ["c"] * 3 + ["r"] * 3
    summary["pattern_quality_std"] = 0.1
    summary.attrs["knobs"] = ["steps", "strategy"]
    plot = quality_speed_plot(summary, "pattern_quality", speed=False)
    stars = [el for el in plot if isinstance(el, hv.Scatter) and el.label == "sweet spot"]
    assert len(stars) == 1 and stars[0].opts.get().kwargs["marker"] == "star"
    spots = sweet_spot(summary, "pattern_quality", by=["strategy"])  # the one rule, drawn as computed
    assert stars[0].dimension_values("steps").tolist() == spots["steps"].tolist() == [2, 4]
    assert list(stars[0].dimension_values("spot")) == ["Sweet spot ~2 steps (c)", "Sweet spot ~4 steps (r)"]
    assert plot.opts.get("plot").kwargs["responsive"] is True
    assert quality_speed_plot(summary, "pattern_quality", width=640).opts.get("plot").kwargs["width"] == 640
    summary["tokens_per_s_mean"], summary["tokens_per_s_std"] = 5e5, 1.0
    assert not any(el.label == "sweet spot" for el in speed_plot(summary))  # tokens/s: no better direction
    hv.extension("bokeh")
    for figure in (quality_speed_plot(summary, "pattern_quality"), speed_plot(summary)):  # 500k, not 5.000e+5
        axes = [a for a in [*hv.render(figure).left, *hv.render(figure).right] if hasattr(a, "axis_label")]
        speed = [a for a in axes if a.axis_label == "tokens / s"]
        assert len(speed) == 1 and getattr(speed[0].formatter, "format", None) == "0.[0]a"


def test_the_twin_speed_axis_is_logarithmic_over_the_measured_range():
    """tokens/s falls as 1/steps and one step is ten times two: on a linear second axis every speed curve
    past 2 steps lay flat at the bottom of the figure (and two strategies' curves on top of each other)."""
    import holoviews as hv
    from bokeh.models import FixedTicker, LogScale

    from explorer.plots import quality_speed_plot

    summary = _summary([1, 2, 4, 8], [0.2, 0.5, 0.8, 0.9], pattern_quality_std=0.1)
    summary["tokens_per_s_mean"], summary["tokens_per_s_std"] = [1.6e6, 1.2e5, 6e4, 3e4], 0.0
    hv.extension("bokeh")
    fig = hv.render(quality_speed_plot(summary, "pattern_quality"))
    speed = [a for a in fig.right if getattr(a, "axis_label", None) == "tokens / s"]
    assert len(speed) == 1 and isinstance(speed[0].ticker, FixedTicker)
    assert speed[0].ticker.ticks == [5e4, 1e5, 2e5, 5e5, 1e6, 2e6]  # 1-2-5 over the span, 21k-2.2m
    name = speed[0].y_range_name
    assert isinstance(fig.extra_y_scales[name], LogScale)
    span = fig.extra_y_ranges[name]
    assert 0 < span.start < 3e4 and span.end > 1.6e6  # every point inside, none at or below zero
    assert not isinstance(fig.y_scale, LogScale)  # the quality axis stays linear


def test_a_log_axis_under_two_decades_is_ticked_1_2_5_from_bottom_to_top():
    """Bokeh's LogTicker ticks a span under about two decades linearly: the Sweep tab's tokens/s plot (12k to
    310k) had 50k, 100k ... 350k bunched at its top and nothing below 50k. Its ticks are now 1, 2, 5 per
    decade over the data (every digit where that leaves fewer than three), gen-PPL's likewise."""
    import holoviews as hv
    from bokeh.models import FixedTicker

    from explorer.plots import log_ticks, speed_plot

    assert log_ticks(8, 520) == [10, 20, 50, 100, 200, 500]
    assert log_ticks(0.05, 0.3) == [0.05, 0.1, 0.2]
    assert log_ticks(150e3, 450e3) == [2e5, 3e5, 4e5]
    summary = _summary([1, 2, 4, 8, 16, 32], [0.1] * 6)
    summary["tokens_per_s_mean"], summary["tokens_per_s_std"] = [3.1e5, 7.4e4, 3.7e4, 1.9e4, 9.4e3, 4.7e3], 0.0
    hv.extension("bokeh")
    fig = hv.render(speed_plot(summary))
    (axis,) = [a for a in fig.left if getattr(a, "axis_label", None) == "tokens / s"]
    assert isinstance(axis.ticker, FixedTicker) and axis.ticker.ticks == [5e3, 1e4, 2e4, 5e4, 1e5, 2e5]
    assert fig.ygrid[0].ticker is axis.ticker


def test_speed_curves_that_coincide_stay_distinguishable():
    """Two strategies of a packed sweep often get the same tokens/s at every step count: each speed curve
    has its own dash, so the first drawn is not hidden under the second."""
    import holoviews as hv

    from explorer.plots import speed_plot

    summary = _summary([1, 2, 1, 2], [0.2, 0.5, 0.3, 0.4], tokens_per_s_mean=[1e5, 5e4] * 2, tokens_per_s_std=0.0,
                       pattern_quality_std=0.1, strategy=["c", "c", "r", "r"])
    summary.attrs["knobs"] = ["steps", "strategy"]
    curves = [el for el in speed_plot(summary) if type(el) is hv.Curve]  # (an Area is a Curve too)
    assert len(curves) == 2 and len({c.opts.get().kwargs["line_dash"] for c in curves}) == 2


# ----------------------------------------------------------------------------- CLI

@pytest.fixture
def ckpt_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    pat = _patterns_model(block_size=12)
    save_checkpoint(pat, tmp_path / "pat.safetensors",
                    {"tokenizer": pat.tokenizer.to_dict(), **pat.meta, "training_state": {"step": 0}})
    corpus = TextCorpus(TINY_TEXT, name="tiny")
    txt = make_model(vocab_size=corpus.tokenizer.vocab_size, mask_id=corpus.tokenizer.mask_id, block_size=24)
    meta = {"tokenizer": corpus.tokenizer.to_dict(), "words": corpus.words,
            "corpus": {"name": "tiny", "sha256": corpus.sha256, "kind": "text"}}
    save_checkpoint(txt, tmp_path / "txt.safetensors", meta)
    ar = make_model(vocab_size=corpus.tokenizer.vocab_size, mask_id=corpus.tokenizer.mask_id, block_size=24,
                    kind="ar", seed=1)
    save_checkpoint(ar, tmp_path / "ar.safetensors", meta)
    (tmp_path / "tiny.txt").write_text(TINY_TEXT)
    (tmp_path / "other.txt").write_text(TINY_TEXT + "!")
    return tmp_path


def test_cli_sweep_writes_csv_summary_and_plot(ckpt_dir, capsys):
    out = ckpt_dir / "res.csv"
    rc = cli_main(["sweep", "--checkpoint", "pat", "--steps", "1,2", "--strategy", "confidence,random",
                   "--n", "2", "--out", str(out), "--plot", str(ckpt_dir / "res.html"), "--plot-resources", "cdn"])
    assert rc == 0
    table = pd.read_csv(out)
    assert len(table) == 2 * 2 * 2 + 2 and set(table["sampler"]) == {"diffusion", "reference"}
    assert (ckpt_dir / "res.summary.csv").is_file() and (ckpt_dir / "res.html").is_file()
    assert "sweet spot" in capsys.readouterr().out
    # several metrics / axes: one file each
    assert cli_main(["sweep", "--checkpoint", "pat", "--steps", "1,2", "--n", "2", "--no-reference",
                     "--plot", str(ckpt_dir / "f.html"), "--metric", "pattern_quality,tokens_per_s",
                     "--x", "steps,nfe", "--plot-resources", "cdn"]) == 0
    assert sorted(p.name for p in ckpt_dir.glob("f.*.html")) == [
        f"f.{m}.{x}.html" for m in ("pattern_quality", "tokens_per_s") for x in ("nfe", "steps")]


def test_cli_sweep_no_pack_times_each_batch_alone_with_the_same_samples(ckpt_dir, monkeypatch):
    """--no-pack: no shared model calls (sample_many is never called), the same samples row for row."""
    import explorer.experiments as ex

    args = ["sweep", "--checkpoint", "pat", "--steps", "1,3", "--strategy", "confidence,random", "--n", "3",
            "--no-reference"]
    assert cli_main([*args, "--out", str(ckpt_dir / "packed.csv")]) == 0

    def refused(*a, **k):
        raise AssertionError("--no-pack packed the model calls")

    monkeypatch.setattr(ex, "sample_many", refused)
    assert cli_main([*args, "--no-pack", "--out", str(ckpt_dir / "alone.csv")]) == 0
    packed, alone = pd.read_csv(ckpt_dir / "packed.csv"), pd.read_csv(ckpt_dir / "alone.csv")
    assert len(alone) == 2 * 2 * 3 and alone["text"].tolist() == packed["text"].tolist()
    assert alone["nfe"].tolist() == packed["nfe"].tolist()


def test_cli_sweep_from_csv_plots_a_saved_sweep_without_sampling(ckpt_dir, capsys, monkeypatch):
    """--from-csv: the summary and the figures of an earlier --out table, nothing loaded or sampled; a file
    that is not a sweep table, or neither --checkpoint nor --from-csv, is one error line and exit 2."""
    import explorer.experiments as ex

    saved = ckpt_dir / "saved.csv"
    assert cli_main(["sweep", "--checkpoint", "pat", "--steps", "1,2", "--strategy", "confidence,random", "--n", "2",
                     "--out", str(saved)]) == 0
    first = capsys.readouterr().out

    def refused(*a, **k):
        raise AssertionError("--from-csv sampled")

    monkeypatch.setattr(ex, "sample", refused)
    monkeypatch.setattr(ex, "sample_many", refused)
    assert cli_main(["sweep", "--from-csv", str(saved), "--plot", str(ckpt_dir / "again.html"), "--metric",
                     "pattern_quality,tokens_per_s", "--plot-resources", "cdn"]) == 0
    again = capsys.readouterr().out
    def cells(out):  # each printed row but its tokens/s: the cells, n, NFE and every quality mean ± sem
        rows = [line.split() for line in out.splitlines() if line.startswith("diffusion")]
        return [r[:5] + r[6:] for r in rows]

    assert cells(again) == cells(first) and len(cells(first)) == 4
    assert sorted(p.name for p in ckpt_dir.glob("again.*.html")) == ["again.pattern_quality.steps.html",
                                                                   "again.tokens_per_s.steps.html"]
    (ckpt_dir / "other.csv").write_text("a,b\n1,2\n")
    for argv, says in ((["--from-csv", str(ckpt_dir / "other.csv")], "not a sweep's per-sample table"),
                       (["--from-csv", str(ckpt_dir / "missing.csv")], "missing.csv"),
                       (["--steps", "1,2"], "--checkpoint is required")):
        assert cli_main(["sweep", *argv]) == 2
        assert says in capsys.readouterr().err


def test_cli_evaluate_patterns_and_text(ckpt_dir, capsys):
    assert cli_main(["evaluate", "--checkpoint", "pat", "--n", "2", "--steps", "4", "--val-sequences", "8"]) == 0
    out = capsys.readouterr().out
    assert "NELBO" in out and "accuracy" in out and "reference" in out
    assert cli_main(["evaluate", "--checkpoint", "txt", "--data", str(ckpt_dir / "tiny.txt"), "--n", "2",
                     "--steps", "4", "--judge", "none"]) == 0
    assert "word_validity" in capsys.readouterr().out


def test_cli_text_sweep_with_judge_and_ar_baseline(ckpt_dir, capsys):
    rc = cli_main(["sweep", "--checkpoint", "txt", "--data", str(ckpt_dir / "tiny.txt"), "--judge", "ar", "--ar",
                   "--steps", "1,2", "--strategy", "confidence", "--threshold", "none,0.5", "--n", "2",
                   "--out", str(ckpt_dir / "t.csv"), "--plot", str(ckpt_dir / "t.html"),
                   "--metric", "gen_ppl,entropy", "--x", "steps,nfe", "--plot-resources", "cdn"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "gen_ppl" in out and "sweet spot" in out
    table = pd.read_csv(ckpt_dir / "t.csv")
    assert set(table["sampler"]) == {"diffusion", "ar", "reference"}
    assert len(table[table["threshold"] == 0.5]) == 2  # one threshold cell, not one per step count
    assert len(list(ckpt_dir.glob("t.*.html"))) == 4


def test_cli_evaluate_ar_checkpoint(ckpt_dir, capsys):
    assert cli_main(["evaluate", "--checkpoint", "ar", "--data", str(ckpt_dir / "tiny.txt"), "--n", "2",
                     "--judge", "ar"]) == 0
    out = capsys.readouterr().out
    assert "cross-entropy" in out and "accuracy" not in out and "gen_ppl" in out


@pytest.mark.parametrize("argv, message", [
    (["sweep", "--checkpoint", "nope"], "no checkpoint 'nope'"),
    (["sweep", "--checkpoint", "pat", "--steps", "1,x"], "--steps: 'x' is not a valid value"),
    (["sweep", "--checkpoint", "pat", "--strategy", "confidence,nope"], "unknown strategy 'nope'"),
    (["sweep", "--checkpoint", "pat", "--n", "0"], "argument -n/--n: expected an integer in [1, 1000000], got '0'"),
    (["sweep", "--checkpoint", "txt", "--judge", "pat"], "the judge must be an AR checkpoint"),
    (["sweep", "--checkpoint", "txt", "--ar"], "there is no judge"),
    (["sweep", "--checkpoint", "pat", "--metric", "gen_ppx"], "--metric gen_ppx: unknown"),
    (["sweep", "--checkpoint", "pat", "--metric", "gen_ppl"], "--metric gen_ppl: not measured on a patterns"),
    (["sweep", "--checkpoint", "txt", "--metric", "gen_ppl"], "needs an AR judge"),
    (["evaluate", "--checkpoint", "txt"], "pass --data FILE"),
    (["evaluate", "--checkpoint", "txt", "--data", "OTHER"], "is not the file this checkpoint was trained on"),
])
def test_cli_error_paths(ckpt_dir, capsys, argv, message):
    argv = [str(ckpt_dir / "other.txt") if a == "OTHER" else a for a in argv]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


@pytest.mark.browser
def test_png_export_with_headless_chromium(tmp_path):
    from explorer.plots import _chromium, quality_speed_plot, save_plot

    if _chromium() is None:
        pytest.skip("no Chromium on this machine")
    summary = pd.DataFrame({"sampler": "diffusion", "steps": [1, 2, 4], "strategy": "confidence",
                            "pattern_quality_mean": [0.2, 0.6, 0.9], "pattern_quality_std": [0.1, 0.1, 0.05],
                            "tokens_per_s_mean": [300.0, 150.0, 75.0]})
    path = save_plot(quality_speed_plot(summary, "pattern_quality"), tmp_path / "q.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_a_std_band_stays_within_the_values_its_metric_can_take():
    """mean ± 1 std of a quality in [0, 1] ran past 1 (seed 000's confidence at 16 steps: 0.92 ± 0.26), and a
    gen-PPL band below 1; the band is clipped to the metric's range, and unknown metrics are left alone."""
    import holoviews as hv

    from explorer.plots import band, quality_speed_plot

    summary = _summary([1, 2, 4], [0.1, 0.92, 0.5])
    summary["pattern_quality_std"] = [0.2, 0.26, 0.1]
    summary.attrs["knobs"] = ["steps"]
    area = next(el for el in quality_speed_plot(summary, "pattern_quality", speed=False) if isinstance(el, hv.Area))
    np.testing.assert_allclose(area.dimension_values(1), [0.0, 0.66, 0.4])  # the band's floor, clipped at 0
    np.testing.assert_allclose(area.dimension_values(2), [0.3, 1.0, 0.6])  # its top, clipped at 1
    low, high = band("gen_ppl", np.array([1.5]), np.array([2.0]))
    assert low.tolist() == [1.0] and high.tolist() == [3.5]
    low, high = band("some_new_score", np.array([0.5]), np.array([2.0]))
    assert low.tolist() == [-1.5] and high.tolist() == [2.5]
