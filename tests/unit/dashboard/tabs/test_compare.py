"""The Compare tab driven without a browser: presets, overrides, runs through the real sampler in one
background Task, results only through dispatch, differences, metrics, bad input as a notice."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.dashboard.runtime.tasks import Task
from explorer.dashboard.session import sample_canvas
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.compare.state import PRESETS, SEP, differing, parse_overrides
from tests.support.dashboard import LENGTH, save_twins
from tests.support.models import assert_same_run


def make_state(**knobs):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    s.param.update(**knobs)
    assert s.model is not None and s.error == ""
    return s


@pytest.fixture
def compare(checkpoints):
    state = make_state(steps=8, seed=3)
    tab, view = build_tab("Compare", state)
    assert state.tabs["Compare"] is tab
    return tab, view


def test_confidence_vs_random_runs_the_real_sampler_with_one_seed(compare):
    tab, view = compare
    assert tab.apply_preset("strategies") is True  # one click: columns, then the run
    tab.task.worker.current.done.wait(30)
    assert not tab.running and tab.error == "" and len(tab.results) == 2
    state = tab.session
    for result, strategy in zip(tab.results, ("confidence", "random")):
        assert result["error"] == "" and result["config"].strategy == strategy
        assert result["config"].seed == 3 and result["config"].steps == 8
        again = sample_canvas(state.model, result["config"], state.canvas())  # the same run, directly
        assert (again.final[0] == result["traj"].final[0]).all()
        assert result["frames"].n_rows == result["traj"].n_steps + 1
        assert set(result["metrics"]) >= {"pattern_quality", "nfe", "seconds"}  # patterns alphabet
    # the view: both heatmaps span the same height (progress 0..1), texts and metrics shown
    for column in view.columns[:2]:
        assert column.heat.grid.data["dh"] == [1.0] and column.heat.grid.data["dw"] == [LENGTH]
        assert "pattern quality" in column.metrics.object and "positions differ" in column.text.object
    assert not view.columns[2].layout.visible


@pytest.mark.slow
def test_steps_4_vs_32_align_on_progress(compare):
    tab, view = compare
    tab.apply_preset("steps", start=False)
    assert tab.columns == "steps=4" + SEP + "steps=32"
    assert tab.start(wait=True)
    rows = [c.heat.grid.data["image"][0].shape[0] for c in view.columns[:2]]
    assert rows == [5, tab.results[1]["traj"].n_steps + 1] and rows[1] > rows[0]
    assert [r["metrics"]["nfe"] for r in tab.results] == [4, tab.results[1]["traj"].nfe]


@pytest.mark.slow
def test_ar_column_uses_the_ar_checkpoint_of_the_alphabet(compare):
    tab, view = compare
    tab.apply_preset("ar", start=False)
    assert tab.start(wait=True)
    diffusion, ar = tab.results
    assert diffusion["kind"] == "diffusion" and ar["kind"] == "ar" and ar["model"] == "tiny-ar"
    assert ar["metrics"]["nfe"] == ar["traj"].n_steps  # one call per character
    assert "tiny-ar" in tab.base_info


def test_ar_column_without_an_ar_checkpoint_says_so(checkpoints):
    (checkpoints / "tiny-ar.safetensors").unlink()
    state = make_state()
    tab, view = build_tab("Compare", state)
    tab.apply_preset("ar", start=False)
    assert tab.start(wait=True)
    assert tab.results[0]["error"] == ""  # the diffusion column still runs
    assert "no AR checkpoint" in tab.results[1]["error"]
    assert "no AR checkpoint" in view.columns[1].text.object
    assert "no other column has a text" in view.columns[0].text.object
    assert "no AR judge" in tab.base_info


def queued_compare():
    """A loaded session whose dispatcher only queues callbacks (the test runs them, as the UI thread
    would), and its Compare tab; the load's own callbacks already run."""
    queued = []
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False,
                         dispatch=queued.append)
    state.load(wait=True)
    while queued:
        queued.pop(0)()
    tab, _ = build_tab("Compare", state)
    return state, tab, queued


@pytest.mark.slow
def test_results_arrive_only_through_dispatch(checkpoints):
    state, tab, queued = queued_compare()
    assert tab.start()
    tab.task.worker.current.done.wait(30)
    assert not any(tab.results)  # the worker finished; nothing is applied before the dispatched callbacks run
    while queued:
        queued.pop(0)()
    assert all(r and r["error"] == "" for r in tab.results) and not tab.running


