"""The Sweep tab driven without a browser: sweeps, cache, cancel, bad input, grid, temperatures,
and sweeps sent to the server's Dask cluster (serve --scheduler)."""
from __future__ import annotations

import functools
import socket

import pandas as pd
import panel as pn
import pytest

from explorer import cluster, experiments
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.sweep.state import SweepTabState, expected_cost, format_cost, parse_list
from explorer.dashboard.tabs.sweep.view import TaskBar, grid_html, summary_frame
from tests.support.dashboard import wait_for


@pytest.fixture
def tab(checkpoints):
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Sweep", state)
    state.load(wait=True)
    # small and fast: a different grid from the defaults, so other tests' cache entries do not leak in
    tab.param.update(steps_grid="1,4,24", samples=2)
    tab.view = view
    yield tab
    tab.close()


def drawn(pane) -> dict:
    """What a HoloViews pane shows: {label: (x name, y name, xs, ys)} of its labelled lines and points."""
    return {el.label: (el.kdims[0].name, el.vdims[0].name, el.dimension_values(0).tolist(),
                       el.dimension_values(1).tolist())
            for el in pane.object if el.label and type(el).__name__ in ("Curve", "Scatter")}


@pytest.mark.slow
def test_sweep_runs_with_ar_baseline_and_draws(tab):
    assert tab.main.estimate.startswith("Run: ≈") and "model calls" in tab.main.estimate
    assert tab.start_sweep(wait=True)
    assert (tab.main.error, tab.main.progress, tab.main.running) == ("", 100, False)
    assert tab.main.status.startswith("done: 14 samples in")  # 2 strategies x 3 steps x 2, and 2 AR
    table, summary = tab.main.result
    diff = summary[summary["sampler"] == "diffusion"]
    assert set(diff["strategy"]) == {"confidence", "random"} and set(diff["steps"]) == {1, 4, 24}
    assert (summary["sampler"] == "ar").sum() == 1  # tiny-ar shares the alphabet: the AR baseline
    assert {"pattern_quality_mean", "tokens_per_s_mean", "ms_per_sample_mean"} <= set(summary)
    assert (table["ms_per_sample"] > 0).all()
    view, ar = tab.view, summary[summary["sampler"] == "ar"].iloc[0]
    quality, speed = drawn(view.quality_plot), drawn(view.speed_plot)
    for strategy, rows in diff.sort_values("steps").groupby("strategy"):  # a line per strategy: its cells' means
        x, metric, xs, ys = quality[strategy]
        assert (x, xs) == ("steps", [1, 4, 24]) and ys == pytest.approx(rows[f"{metric}_mean"].tolist())
        assert speed[strategy][1:] == ("tokens_per_s", [1, 4, 24], pytest.approx(rows["tokens_per_s_mean"].tolist()))
    assert quality["AR baseline"][3] == pytest.approx([ar[f"{metric}_mean"]] * 2)  # flat across the steps
    assert list(view.summary.object["steps"])[:2] == [1, 1]
    tab.param.update(x="nfe", speed_metric="ms_per_sample")
    quality, speed = drawn(view.quality_plot), drawn(view.speed_plot)
    assert quality["random"][0] == "nfe_mean" and speed["random"][:2] == ("nfe_mean", "ms_per_sample")
    assert speed["AR baseline"][2:] == ([ar["nfe_mean"]], [pytest.approx(ar["ms_per_sample_mean"])])  # a point
    assert not view.plot_notice.visible


@pytest.mark.slow
def test_downloads_give_the_table_summary_and_figures(tab):
    buttons = {b.filename: b for b in tab.view._downloads()}
    assert buttons["sweep_table.csv"].handler.produce() == (None, "nothing to download yet")
    assert all(b.disabled for b in buttons.values())  # greyed until there is a sweep, as Explore's
    tab.start_sweep(wait=True)
    assert not any(b.disabled for b in buttons.values())
    csv, why = buttons["sweep_table.csv"].handler.produce()
    assert why == "" and csv.decode().splitlines()[0].startswith("sampler,") and len(csv.decode().splitlines()) == 15
    summary, _ = buttons["sweep_summary.csv"].handler.produce()
    assert b"pattern_quality_mean" in summary.splitlines()[0] and len(summary.decode().splitlines()) == 8
    page, why = buttons["sweep_speed.html"].handler.produce()
    assert why == "" and b"<html" in page[:500].lower() and b"Bokeh" in page


