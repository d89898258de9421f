"""The sweep figures (explorer/plots.py): quality and speed against steps or NFE, sweet-spot stars, log axes
and their ticks, bands clipped to a metric's range, standalone HTML."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from explorer import experiments
from explorer.experiments import sweep, sweet_spot
from explorer.sampling import SamplerConfig

TIMING = ["seconds", "tokens_per_s", "ms_per_sample"]


def _summary(steps, means, metric="pattern_quality", **extra):
    return pd.DataFrame({"sampler": "diffusion", "steps": steps, f"{metric}_mean": means, **extra})


@pytest.mark.slow
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
    # gen-PPL and speed span decades: log axes; bounded scores stay linear
    assert quality_speed_plot(summary, "gen_ppl").opts.get().kwargs["logy"] is True
    assert quality_speed_plot(summary, "entropy").opts.get().kwargs["logy"] is False
    path = save_plot(speed_plot(summary), tmp_path / "speed.html", resources="cdn")
    html = path.read_text()
    assert html.startswith("<!DOCTYPE html>") and "tokens / s vs denoising steps" in html and "AR baseline" in html
    with pytest.raises(ValueError, match="no diffusion rows"):
        quality_speed_plot(summary, "pattern_quality")


@pytest.mark.slow
def test_quality_plot_stars_each_strategys_sweet_spot_and_sizes_as_asked():
    import holoviews as hv

    from explorer.plots import quality_speed_plot, speed_plot

    summary = _summary([1, 2, 4, 1, 2, 4], [0.5, 0.95, 1.0, 0.2, 0.6, 0.9])
    summary["strategy"] = ["c"] * 3 + ["r"] * 3
    summary["pattern_quality_std"] = 0.1
    summary.attrs["knobs"] = ["steps", "strategy"]
    plot = quality_speed_plot(summary, "pattern_quality", speed=False)
    stars = [el for el in plot if isinstance(el, hv.Scatter) and el.label.startswith("sweet spot")]
    assert len(stars) == 1 and stars[0].opts.get().kwargs["marker"] == "star"
    spots = sweet_spot(summary, "pattern_quality", by=["strategy"])  # the one rule, drawn as computed
    assert stars[0].dimension_values("steps").tolist() == spots["steps"].tolist() == [2, 4]
    assert list(stars[0].dimension_values("spot")) == ["Sweet spot ~2 steps (c)", "Sweet spot ~4 steps (r)"]
    assert plot.opts.get("plot").kwargs["responsive"] is True
    assert quality_speed_plot(summary, "pattern_quality", width=640).opts.get("plot").kwargs["width"] == 640
    summary["tokens_per_s_mean"], summary["tokens_per_s_std"] = 5e5, 1.0
    assert not any(el.label.startswith("sweet spot") for el in speed_plot(summary))  # tokens/s: no better direction
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


@pytest.mark.slow
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


def test_a_std_band_stays_within_the_values_its_metric_can_take():
    """mean ± 1 std of a quality in [0, 1] ran past 1 (confidence at 16 steps in "Sampling Strategies & Speed
    Tradeoffs": 0.92 ± 0.26), and a gen-PPL band below 1; the band is clipped to the metric's range, and unknown
    metrics are left alone."""
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


@pytest.mark.slow
def test_short_log_axes_read_as_plain_numbers_and_no_empty_speed_axis():
    """Two step counts on a log axis were labelled 10^0 and 10^0.3; a summary without a measured speed drew a
    tokens/s axis over nothing, its ticks all "0"."""
    import holoviews as hv
    from bokeh.models import LogAxis, LogTickFormatter

    from explorer.plots import quality_speed_plot, within_a_decade

    hv.extension("bokeh")
    summary = pd.DataFrame({"sampler": "diffusion", "steps": [1, 2], "pattern_quality_mean": [0.5, 0.9],
                            "pattern_quality_std": 0.1, "tokens_per_s_mean": np.nan, "tokens_per_s_std": np.nan})
    fig = hv.render(quality_speed_plot(summary, "pattern_quality"))
    x = [a for a in fig.below if isinstance(a, LogAxis)]
    assert x and not isinstance(x[0].formatter, LogTickFormatter)
    assert not [a for a in [*fig.left, *fig.right] if getattr(a, "axis_label", None) == "tokens / s"]
    assert within_a_decade([1, 2, 5]) and not within_a_decade([1, 2, 4, 8, 16])
    wide = pd.concat([summary.assign(steps=[1, 2]), summary.assign(steps=[16, 32])], ignore_index=True)
    fig = hv.render(quality_speed_plot(wide.assign(tokens_per_s_mean=[4e5, 2e5, 3e4, 1.5e4]), "pattern_quality"))
    assert not isinstance(next(a for a in fig.below if isinstance(a, LogAxis)).formatter, LogTickFormatter)
    assert [a for a in fig.right if getattr(a, "axis_label", None) == "tokens / s"]


@pytest.mark.slow
def test_a_grid_of_powers_of_ten_reads_as_plain_step_counts():
    """The Sweep link with a steps grid of 1 and 10 labelled its log x axis 10^0 and 10^1 (Bokeh writes
    powers of ten when every tick is one)."""
    import holoviews as hv
    from bokeh.models import LogAxis, LogTickFormatter

    from explorer.plots import plain_numbers, quality_speed_plot

    hv.extension("bokeh")
    summary = pd.DataFrame({"sampler": "diffusion", "steps": [1, 10], "pattern_quality_mean": [0.5, 0.9],
                            "pattern_quality_std": 0.1, "tokens_per_s_mean": [500.0, 60.0], "tokens_per_s_std": 0.0})
    fig = hv.render(quality_speed_plot(summary, "pattern_quality"))
    x = [a for a in fig.below if isinstance(a, LogAxis)]
    assert x and not isinstance(x[0].formatter, LogTickFormatter)
    assert plain_numbers([1, 10, 100]) and not plain_numbers([1e-4, 1e-2]) and not plain_numbers([1e5, 1e7])


def test_plots_draw_on_a_canvas_not_webgl():
    """HoloViews asks Bokeh for WebGL by default; the project's plots are small enough for a canvas, which
    a browser with software WebGL (a virtual machine, headless Chromium) draws for far less CPU."""
    from explorer.plots import render_bokeh, speed_plot

    summary = _summary([1, 2, 4], [0.5, 0.9, 1.0])
    summary["tokens_per_s_mean"], summary["tokens_per_s_std"] = 5e5, 1.0
    assert render_bokeh(speed_plot(summary)).output_backend == "canvas"


def test_figures_are_drawn_by_the_first_chromium_found_the_headless_shell_before_the_browser(tmp_path, monkeypatch):
    from explorer.plots import chromium_path

    for name in ("chromium", "chromium-headless-shell", "google-chrome"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert chromium_path() == str(tmp_path / "chromium-headless-shell")
    (tmp_path / "chromium-headless-shell").unlink()
    assert chromium_path() == str(tmp_path / "chromium")
    for name in ("chromium", "google-chrome"):
        (tmp_path / name).unlink()
    assert chromium_path() is None