@pytest.mark.slow
def test_the_run_is_one_task_on_the_session_device(compare):
    tab, view = compare
    assert isinstance(tab.task, Task) and tab.task.worker.device == tab.session.device
    assert tab.start(wait=True)
    assert (tab.task.status, tab.task.progress, tab.task.error) == ("done: 2 of 2 configurations sampled", 100, "")
    assert view.status.object == "done: 2 of 2 configurations sampled" and view.stop.disabled


@pytest.mark.slow
def test_stop_keeps_the_columns_already_sampled(compare):
    tab, view = compare
    # Stop pressed as soon as the first column is shown (call_now: on the task's own thread)
    tab.task.param.watch(lambda event: tab.stop_run() if event.new and event.new[0] else None, "result")
    assert tab.start(wait=True)
    first, second = tab.results
    assert first["error"] == "" and first["config"].strategy == "confidence" and second is None
    assert not tab.running and tab.task.status == "stopped" and view.stop.disabled
    assert "positions differ" not in view.columns[0].text.object  # nothing to compare with
    assert "not run yet" in view.columns[1].title.object


def test_a_model_change_drops_a_comparison_whose_results_are_still_queued(checkpoints):
    state, tab, queued = queued_compare()
    assert tab.start()
    tab.task.worker.current.done.wait(30)  # finished; its columns and its end wait for the UI thread
    tab.on_model_changed()  # handled first, as a model change on the UI thread may be
    while queued:
        queued.pop(0)()
    assert tab.results == [] and not tab.running


def test_bad_override_is_a_notice_and_keeps_everything(compare):
    tab, view = compare
    assert tab.start(wait=True)
    before, columns = tab.results, tab.columns
    for bad in ("steps=many", "colour=red", "strategy=sideways", "steps", "temperature=-1"):
        assert not tab.set_column(1, bad)
        assert tab.error and tab.columns == columns and tab.results is before
    assert "strategy" in tab.error or "temperature" in tab.error
    view.columns[1].editor.value = "wibble=1"  # typed in the browser: the notice, the editor put back
    assert view.notice.visible and "wibble" in view.notice.object
    assert view.columns[1].editor.value == "strategy=random"
    assert tab.set_column(1, "strategy=random, temperature=0.5") and tab.error == "" and tab.preset == "custom"


@pytest.mark.slow
def test_columns_from_a_url_are_checked(compare):
    tab, _ = compare
    tab.columns = "temperature=0.3" + SEP + "temperature=1.5"  # what the URL sync does
    assert tab.preset == "temperature"
    assert not tab.running  # a link sets the columns; it does not start four runs by itself
    tab.columns = "steps=2 | model=gpt"
    assert "model must be one of" in tab.error
    assert tab.preset == "temperature" and tab.columns == "temperature=0.3" + SEP + "temperature=1.5"
    tab.columns = "steps=2 | steps=3 | steps=4 | steps=5 | steps=6 | steps=7"
    assert "2 to 5 columns" in tab.error and tab.preset == "temperature"
    tab.columns = "steps=2 | steps=3"
    assert tab.preset == "custom" and tab.overrides() == [{"steps": 2}, {"steps": 3}]


def test_add_and_remove_columns_within_bounds(compare):
    tab, view = compare
    assert tab.add_column() and tab.add_column() and tab.add_column() and not tab.add_column()
    assert len(tab.overrides()) == 5 and view.add.disabled and all(c.layout.visible for c in view.columns)
    assert tab.start(wait=True) and len(tab.results) == 5
    assert all(tab.remove_column(0) for _ in range(3)) and not tab.remove_column(0)
    assert len(tab.overrides()) == 2 and "at least 2" in tab.error


def test_model_change_clears_results(compare):
    tab, _ = compare
    assert tab.start(wait=True) and tab.results
    tab.session.load("tiny-training", wait=True)
    assert tab.results == [] and not tab.running


def test_parsing_and_differences():
    assert parse_overrides("strategy=random, steps=12") == {"strategy": "random", "steps": 12}
    assert parse_overrides(" ") == {}
    assert all(k in {"strategy", "steps", "temperature", "model"}
               for spec in PRESETS.values() for c in spec[1] for k in parse_overrides(c))
    a, b, c = differing(["abcd", "abXd", None])
    assert a.tolist() == [False, False, True, False] and b.tolist() == a.tolist() and c.size == 0
    assert differing(["ab", "abc"])[1].tolist() == [False, False, True]
    assert np.array_equal(differing(["xy", "xy"])[0], [False, False])