@pytest.mark.slow
def test_cached_result_comes_back_without_sampling(tab):
    tab.start_sweep(wait=True)
    first = tab.main.result
    tab.samples = 3
    assert tab.main.estimate.startswith("Run:")
    tab.samples = 2  # back to the knobs already swept: shown at once
    assert tab.main.result is first and tab.main.status == "from cache" and "cached" in tab.main.estimate
    assert TaskBar(task=tab.main).status.object == "from cache"  # said once ('from cache · cached: ...' before)
    assert tab.start_sweep(wait=True) and tab.main.result is first


@pytest.mark.slow
def test_thresholds_join_the_scheduled_curves(tab):
    tab.param.update(thresholds="0.5, 0.9", strategies=["confidence"], include_ar=False)
    assert tab.start_sweep(wait=True), tab.main.error
    summary = tab.main.result[1]
    assert sorted(summary["threshold"].dropna()) == [0.5, 0.9] and summary["threshold"].isna().sum() == 3
    assert (summary["sampler"] == "ar").sum() == 0
    assert summary_frame(summary, "pattern_quality")["steps"].isna().sum() == 0  # '–' where none applies
    tab.x = "nfe"
    thresholds = summary[summary["threshold"].notna()].sort_values("nfe_mean")
    x, metric, xs, ys = drawn(tab.view.quality_plot)["threshold"]  # one more curve, across the thresholds
    assert (x, xs) == ("nfe_mean", thresholds["nfe_mean"].tolist())
    assert ys == pytest.approx(thresholds[f"{metric}_mean"].tolist()) and not tab.view.plot_notice.visible


@pytest.mark.parametrize("knobs, says", [({"steps_grid": "1,x"}, "Steps grid: 'x' is not a whole number"),
                                         ({"thresholds": "1.5"}, "threshold"),
                                         ({"temperatures": "-1"}, "temperature"),
                                         ({"strategies": []}, "pick at least one strategy")])
def test_bad_input_is_a_notice(tab, knobs, says):
    tab.param.update(**knobs)
    assert says in tab.main.error
    assert not tab.start_sweep(wait=True) and says in tab.main.error and tab.main.result is None


def test_stop_cancels_the_sweep(tab):
    tab.samples = 64
    tab.main.run = True  # the Run button: a background job
    tab.main.stop = True
    job = tab.main.worker.current
    assert job.done.wait(60)
    assert not tab.main.running and tab.main.status.startswith("cancelled")


def test_quality_grid_has_a_column_per_step_count(tab):
    tab.param.update(grid_steps="1,3,5,10,20", grid_samples=3)
    assert tab.start_grid(wait=True) and tab.grid.status.startswith("done")
    table = tab.grid.result[0]
    assert sorted(table["steps"].unique()) == [1, 3, 5, 10, 20] and len(table) == 15
    assert table.attrs["base"]["strategy"] == "confidence"  # the first strategy chosen
    page = tab.view.grid.object
    assert page.count("<th>") == 5 and "1 step<" in page and "20 steps" in page
    assert page.count("<tr>") == 1 + 3 + 1  # header, one row per sample, the means
    assert page == grid_html(table, "pattern_quality_p2")  # auto: the reading a one-symbol collapse cannot fool


def test_temperature_comparison(tab):
    tab.param.update(temp_values="0.3, 1.5", temp_steps=6, temp_samples=2)
    assert tab.start_temps(wait=True) and tab.temps.status.startswith("done")
    table, summary = tab.temps.result
    assert sorted(summary["temperature"]) == [0.3, 1.5] and table.attrs["base"]["steps"] == 6
    page = tab.view.temps.object
    assert "<b>0.3</b>" in page and "<b>1.5</b>" in page and page.count("white-space: pre-wrap") == 4