def test_mostly_different_texts_mark_what_agrees():
    from explorer.dashboard.tabs.compare.view import differences_html

    fixed = np.zeros(4, dtype=bool)
    few = differences_html("abcd", ["abcd", "abXd"], 0, fixed)
    assert "1 of 4 positions differ" in few and '<span class="d">c</span>' in few
    most = differences_html("abcd", ["abcd", "aXYZ"], 0, fixed)
    assert "3 of 4 positions differ · 1 agree (marked)" in most and '<span class="s">a</span>' in most


def test_presentation_mode_enlarges_every_column(compare):
    """The projector toggle reaches Compare: heatmap titles and axes, texts and metrics grow."""
    from explorer.dashboard.ui.palette import FONT

    tab, view = compare
    column = view.columns[0]
    assert column.figure.title.text_font_size == FONT[False]["title"]
    tab.session.presentation = True
    for c in view.columns:
        assert c.figure.title.text_font_size == FONT[True]["title"]
        assert c.figure.xaxis[0].major_label_text_font_size == FONT[True]["plot"]
        assert c.text.styles["--text-size"] == FONT[True]["text"] and c.metrics.styles["--caption-size"] == FONT[True]["base"]
    assert view.status.styles["font-size"] == FONT[True]["base"]
    # the toolbar and the column editors too (they had stayed small: their shadow DOM needs a stylesheet)
    toolbar = [*view.preset_buttons.values(), view.run, view.stop, view.add, column.editor, column.remove]
    assert all(any(FONT[True]["base"] in str(css) for css in w.stylesheets) for w in toolbar)
    tab.session.presentation = False
    assert column.text.styles["--text-size"] == FONT[False]["text"]
    assert not any(FONT[True]["base"] in str(css) for w in toolbar for css in w.stylesheets)


def test_column_sources_do_not_take_the_live_heatmaps_names(compare):
    """The tour and the browser tests find Explore's heatmap by its source's name; Compare's columns
    (the same HeatmapFigure) in the same document must not make that lookup ambiguous."""
    from bokeh.document import Document
    from bokeh.layouts import column

    from explorer.dashboard.ui.heatmap import HeatmapFigure

    _, view = compare
    live = HeatmapFigure(names="trajectory")  # as Explore's live view names its sources
    doc = Document()
    doc.add_root(column(live.figure, *(c.figure for c in view.columns)))
    assert doc.get_model_by_name("trajectory-cells") is live.cells
    assert doc.get_model_by_name("compare-2-cells") is view.columns[1].heat.cells


def test_best_is_not_given_to_a_collapsed_column():
    """The pattern quality of "Sampling Strategies & Speed Tradeoffs" scores a one-symbol tiling 1.0: where the
    period->=2 reading was measured, only that one marks the best column (the README tour's old 'winner' was
    EEEE...)."""
    from explorer.dashboard.tabs.compare.view import best_values

    collapsed = {"metrics": {"pattern_quality": 1.0, "pattern_quality_p2": 0.0, "distinct_symbols": 1.0, "nfe": 8}}
    varied = {"metrics": {"pattern_quality": 0.8, "pattern_quality_p2": 0.8, "distinct_symbols": 3.0, "nfe": 8}}
    best = best_values([collapsed, varied])
    assert best == {"pattern_quality_p2": 0.8}  # not pattern_quality 1.0; symbols and equal NFE unmarked
    text = [{"metrics": {"gen_ppl": 3.0, "entropy": 1.9}}, {"metrics": {"gen_ppl": 12.0, "entropy": 3.1}}]
    assert best_values(text) == {}  # no reference distance measured: no winner (the 'the the' column has the lowest gen-PPL)
    text[0]["metrics"]["ref_distance"], text[1]["metrics"]["ref_distance"] = 4.0, 1.2
    assert best_values(text) == {"ref_distance": 1.2}


def test_a_text_column_is_scored_by_its_distance_to_held_out_text(tmp_path):
    """Compare's text columns carry metrics.ref_distance against held-out crops of their length (the
    reading that ranks them); without held-out data on the machine there is none, and no winner."""
    import numpy as np

    from explorer import metrics
    from explorer.dashboard.checkpoints import reference_scores, validation_tokens
    from explorer.dashboard.tabs.compare.state import score
    from explorer.sampling import SamplerConfig, sample
    from tests.support.models import TINY_TEXT, tiny_text_models

    corpus, model, judge = tiny_text_models()
    data = tmp_path / "tiny.txt"
    data.write_text(TINY_TEXT)
    model.meta = {**model.meta, "train_config": {"data": str(data)}}
    traj = sample(model, SamplerConfig(steps=4, seed=1), length=20)
    scored = score(model, traj, judge)
    texts = [model.tokenizer.decode(r) for r in validation_tokens(model, 20, 32).tolist()]
    ref = metrics.text_quality(texts, judge=judge)
    assert reference_scores(model, judge, 20) == (pytest.approx(ref["gen_nll"].mean()), pytest.approx(ref["entropy"].mean()))
    mine = metrics.text_quality([model.tokenizer.decode(traj.final[0])], judge=judge)
    expected = metrics.ref_distance(mine["gen_nll"], mine["entropy"], ref["gen_nll"].mean(), ref["entropy"].mean())
    assert scored["ref_distance"] == pytest.approx(float(expected[0]))
    model.meta = {**model.meta, "train_config": {"data": str(tmp_path / "gone.txt")}}
    model.path = tmp_path / "another"  # (the cache is keyed by the model's path)
    assert "ref_distance" not in score(model, traj, judge) and np.isfinite(score(model, traj, judge)["gen_ppl"])


def test_explore_quality_sweep_on_text_is_ranked_by_distance_to_held_out_text(tmp_path):
    """The Explore sweep of a text model carries a held-out reference row when the data
    is on the machine, so its curves and sweet spot default to ref_distance, not gen-PPL."""
    import pandas as pd

    from explorer.dashboard.tabs.explore.state import held_out_reference
    from explorer.experiments import pick_metric, sweep
    from explorer.sampling import SamplerConfig
    from tests.support.models import TINY_TEXT, tiny_text_models

    corpus, model, judge = tiny_text_models()
    data = tmp_path / "tiny.txt"
    data.write_text(TINY_TEXT)
    model.meta = {**model.meta, "train_config": {"data": str(data)}}
    model.path = tmp_path / "text-model"
    reference = held_out_reference(model, judge, 20, None)
    assert reference.shape[1] == 20 and 2 <= reference.shape[0] <= 16  # (the tiny corpus holds fewer than 16)
    assert held_out_reference(model, judge, 20, "To be█████") is None and held_out_reference(model, None, 20, None) is None
    _, summary = sweep(model, SamplerConfig(), {"steps": [1, 4]}, n_samples=2, seed=0, length=20, judge=judge,
                       reference=reference)
    assert pick_metric(summary) == "ref_distance" and summary["ref_distance_mean"].notna().all()
    assert pick_metric(pd.DataFrame({"gen_ppl_mean": [3.0]})) == "gen_ppl"  # no reference: gen-PPL


@pytest.mark.slow
def test_confidence_vs_left_to_right_is_one_click(compare):
    """The comparison of unmasking orders in "Generation: Iterative Unmasking" §4.3, as a preset."""
    tab, _ = compare
    assert tab.apply_preset("order", start=False)
    assert tab.columns == "strategy=confidence" + SEP + "strategy=left_to_right"
    assert tab.start(wait=True)
    first, second = (r["traj"] for r in tab.results)
    assert (np.diff(second.committed_at[0]) >= 0).all()  # left to right: positions commit in order
    assert not (np.diff(first.committed_at[0]) >= 0).all()