@pytest.mark.slow
def test_ar_model_gets_a_notice_and_model_change_clears(tab):
    tab.start_sweep(wait=True)
    assert tab.main.result is not None
    tab.session.load("tiny-ar", wait=True)
    assert tab.main.result is None and "diffusion" in tab.note
    assert not tab.start_sweep(wait=True) and "diffusion" in tab.main.error


def test_without_a_judge_the_note_names_only_what_is_missing(tab):
    """The tour's link unticks the AR baseline, so it must not warn about it."""
    tab._judge = None  # as for `patterns`: no AR checkpoint shares its alphabet
    tab.include_ar = False
    assert tab.note == ""
    tab.include_ar = True
    assert tab.note == "No AR checkpoint with this model's alphabet in checkpoints/: no AR baseline."


def test_cost_estimate_and_lists():
    small = expected_cost(10_000, [{"steps": 1}, {"steps": 4}], 4, 24, False, False)
    big = expected_cost(10_000, [{"steps": 16}, {"steps": 32}], 4, 24, False, False)
    assert small[0] == 5 and big[0] == 16 + 24 and big[1] > small[1]  # steps beyond the length: length calls
    assert expected_cost(10_000, [{"temperature": 1.0}], 4, 24, False, False, steps=12)[0] == 12
    assert expected_cost(10_000, [{"steps": 4}], 4, 24, True, True)[0] == 4 + 24  # AR: a call per token
    assert "under a second" in format_cost(5, 0.2) and "about 2.0 min" in format_cost(500, 120)
    assert parse_list(" 1, 2,,2 ,4", int, "g") == [1, 2, 4]
    assert parse_list("none, 0.9", float, "t", allow_none=True) == [None, 0.9]
    with pytest.raises(ValueError, match="not a number"):
        parse_list("0.5, hot", float, "Temperatures")
    assert set(SweepTabState.URL_PARAMS) <= set(SweepTabState.param)


def test_progress_reaches_the_ui_through_dispatch(checkpoints):
    calls = []
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False,
                          dispatch=lambda cb: (calls.append(cb), cb()))
    tab, _ = build_tab("Sweep", state)
    state.load(wait=True)
    tab.param.update(steps_grid="2,3", samples=1, include_ar=False)
    n = len(calls)
    tab.main.run = True
    wait_for(lambda: tab.main.status.startswith("done"), message=tab.main.status or tab.main.error)
    assert len(calls) - n >= 3  # a progress update per cell, then the result
    tab.close()


@pytest.fixture
def scheduler(monkeypatch):
    """The address of an in-process Dask cluster (one worker thread: fast to start), handed to the
    dashboard as `serve --scheduler` does (MDLM_EXPLORER_SCHEDULER); the dashboard's client is closed after."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, threads_per_worker=1, protocol="tcp://",
                      dashboard_address=None) as lc:
        monkeypatch.setenv(cluster.SCHEDULER_ENV, lc.scheduler_address)
        yield lc.scheduler_address
        client = cluster._ENV_CLIENTS.pop(lc.scheduler_address, None)
        if client is not None:
            client.close()


@pytest.mark.slow
def test_a_served_dashboard_sweeps_on_its_dask_cluster(tab, scheduler):
    tab.param.update(steps_grid="2,5", samples=2, include_ar=False, strategies=["confidence"])
    before = cluster.jobs_started()  # the cluster's worker is a thread of this process: its count is ours
    assert tab.start_sweep(wait=True) and tab.main.error == ""
    assert tab.main.status.startswith("done: 4 samples in")
    assert tab.main.status.endswith(f"on the Dask cluster at {scheduler}")
    assert cluster.jobs_started() - before == 2  # a task per (cell, batch): 2 step counts, one batch each
    plan = tab.sweep_plan()
    here, _ = experiments.sweep(plan.model, plan.base, plan.cells, plan.n_samples, plan.base.seed,
                                length=plan.length, template=plan.template)
    timing = ["seconds", "solo_seconds", "tokens_per_s", "ms_per_sample"]
    pd.testing.assert_frame_equal(tab.main.result[0].drop(columns=timing), here.drop(columns=timing))
    assert [2, 5] in [xs for _, _, xs, _ in drawn(tab.view.quality_plot).values()]  # the curve, and its ★


@pytest.mark.slow
def test_an_unreachable_cluster_is_a_readable_notice(tab, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv(cluster.SCHEDULER_ENV, address)
    monkeypatch.setattr(cluster, "connect", functools.partial(cluster.connect, timeout=1))  # fail in a second
    tab.param.update(steps_grid="3", include_ar=False)
    assert tab.start_sweep(wait=True)  # it started; the worker found no cluster
    error = tab.main.error
    assert error.startswith(f"sweep failed: cannot reach a Dask scheduler at '{address}'") and "Traceback" not in error
    assert (tab.main.running, tab.main.result) == (False, None) and not tab.main.status.startswith("done")
    bar = TaskBar(task=tab.main)
    assert bar.notice.visible and bar.notice.object == error


def test_the_task_bars_follow_the_presentation_type_size(tab):
    """Run and Stop, the status and the button groups' names grow at projector type (they had stayed small)."""
    from explorer.dashboard.ui.palette import FONT

    bar = TaskBar(task=tab.main, session=tab.session)
    big = lambda w: any(FONT[True]["base"] in str(css) for css in w.stylesheets)  # noqa: E731
    assert not big(bar.run) and bar.status.styles["font-size"] == FONT[False]["base"]
    tab.session.presentation = True
    assert big(bar.run) and big(bar.stop) and bar.status.styles["font-size"] == FONT[True]["base"]
    tab.session.presentation = False
    assert not big(bar.stop)