def test_a_nearly_one_symbol_column_is_marked_collapsed_and_not_ranked_best():
    """'FFFEFFFF…' is a collapse with one stray symbol: its period->=2 reading still scores 0.83 (period
    'FFFEFF'), above a patterned column's 0.6, yet it is flagged and the patterned column is the best; counts show as integers."""
    from explorer.dashboard.tabs.compare.view import best_values, metrics_html
    from explorer.metrics import looks_collapsed, pattern_quality_p2

    near = np.array([5, 5, 5, 4] + [5] * 20)  # F F F E F F F ...
    assert looks_collapsed(near) and looks_collapsed("FFFEFFFFFFFFFFFFFFFFFFFF") and not looks_collapsed("ABAB" * 6)
    fooled = float(pattern_quality_p2(near))
    assert fooled > 0.8
    collapsed = {"metrics": {"pattern_quality_p2": fooled, "distinct_symbols": 2.0, "collapsed": 1.0, "nfe": 12,
                             "seconds": 0.05}}
    patterned = {"metrics": {"pattern_quality_p2": 0.6, "distinct_symbols": 4.0, "collapsed": 0.0, "nfe": 12,
                             "seconds": 0.07}}
    best = best_values([collapsed, patterned])
    assert best["pattern_quality_p2"] == 0.6 and best["seconds"] == 0.05
    shown = metrics_html(collapsed["metrics"], best, 12)
    assert "collapsed" in shown and '<td class="best">0.833' not in shown
    assert "<td>distinct symbols</td><td class=\"\">2</td>" in shown  # not 2.000
    assert "collapsed" not in metrics_html(patterned["metrics"], best, 12)


def test_a_columns_time_is_its_own_model_calls_not_the_waits_between_steps(compare, monkeypatch):
    """Each column is timed by its own steps: a Compare run lends the device to queued runs between steps
    (Job.cancelled), and that wait belongs to no column. A fake clock advances 1 s per model call and
    100 s per wait: each column reports its own steps' seconds."""
    import types

    from explorer.dashboard.tabs.compare import state as compare_state
    from explorer.sampling import sampler

    clock = [0.0]
    monkeypatch.setattr(sampler, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    tab, _ = compare
    model = tab.session.model
    forward = model.forward

    def counted(*args, **kwargs):
        clock[0] += 1.0
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counted)

    class Waiting:
        @property
        def cancelled(self):
            clock[0] += 100.0  # another session's run borrowed the device
            return False

    plan = tab.plan()
    for column in plan.columns:
        result = compare_state.run_column(Waiting(), plan, column, None)
        assert result["metrics"]["seconds"] == result["traj"].nfe  # one second per model call, no waits


def test_a_column_may_name_another_checkpoint_and_runs_its_solo_run(checkpoints):
    """model=<name>: the masked and the uniform-state process side by side, each column the run Explore
    makes with that checkpoint, these knobs, the seed and the canvas; a name not listed is refused."""
    save_twins(checkpoints)
    state = make_state(steps=6, seed=3)
    tab, view = build_tab("Compare", state)
    assert tab.set_columns("model=tiny" + SEP + "model=tiny-uniform, entropy_bound=2"), tab.error
    assert tab.start(wait=True)
    masked, uniform = tab.results
    assert masked["error"] == uniform["error"] == "" and uniform["label"] == "tiny-uniform, entropy_bound=2.0"
    assert (masked["model"], masked["traj"].process) == ("tiny", "masked")
    assert (uniform["model"], uniform["traj"].process) == ("tiny-uniform", "uniform")
    for name, result, knobs in (("tiny", masked, {}), ("tiny-uniform", uniform, {"entropy_bound": 2.0})):
        solo = open_session(checkpoint=name, device="cpu", auto_run=False, sweep_auto=False)
        solo.load(wait=True)
        solo.param.update(steps=6, seed=3, **knobs)
        assert_same_run(result["traj"], sample_canvas(solo.model, solo.sampler_config(), solo.canvas()))
    assert view.columns[1].heat.grid.data["image"][0].shape[0] == uniform["traj"].n_steps + 1
    assert not tab.set_columns("model=tiny" + SEP + "model=nowhere") and "nowhere" in tab.error


def test_a_finished_columns_heatmap_is_sent_once(compare):
    """Every column is shown again whenever one finishes; a heatmap already showing its result is not
    drawn again (each redraw sent the whole run's rows to the page once more)."""
    tab, view = compare
    drawn = [[] for _ in view.columns[:2]]
    for column, calls in zip(view.columns, drawn):
        show = column.heat.show
        column.heat.show = lambda frames, show=show, calls=calls: (calls.append(frames), show(frames))
    assert tab.apply_preset("strategies") is True
    tab.task.worker.current.done.wait(30)
    assert not tab.running and len(tab.results) == 2
    view._results()  # shown again, as when another column finishes: nothing new to send
    for calls, result in zip(drawn, tab.results):
        assert [f for f in calls if f is not None] == [result["frames"]]


def test_a_uniform_state_model_compares_what_its_run_reads(checkpoints):
    """A uniform-state run accepts by the entropy bound, in no strategy's order: opened on the default
    preset (confidence vs random) it showed two identical columns, as if the strategy made no difference.
    It opens on the temperature preset; a column setting a masked-only knob is refused, saying why."""
    save_twins(checkpoints)
    state = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Compare", state)
    assert tab.preset == "strategies"  # before the load: nothing known of the model
    state.load(wait=True)
    assert tab.preset == "temperature" and tab.columns == SEP.join(PRESETS["temperature"][1])
    # nothing run yet: the key is of the loaded model's cells, not [MASK]'s (drawn when the model loads)
    assert "random token (re-noised)" in view.legend.object and "still masked" not in view.legend.object
    assert tab.start(wait=True) and all(r["error"] == "" for r in tab.results)
    first, second = (r["traj"].final for r in tab.results)
    assert not np.array_equal(first, second)  # the temperature does change a uniform-state run
    assert tab.apply_preset("strategies") is False
    assert tab.error == ("column 1: strategy=confidence: a uniform-state run does not read it; compare what it "
                         "does (temperature, steps, entropy_bound)")
    # and the other way: a masked model's column setting a uniform-state knob
    state.load("tiny", wait=True)
    assert tab.set_columns("stop_entropy=0.1" + SEP + "steps=4") and not tab.start()
    assert "stop_entropy=0.1: a masked run does not read it" in tab.error
    state.close()


def test_heatmaps_with_nothing_run_are_as_wide_as_the_canvas(checkpoints):
    """A refused or waiting comparison drew its empty heatmaps over 256 positions whatever the length."""
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False, length=10)
    tab, view = build_tab("Compare", state)
    state.load(wait=True)
    assert not tab.set_columns("steps=0" + SEP + "steps=4") or not tab.start()  # refused: nothing runs
    assert (view.x_range.start, view.x_range.end) == (-0.5, 9.5)
    state.length = 16
    assert view.x_range.end == 15.5
    assert tab.set_columns("steps=2" + SEP + "steps=4") and tab.start(wait=True)
    assert view.x_range.end == 15.5 and all(r["frames"].length == 16 for r in tab.results)
    state.close()


def test_an_edited_column_runs_again_and_changed_knobs_mark_the_comparison_shown(compare):
    """An edited column's title and heatmap stayed the earlier run's, and a new seed left the columns at the
    old one, with nothing said: an edit runs the comparison again (as a preset's click does), and a
    sidebar change says that what is drawn is the earlier comparison until Run."""
    from tests.support.dashboard import wait_for

    tab, view = compare
    assert tab.start(wait=True) and tab.stale == ""
    assert tab.set_column(1, "strategy=random, steps=4")
    wait_for(lambda: not tab.running and len(tab.results) == 2 and all(tab.results))
    assert tab.results[1]["config"].steps == 4 and tab.results[1]["config"].strategy == "random"
    assert tab.stale == "" and not view.stale.visible
    tab.session.seed = 4  # the sidebar's seed: the columns drawn are of seed 3
    assert "changed since this comparison ran" in tab.stale and view.stale.visible
    assert "changed since this comparison ran" in view.stale.object
    tab.session.seed = 3  # back: what is drawn is what the knobs say again
    assert tab.stale == ""
    tab.session.seed = 4
    assert tab.start(wait=True) and tab.stale == "" and tab.results[0]["traj"].config.seed == 4


def test_a_masked_model_after_a_uniform_state_one_gets_back_the_preset_it_was_moved_off(checkpoints):
    """The temperature preset is what a uniform-state model is shown in place of confidence vs random;
    back on a masked model, the tab showed the temperature preset still: it shows the one it left. A
    preset someone picked is kept through a model change."""
    save_twins(checkpoints)
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, _ = build_tab("Compare", state)
    state.load(wait=True)
    assert tab.preset == "strategies"
    state.load("tiny-uniform", wait=True)
    assert tab.preset == "temperature"
    state.load("tiny", wait=True)
    assert tab.preset == "strategies" and tab.columns == SEP.join(PRESETS["strategies"][1])
    state.load("tiny-uniform", wait=True)
    assert tab.apply_preset("temperature", start=False)  # chosen: kept
    state.load("tiny", wait=True)
    assert tab.preset == "temperature"
    state.close()