@pytest.mark.slow
def test_at_projector_type_the_quality_plot_keeps_its_title(tab):
    """In presentation the two plots stand one above the other at full width, so the quality plot keeps
    the title that names its metric and the rule its star follows."""
    assert tab.start_sweep(wait=True)
    title = lambda: tab.view.quality_plot.object.opts.get("plot").kwargs.get("title")  # noqa: E731
    assert "vs denoising steps" in title()
    tab.session.presentation = True
    assert "vs denoising steps" in title()
    assert "vs denoising steps" in tab.view.speed_plot.object.opts.get("plot").kwargs["title"]
    tab.session.presentation = False
    assert "vs denoising steps" in title()


def test_off_screen_the_estimates_wait_for_the_tab(tab, monkeypatch):
    """A sidebar knob changed while another tab is on screen marks the estimates stale instead of working
    out the three plans at each change (a dragged slider sends many); showing the tab works them out once,
    and they are what a tab on screen shows."""
    planned = []
    for name in ("sweep_plan", "grid_plan", "temps_plan"):
        made = getattr(tab, name)
        monkeypatch.setattr(tab, name, lambda made=made, name=name: planned.append(name) or made())
    tab.on_hidden()
    for steps in (5, 6, 7):
        tab.session.steps = steps
    assert planned == []
    tab.on_shown()  # (then the main sweep may start by itself: it plans once more)
    assert planned[:3] == ["sweep_plan", "grid_plan", "temps_plan"]
    wait_for(lambda: not tab.main.running)
    hidden_then_shown, before = (tab.grid.estimate, tab.temps.estimate), len(planned)
    tab.session.steps = 8
    tab.session.steps = 7  # on screen: at once, each change
    assert len(planned) == before + 6 and (tab.grid.estimate, tab.temps.estimate) == hidden_then_shown


def test_a_uniform_state_sweep_has_a_curve_per_knob_its_run_reads(checkpoints):
    """A uniform-state run reads no strategy, schedule or threshold: its confidence and random curves were
    the same runs drawn twice, at twice the model calls. Its curves are one per temperature."""
    from tests.support.dashboard import save_twins

    save_twins(checkpoints)
    state = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Sweep", state)
    state.load(wait=True)
    tab.param.update(steps_grid="2,4", samples=2, temperatures="0.5, 1.5", thresholds="0.9", include_ar=False)
    assert tab.strategies == ["confidence", "random"]
    plan = tab.sweep_plan()
    assert sorted({tuple(sorted(c)) for c in plan.cells}) == [("steps", "temperature")] and len(plan.cells) == 4
    assert tab.start_sweep(wait=True) and tab.main.error == ""
    _, summary = tab.main.result
    curves = {label for label in drawn(view.quality_plot) if not label.startswith("sweet spot")}
    assert curves == {"temperature=0.5", "temperature=1.5"} and len(summary) == 4
    layout = view.__panel__()  # the page's layout, its inputs greyed by the model's process
    greyed = lambda: {w.name for w in layout.select(pn.widgets.Widget) if w.disabled and w.name}  # noqa: E731
    assert {"Strategies", "Schedules", "Thresholds γ"} <= greyed()  # the inputs it does not read are greyed
    state.load("tiny", wait=True)  # a masked model reads them all
    assert tab.unread == [] and not {"Strategies", "Schedules", "Thresholds γ"} & greyed()
    tab.close()
    state.close()


def test_a_uniform_state_model_is_swept_at_its_own_temperature(checkpoints):
    """At temperature 1.0 a uniform-state model's samples are noise, and its curves are one per temperature:
    its sweep opens at the temperature it recommends; a masked model's at 1.0 again. What a link or the
    user set is kept through a model change."""
    from explorer.checkpoint import update_metadata
    from explorer.dashboard.urlstate import UrlState
    from tests.support.dashboard import save_twins

    save_twins(checkpoints)
    update_metadata(checkpoints / "tiny-uniform.safetensors", {"sampler_defaults": {"temperature": 0.3}})
    state = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    tab, _ = build_tab("Sweep", state)
    assert tab.temperatures == "1.0"  # nothing known of the model before its load
    state.load(wait=True)
    assert tab.temperatures == "0.3" and tab.sweep_plan().cells[0]["temperature"] == 0.3
    state.load("tiny", wait=True)
    assert tab.temperatures == "1.0"
    tab.temperatures = "0.9"  # the user's own
    state.load("tiny-uniform", wait=True)
    assert tab.temperatures == "0.9"
    tab.close()
    state.close()
    # a link's temperatures, even the masked default, are the link's
    state = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    tab, _ = build_tab("Sweep", state)
    url = UrlState(state, list(state.tabs))
    state.load_hooks.append(url.hook)
    url.apply({"sweep.temperatures": "1.0"})
    state.load(wait=True)
    assert tab.temperatures == "1.0" and url.notice == ""
    tab.close()
    state.close()


def test_a_metric_the_sweep_did_not_measure_is_named_beside_the_figure_that_shows_another(checkpoints):
    """A link's sweep.metric=gen_ppl on a patterns model: the select showed gen_ppl over a pattern-quality
    figure, and nothing said so."""
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Sweep", state)
    state.load(wait=True)
    tab.param.update(steps_grid="1,2", samples=1, strategies=["confidence"], include_ar=False)
    assert tab.start_sweep(wait=True) and tab.main.error == ""
    assert not view.metric_notice.visible
    tab.metric = "gen_ppl"
    said = view.metric_notice.object
    assert view.metric_notice.visible and "gen-PPL (AR judge) is not measured for this model" in said
    assert "the figure shows pattern quality" in said
    tab.metric = "auto"
    assert not view.metric_notice.visible
    tab.close()
    state.close()


def test_the_ar_baseline_box_is_greyed_where_there_is_no_ar_checkpoint(checkpoints, monkeypatch):
    """It stayed ticked and live under the notice 'no AR baseline'."""
    from explorer.dashboard import checkpoints as listing

    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Sweep", state)
    state.load(wait=True)
    layout = view.__panel__()
    box = [w for w in layout.select(pn.widgets.CheckBoxGroup) if w.options == ["AR baseline"]]
    assert len(box) == 1 and not tab.no_ar and not box[0].disabled  # tiny-ar has the alphabet
    monkeypatch.setattr(listing, "find_judge", lambda model, names: None)
    tab.on_model_changed()  # as a model of another alphabet would
    assert tab.no_ar and box[0].disabled
    # its note is information, not a warning: nothing else is missing for a patterns model
    assert "no AR baseline" in view.note.object and view.note.alert_type == "info"
    tab.close()
    state.close()
