"""The dashboard's state class, driven without a browser (style item 10)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from explorer.dashboard.frames import CODE, Frames, glyph_table
from explorer.dashboard.tabs.explore import open_session
from explorer.sampling import SamplerConfig, sample
from tests.support.dashboard import LENGTH, explore, wait_for


@pytest.fixture
def state(checkpoints):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    assert s.model is not None and s.error == ""
    return s


def test_lists_only_checkpoints_dir_and_starts_on_a_diffusion_model(checkpoints):
    s = open_session(device="cpu", auto_run=False)
    assert s.param.checkpoint.objects == ["tiny", "tiny-ar", "tiny-training"]
    s.load(wait=True)
    assert s.checkpoint == "tiny" and s.length == LENGTH


def test_knobs_make_the_right_sampler_config(state):
    state.param.update(steps=7, temperature=0.5, top_p=0.9, top_k=3, strategy="margin", schedule="cosine",
                       block_length=4, threshold=0.0, remask=0.2, seed=5)
    assert state.sampler_config() == SamplerConfig(steps=7, temperature=0.5, top_p=0.9, top_k=3, strategy="margin",
                                                   schedule="cosine", block_length=4, threshold=None, remask=0.2,
                                                   seed=5)
    state.threshold = 0.7  # 0 means "off" in the UI; any other value is Fast-dLLM's gamma...
    with pytest.raises(ValueError, match="remask"):  # ...which the sampler refuses with revision on
        state.sampler_config()
    assert not explore(state).start_run(wait=True) and "remask" in state.error
    state.remask = 0.0
    assert state.sampler_config().threshold == 0.7


def test_a_run_fills_the_trajectory(state):
    state.param.update(steps=6, seed=3)
    assert explore(state).start_run(wait=True)
    traj, frames = explore(state).trajectory, explore(state).frames
    assert traj is not None and not explore(state).running
    assert frames.n_rows == explore(state).n_rows == 7  # the start canvas + one row per step
    assert explore(state).step == 6
    assert (frames.tokens[0] == traj.tokens[0, 0]).all()  # row 0, drawn before the sampler starts
    assert (frames.tokens[-1] == traj.final[0]).all()
    assert (frames.state[-1] != CODE["masked"]).all()  # fully decoded
    # The dashboard calls the real sampler: the same knobs give the same text outside it.
    direct = sample(state.model, state.sampler_config(), length=LENGTH)
    assert (direct.final == traj.final).all()


def test_an_ar_checkpoint_runs_left_to_right(state):
    state.load("tiny-ar", wait=True)
    state.template = "ABC"
    assert explore(state).start_run(wait=True), state.error
    traj, frames = explore(state).trajectory, explore(state).frames
    assert traj.kind == "ar" and frames.n_rows == LENGTH - 3 + 1  # one row per generated character
    assert (frames.tokens[0] == traj.tokens[0, 0]).all() and frames.text().startswith("ABC")
    state.template = "A█C"  # a gap before the end: the AR baseline cannot fill it
    assert not explore(state).start_run(wait=True) and "only continue a prompt" in state.error
    assert not explore(state).start_sweep(wait=True) and "diffusion" in explore(state).quality.status


@pytest.mark.slow
def test_diffusion_only_knobs_are_disabled_while_an_ar_model_is_loaded(state):
    """The AR baseline ignores steps, strategy, schedule, blocks, threshold and
    revision; their widgets say so by being disabled, and come back with a diffusion model."""
    from explorer.dashboard.tabs.explore.controls import DIFFUSION_ONLY, ControlsView
    from explorer.sampling import knobs as schema

    # the masked model's knobs; the uniform-state process's own (its stop) stay disabled for it, and so do
    # those needing what a character model lacks (end-of-sequence tokens)
    masked = [k for k in DIFFUSION_ONLY if "masked" in schema.KNOBS[k].processes
              and not schema.KNOBS[k].unmet(state.model_info)]
    assert "suppress_eos" not in masked
    uniform_only = [k for k in DIFFUSION_ONLY if k not in masked]
    controls = ControlsView(state=explore(state))
    assert not any(controls.widgets[k].disabled for k in masked)
    assert uniform_only and all(controls.widgets[k].disabled for k in uniform_only)
    explore(state).sweep_samples = 2
    assert explore(state).start_sweep(wait=True) and explore(state).quality.result is not None
    state.load("tiny-ar", wait=True)
    assert explore(state).quality.result is None  # the diffusion model's curve is not left on screen
    assert all(controls.widgets[k].disabled for k in DIFFUSION_ONLY)
    assert not any(controls.widgets[k].disabled for k in ("temperature", "top_p", "top_k", "length", "seed"))
    state.load("tiny", wait=True)
    assert not any(controls.widgets[k].disabled for k in masked)


def test_live_rows_equal_a_replay_of_the_trajectory(state):
    state.param.update(steps=5, remask=0.3, seed=1)
    explore(state).start_run(wait=True)
    replay = Frames.from_trajectory(explore(state).trajectory, glyph_table(state.model.tokenizer))
    live = explore(state).frames
    assert replay.n_rows == live.n_rows
    for key in ("x", "y", "state", "token", "proposal", "committed_at"):
        assert np.array_equal(np.asarray(replay.cells(0)[key]), np.asarray(live.cells(0)[key]))


def test_bad_template_sets_error_and_keeps_previous_result(state):
    state.param.update(steps=4)
    explore(state).start_run(wait=True)
    frames, traj, text = explore(state).frames, explore(state).trajectory, explore(state).frames.text()
    state.template = "AB zz█"  # space and 'z' are not in the pattern alphabet
    assert not explore(state).start_run(wait=True)
    assert "does not know" in state.error and "'z'" in state.error
    assert explore(state).frames is frames and explore(state).trajectory is traj and explore(state).frames.text() == text
    state.template = "AB█C"  # a good template clears the notice and keeps its characters fixed
    assert explore(state).start_run(wait=True)
    assert state.error == "" and explore(state).frames.text().startswith("AB") and explore(state).frames.text()[3] == "C"
    assert explore(state).frames.fixed[:2].all() and not explore(state).frames.fixed[2]


def test_fill_only_the_blanks_sets_length_to_the_template(state):
    """The canvas is padded with █ up to Length; "Fill only the blanks" sets Length to
    the template's own length ([___] counts five), so nothing after it is generated."""
    state.template = "AB[___]C█"
    state.param.trigger("fit_length")
    assert state.length == 9 and state.error == ""
    assert explore(state).start_run(wait=True)
    text = explore(state).frames.text()
    assert len(text) == 9 and text.startswith("AB") and text[7] == "C" and "█" not in text
    state.template = "  "
    state.param.trigger("fit_length")
    assert "type a template first" in state.error and state.length == 9
    state.template = "A" * (LENGTH + 1)
    state.param.trigger("fit_length")
    assert f"context is {LENGTH}" in state.error and state.length == 9


def test_auto_run_on_knob_change_and_newest_run_wins(state):
    explore(state).auto_run = True
    state.steps = 3
    state.steps = 5  # supersedes the run just started
    explore(state)._runs.current.done.wait(30)
    assert explore(state).trajectory is not None and explore(state).frames.n_rows == 6
    assert explore(state).trajectory.config.steps == 5


def test_new_seed_draws_a_seed_and_runs(state):
    before = state.seed
    explore(state).param.trigger("new_seed")
    explore(state)._runs.current.done.wait(30)
    assert state.seed != before and explore(state).trajectory.config.seed == state.seed


def test_worker_results_are_applied_only_through_dispatch(checkpoints):
    """Parameters change on the UI side only: a worker hands callbacks to `dispatch`."""
    queued = []
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, dispatch=queued.append)
    s.load()
    s._loads.current.done.wait(30)
    assert s.model is None  # nothing applied yet
    for callback in queued:
        callback()
    queued.clear()
    assert s.model is not None
    main = threading.get_ident()
    seen = []
    explore(s).param.watch(lambda *events: seen.append(threading.get_ident()), ["n_rows", "trajectory", "running"])
    explore(s).start_run()
    explore(s)._runs.current.done.wait(30)
    assert explore(s).trajectory is None
    for callback in queued:
        callback()
    assert explore(s).trajectory is not None and set(seen) == {main}


def test_header_facts_cope_with_missing_metrics(checkpoints):
    from explorer.dashboard.ui.header import quality_text

    s = open_session(checkpoint="tiny-training", device="cpu", auto_run=False)
    s.load(wait=True)
    assert "no final NELBO yet" in quality_text(s.model_info)
    s.load("tiny", wait=True)
    assert quality_text(s.model_info).startswith("NELBO 2.164 bits/char")
    assert "perplexity ≤ 4.48" in quality_text(s.model_info)  # exp(1.5 nats): the test perplexity's bound


def test_checkpoint_names_with_paths_are_refused(checkpoints):
    # never opened (only names listed in checkpoints/ are): the default is, with a notice saying why
    s = open_session(checkpoint="../tiny", device="cpu", auto_run=False)
    s.load(wait=True)
    assert s.model_info["name"] == "tiny" and "'../tiny' is not one of the checkpoints" in s.error
    s.load("../tiny", wait=True)  # a name from elsewhere than the list: refused by the loader
    assert s.checkpoint == "tiny" and "not a plain name" in s.error


def test_quality_sweep_is_computed_then_cached(state):
    explore(state).param.update(sweep_strategies=["confidence"], sweep_samples=2)
    assert explore(state).start_sweep(wait=True)
    table, summary = explore(state).quality.result
    assert explore(state).quality.status == "done" and explore(state).quality.progress == 100
    assert set(summary["steps"].dropna()) == {1, 2, 4, 8, 16}  # grid capped at the 24 positions
    assert "pattern_quality_mean" in summary
    explore(state).quality.result = None
    assert explore(state).start_sweep(wait=True) and explore(state).quality.status == "from cache"
    assert explore(state).quality.result[1] is summary


def test_knob_change_cancels_a_running_sweep(state):
    explore(state).param.update(sweep_strategies=["confidence", "random"], sweep_samples=4)
    task, started = explore(state).quality, threading.Event()
    real = task._progress
    task._progress = lambda job, done, total, text: (started.set(), real(job, done, total, text))
    explore(state).start_sweep()
    job = task.worker.current
    assert started.wait(60)
    state.temperature = 0.5  # auto_run is off: the sweep is still cancelled
    job.done.wait(60)
    assert job.cancelled and not explore(state).quality.running and explore(state).quality.status.startswith("cancelled")


def test_mean_confidence_at_t_over_validation_data(state):
    explore(state).confidence_view = "mean at t (validation)"
    explore(state).confidence.worker.current.done.wait(60)
    table = explore(state).confidence.result
    assert table is not None and len(table) == LENGTH
    assert np.nanmin(table["confidence"]) > 0 and np.nanmax(table["confidence"]) <= 1


def test_quality_sweep_takes_the_template_as_typed(state):
    # the sweep parses the typed template (here with [___] and padding to `length`) as the sampler does
    state.template = " AB[___]C "
    explore(state).param.update(sweep_strategies=["confidence"], sweep_samples=1)
    canvas = state.canvas()
    assert explore(state).start_sweep(wait=True) and explore(state).quality.error == "" and explore(state).quality.status == "done"
    table, _ = explore(state).quality.result
    assert set(table["length"]) == {canvas.length} == {state.length}
    assert (table["text"].str[:2] == "AB").all() and (table["text"].str[7] == "C").all()


@pytest.mark.parametrize("interval", [0.0, 3600.0])
def test_a_live_run_is_shown_on_ticks_first_rows_and_end_at_once(state, monkeypatch, interval):
    """The views draw on the state's n_rows ticks: every step when the interval is 0; with a long one,
    only the start canvas, the first sampled row and the end (one message each, not one per step)."""
    from explorer.dashboard.tabs.explore.state import run

    monkeypatch.setattr(run, "LIVE_INTERVAL", interval)
    e, ticks = explore(state), []
    e.param.watch(lambda event: ticks.append(event.new), "n_rows")
    state.steps = 8
    assert e.start_run(wait=True)
    rows = e.trajectory.n_steps + 1
    assert ticks == (list(range(1, rows + 1)) if interval == 0 else [1, 2, rows])
    assert e.frames.n_rows == rows and not e.running


def test_the_header_tells_only_what_is_known_of_a_run(state):
    """A threshold run's model calls are unknown until it ends, so the header does
    not promise a step count; at the end it reports the real model calls."""
    from explorer.dashboard.tabs.explore.state import run_status

    frames = Frames(np.full(LENGTH, state.model.config.mask_id), np.zeros(LENGTH, bool), state.model.config.mask_id,
                    glyph_table(state.model.tokenizer))
    frames.expected_rows = 9
    assert run_status(state.model, SamplerConfig(steps=8), frames) == "sampling 8 steps …"
    assert "threshold 0.9" in run_status(state.model, SamplerConfig(threshold=0.9), frames)
    assert "8 steps" not in run_status(state.model, SamplerConfig(threshold=0.9), frames)
    for config, rule in ((SamplerConfig(factor=1.0), "factor rule"), (SamplerConfig(entropy_bound=0.5), "entropy-bound rule")):
        assert rule in run_status(state.model, config, frames) and "8 steps" not in run_status(state.model, config, frames)
    frames.process = "uniform"  # a uniform-state run: its blocks stop when stable and confident, not by a rule
    uniform = SamplerConfig(steps=8, entropy_bound=0.5)
    assert "stable and confident (at most 8 steps)" in run_status(state.model, uniform, frames)
    assert run_status(state.model, uniform.replace(stop_entropy=None), frames) == "sampling 8 steps from random tokens …"
    frames.process = "masked"
    state.threshold = 0.9
    assert explore(state).start_run(wait=True)
    traj = explore(state).trajectory
    per_call = (~traj.fixed).sum() / traj.nfe
    assert state.status == (f"{traj.n_steps} steps, {traj.nfe} model calls ({per_call:.1f} per call), "
                            f"{traj.seconds * 1000:.0f} ms")
    state.load("tiny-ar", wait=True)
    assert "left to right" in run_status(state.model, SamplerConfig(), frames)


def test_heatmap_ticks_only_whole_steps_and_positions():
    """A short run's axes showed step -0.5 and 0.5. Compare's progress axis (0..1)
    keeps fractional ticks."""
    from explorer.dashboard.ui.heatmap import HeatmapFigure

    live, columns = HeatmapFigure().figure, HeatmapFigure(progress=True).figure
    assert live.xaxis[0].ticker.min_interval == live.yaxis[0].ticker.min_interval == 1
    assert columns.xaxis[0].ticker.min_interval == 1 and columns.yaxis[0].ticker.min_interval < 1


def test_confidence_view_shows_every_committed_position_by_default(state):
    """By default the confidence plot has a bar for every position decided by the
    shown step (its confidence when committed), ▼ on that step's commits, even when steps > length."""
    from explorer.dashboard.tabs.explore.confidence import ConfidenceView

    state.param.update(steps=LENGTH + 8, template="AB█")  # more steps than positions; two given positions
    assert explore(state).start_run(wait=True), state.error
    view = ConfidenceView(state=explore(state))
    assert explore(state).confidence_view == "when committed"
    frames = explore(state).frames
    for row in (1, frames.n_rows // 2, frames.n_rows - 1):
        explore(state).step = row
        data = view.source.data
        decided = np.flatnonzero(~np.isnan(frames.conf[row]))
        assert data["x"].tolist() == decided.tolist() and 0 not in decided and 1 not in decided  # not the template's
        np.testing.assert_allclose(data["top"], frames.conf[row][decided])
        assert np.isfinite(data["mark"]).sum() == frames.committed[row].sum()
    assert len(view.source.data["x"]) == LENGTH - 2  # at the end every generated position has a bar
    explore(state).confidence_view = "this step"  # the old view: only the last step's proposals
    assert len(view.source.data["x"]) < LENGTH - 2


def test_presentation_mode_shortens_the_confidence_title_and_enlarges_the_player(state):
    """At projector type the confidence plot's title drops its name (the view selector says it: the
    whole title ran past a 390-pixel column at 1366 px) and the play buttons grow; both come back."""
    from explorer.dashboard.tabs.explore.confidence import ConfidenceView
    from explorer.dashboard.tabs.explore.scrubber import ScrubberView

    assert explore(state).start_run(wait=True), state.error
    view, scrubber = ConfidenceView(state=explore(state)), ScrubberView(state=explore(state))
    last = explore(state).frames.n_rows - 1
    long_title, small = view.figure.title.text, scrubber.player.scale_buttons
    assert long_title == f"Confidence when committed, step {last} (▼ this step)"
    state.presentation = True
    assert view.figure.title.text == f"Step {last} (▼ this step)" and scrubber.player.scale_buttons > small
    assert view.figure.yaxis.axis_label == "confidence"  # the long label ran past the plot's height
    explore(state).confidence_view = "this step"
    assert view.figure.title.text == f"Step {last} (▼ committed)"
    state.presentation = False
    assert view.figure.title.text == f"Proposals, step {last} (▼ committed)" and scrubber.player.scale_buttons == small
    assert view.figure.yaxis.axis_label == f"score ({state.strategy})"


@pytest.mark.slow
def test_the_quality_sweep_starts_by_itself_only_when_it_is_cheap(state, monkeypatch):
    """After a run the sweep starts only if its estimated model time (limits.expected_cost: the sweep's
    batched calls at the checkpoint's measured or guessed rate) is under AUTO_SWEEP_SECONDS or the server's
    shorter --auto-start-seconds, the bound the checkbox names; otherwise the panel says what it would cost and waits for Compute. A cached sweep is
    always shown."""
    from explorer.dashboard.runtime.cache import SWEEP_RATES
    from explorer.dashboard.runtime.limits import expected_cost
    from explorer.dashboard.tabs.explore.state import quality

    e = explore(state)
    e.param.update(sweep_auto=True, sweep_samples=2)
    server = state.share.limits.auto_start_seconds
    assert server < quality.AUTO_SWEEP_SECONDS  # the defaults: a link's 5 s bounds the panel's 10 s
    assert e.param.sweep_auto.label.endswith(f"if under {server:g} s")
    assert e.start_run(wait=True)
    grid = [n for n in quality.STEPS_GRID if n <= LENGTH]  # (written out: the test checks sweep_grid too)
    assert quality.sweep_grid(LENGTH) == grid
    cells = [{"steps": n, "strategy": s} for n in grid for s in e.sweep_strategies]
    judge = e._judge_name is not None  # tiny-ar scores the text and samples the AR baseline
    expected = expected_cost(state.model_info["n_params"], cells, 2, LENGTH, judge, judge, SWEEP_RATES.get("tiny"))
    assert e.sweep_cost(state.canvas(), None) == expected
    monkeypatch.setattr(quality, "AUTO_SWEEP_SECONDS", 0.0)
    state.seed = 5  # a new run whose sweep is not cached
    assert e.start_run(wait=True)
    assert not e.quality.running and e.quality.result is None
    assert "press Compute" in e.quality.status and f"≈ {expected[0]:,} model calls" in e.quality.status
    assert e.start_sweep(wait=True) and e.quality.result is not None  # Compute still works
    state.seed = 6
    monkeypatch.setattr(quality, "AUTO_SWEEP_SECONDS", 1e9)
    assert e.start_run(wait=True)
    e.quality.worker.current.done.wait(60)
    assert e.quality.result is not None  # cheap enough: computed after the run


def test_the_quality_estimate_does_not_follow_the_last_runs_pace(state, monkeypatch):
    """Similar runs got estimates from 17 s to 139 s: the estimate was the last run's own time per call
    (a few calls, timed under whatever else the server did) times every sample's calls. The same knobs
    now get the same estimate, however long the run took."""
    from explorer.dashboard.runtime.cache import SWEEP_RATES
    from explorer.dashboard.tabs.explore.state import quality

    monkeypatch.setattr(quality, "AUTO_SWEEP_SECONDS", 0.0)
    monkeypatch.setitem(SWEEP_RATES, state.model_info["name"], 1e-3)  # a rate measured earlier: not the run's
    e = explore(state)
    e.param.update(sweep_auto=True, sweep_samples=2)
    assert e.start_run(wait=True)
    said = e.quality.status
    assert "press Compute" in said
    e.trajectory.seconds *= 50  # the same run, timed on a busier server
    e.auto_sweep(e.trajectory)
    assert e.quality.status == said


def test_the_quality_panel_says_whether_it_compares_the_sidebars_strategy(state):
    """The plot keeps its own strategies when the sidebar's changes: the panel says so."""
    import html

    from explorer.dashboard.tabs.explore.quality import QualityView

    e = explore(state)
    e.sweep_strategies = ["confidence", "random"]
    view = QualityView(state=e)
    shown = lambda: html.unescape(view.compared.object)  # noqa: E731
    state.strategy = "confidence"
    assert "confidence (the sidebar's), random" in shown() and "not among" not in shown()
    state.strategy = "margin"
    assert "the sidebar's strategy, margin, is not among them" in shown()
    e.sweep_strategies = ["margin"]
    assert "margin (the sidebar's)" in shown()


def test_a_uniform_state_models_quality_sweep_is_one_curve(checkpoints):
    """A uniform-state run reads no strategy: its confidence and random curves were the same runs drawn
    twice, at twice the model calls, under "Compares confidence (the sidebar's), random"."""
    import html

    from explorer.dashboard.tabs.explore.quality import QualityView
    from tests.support.dashboard import save_twins

    save_twins(checkpoints)
    s = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    e = explore(s)
    e.param.update(sweep_strategies=["confidence", "random"], sweep_samples=2)
    view = QualityView(state=e)
    assert "One curve, at the sidebar's temperature 1" in html.unescape(view.compared.object)
    assert view.strategies.disabled
    assert e.start_sweep(wait=True) and e.quality.error == ""
    table, summary = e.quality.result
    assert summary.attrs["knobs"] == ["steps"] and len(summary[summary["sampler"] == "diffusion"]) == len(
        set(summary["steps"].dropna()))
    e.sweep_strategies = ["margin"]  # nothing it reads changed: the same sweep, from the cache
    assert e.start_sweep(wait=True) and e.quality.status == "from cache"
    s.load("tiny", wait=True)  # a masked model compares strategies again
    assert not view.strategies.disabled and "margin" in html.unescape(view.compared.object)
    s.close()


def test_the_scrubber_follows_a_live_run(state):
    """While a run streams the scrubber sat at step 0 under "step 13 of 13"; it
    now moves to the newest row on every live tick, in the same update as the rows."""
    e = explore(state)
    seen = []
    e.param.watch(lambda *events: seen.append((e.n_rows, e.step, e.running)), ["n_rows", "step"])
    state.steps = 12
    assert e.start_run(wait=True)
    live = [(rows, step) for rows, step, running in seen if running and rows > 1]
    assert live and all(step == rows - 1 for rows, step in live), seen
    assert e.step == e.frames.n_rows - 1 == 12


def test_heatmap_rows_are_labelled_by_t_as_well_as_by_step(state):
    """The reverse process labelled by t (the masked fraction each step's model call saw)."""
    import numpy as np

    state.param.update(steps=6, seed=1)
    ex = explore(state)
    assert ex.start_run(wait=True)
    from explorer.dashboard.ui.heatmap import HeatmapFigure

    heat = HeatmapFigure()
    heat.show(ex.frames)
    t = np.array(heat.row_t.data["t"])
    assert len(t) == ex.frames.n_rows and t[0] == 1.0 and t[-1] == 0.0
    assert np.allclose(t[:-1], ex.trajectory.step_t)  # the t each step's model call was given
    axis = heat.figure.right[0]
    assert axis.axis_label == "t (masked fraction)"


def test_the_t_axis_does_not_repeat_a_label():
    """Rows after the canvas is filled (a run's post steps) all have t = 0, and the t axis read 0.00 at each
    of their ticks: a label the tick above already reads is left out (the formatter run by node)."""
    import json
    import shutil
    import subprocess

    from explorer.dashboard.ui.heatmap import T_TICK

    if shutil.which("node") is None:
        pytest.skip("needs node to run the axis's JavaScript")
    src = {"data": {"t": [1.0, 0.5, 0.25, 0.0, 0.0, 0.0, 0.0]}}
    script = (f"const src = {json.dumps(src)}; const f = new Function('tick', 'index', 'ticks', 'src', {json.dumps(T_TICK)});"
              "const ticks = [0, 2, 3, 4, 6, 8]; console.log(JSON.stringify(ticks.map((k, i) => f(k, i, ticks, src))));")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out) == ["1.00", "0.25", "0.00", "", "", ""]


def test_several_samples_are_each_seeds_solo_run(state):
    """The 5-sample showcase of "Generation: Iterative Unmasking" in one view: row j is the real sampler's
    run of seed + j alone, so row 0 is the run above, and the view shows every text with its seed."""
    from explorer.dashboard.tabs.explore.samples import SamplesView
    from explorer.sampling import sample

    state.param.update(steps=4, seed=7)
    ex = explore(state)
    view = SamplesView(state=ex)
    ex.start_run(wait=True)
    wait_for(lambda: ex.trajectory is not None)
    ex.samples = 5
    wait_for(lambda: ex.samples_task.result is not None)
    rows = ex.samples_task.result["rows"]
    config = state.sampler_config()
    alone = [sample(state.model, config.replace(seed=7 + j), length=LENGTH, record=False).texts()[0] for j in range(5)]
    assert [r["seed"] for r in rows] == [7, 8, 9, 10, 11] and [r["text"] for r in rows] == alone
    assert rows[0]["text"] == ex.trajectory.texts()[0] and len(set(alone)) > 1  # the run above; rows differ
    html = view.texts.object
    assert html.count("<tr>") == 5 and all(f"seed {7 + j}" in html for j in range(5)) and "in the heatmap" in html
    state.steps = 5  # a knob change: the set is dropped, and follows the next run
    assert ex.samples_task.result is None
    ex.start_run(wait=True)
    wait_for(lambda: ex.samples_task.result is not None and ex.trajectory.config.steps == 5)
    again = sample(state.model, state.sampler_config().replace(seed=9), length=LENGTH, record=False).texts()[0]
    assert ex.samples_task.result["rows"][2]["text"] == again


def test_several_prompts_in_one_view(state):
    """The prompting exercise of "Generation: Iterative Unmasking" (several prompts at 15 steps, T 0.7) in
    one view: each (prompt, seed) row is the run of that template and seed alone."""
    from explorer.dashboard.tabs.explore.samples import SamplesView
    from explorer.sampling import sample

    state.param.update(steps=4, seed=3)
    ex = explore(state)
    view = SamplesView(state=ex)
    ex.param.update(prompts=" ABC | A█B | ", samples=2)
    wait_for(lambda: ex.samples_task.result is not None and len(ex.samples_task.result["rows"]) == 4)
    rows = ex.samples_task.result["rows"]
    assert [(r["template"], r["seed"]) for r in rows] == [("ABC", 3), ("ABC", 4), ("A█B", 3), ("A█B", 4)]
    for r in rows:
        alone = sample(state.model, state.sampler_config().replace(seed=r["seed"]), length=LENGTH,
                       template=r["template"], record=False).texts()[0]
        assert r["text"] == alone
    assert rows[0]["text"].startswith("ABC") and view.texts.object.count("<tr>") == 4 and "A█B" in view.texts.object
    ex.param.update(prompts="", samples=1)  # back to the one run: nothing computed or shown
    assert ex.samples_task.result is None and view.texts.object == ""


def test_several_samples_are_bounded():
    """A hostile link never starts unbounded work: at most MAX_SAMPLES seeds and MAX_PROMPTS prompts."""
    from explorer.dashboard.tabs.explore.state import MAX_PROMPTS, MAX_SAMPLES, ExploreState
    from explorer.dashboard.tabs.explore.state.samples import parse_prompts

    assert ExploreState.param.samples.bounds == (1, MAX_SAMPLES) == (1, 8)
    assert parse_prompts("ROMEO: | To be, |  | First C") == ("ROMEO:", "To be,", "First C")
    with pytest.raises(ValueError, match="at most 5"):
        parse_prompts("|".join("A" * (i + 1) for i in range(MAX_PROMPTS + 1)))


def test_checkbox_keeps_a_boolean_parameter_in_step_both_ways():
    """ui.base.checkbox (a one-option CheckBoxGroup, so its label is clickable): ticking it sets the
    parameter, setting the parameter ticks it, and its one option is the parameter's label."""
    import param

    from explorer.dashboard.ui.base import checkbox

    class Knobs(param.Parameterized):
        big = param.Boolean(False, label="Presentation (large type)")

    knobs = Knobs()
    box = checkbox(knobs.param.big)
    assert box.options == ["Presentation (large type)"] and box.value == []
    box.value = ["Presentation (large type)"]
    assert knobs.big is True
    knobs.big = False
    assert box.value == []
    knobs.big = True
    assert box.value == ["Presentation (large type)"]


def test_pages_show_no_process_wide_busy_spinner(checkpoints):
    """Panel's busy state is one per process: a template's busy spinner turned in every open page
    whenever any session handled an event, and a knob change kept it spinning through the whole run
    (browser CPU on the sampler's cores: bench_dashboard). The header's status line says what each
    session is doing instead."""
    from explorer.dashboard import create_app

    template = create_app(checkpoint="tiny", device="cpu", autoload=False)
    assert template.busy_indicator is None


def test_the_text_keeps_its_height_over_a_run_behind_the_last_runs_text(state):
    """While a run streams (and while a finished one is scrubbed) the sample text lies over an invisible
    copy of the last finished run's final text, so the box keeps its height as newlines are committed:
    each change of its height made the browser lay the whole page out again. Behind a canvas of another
    length there is none (its height would be wrong)."""
    import html

    from explorer.dashboard.tabs.explore.text import TextView

    e = explore(state)
    view = TextView(state=e)
    live = []  # the markup of each live tick
    e.param.watch(lambda event: live.append(html.unescape(view.div.text)) if e.running else None, "n_rows")

    def ghost_of(text: str) -> str:
        return f'<p class="ghost" aria-hidden="true">{html.escape(text)}</p>'

    state.param.update(steps=6, seed=3)
    assert e.start_run(wait=True)
    first = e.frames.text()
    assert live and not any('class="ghost"' in markup for markup in live)  # nothing behind the first run
    assert ghost_of(first) in html.unescape(view.div.text)  # scrubbing the finished run
    live.clear()
    state.seed = 4
    assert e.start_run(wait=True) and e.frames.text() != first
    assert live and all(ghost_of(first) in markup for markup in live)
    live.clear()
    state.length = LENGTH // 2
    assert e.start_run(wait=True)
    assert live and not any('class="ghost"' in markup for markup in live)


def test_the_text_caption_gives_the_runs_step_count_while_it_runs(state):
    """While a run streams, the caption counts its steps as the header and the scrubber do ("step 1 of
    8", not "step 1 of 1"); a threshold run's count is unknown, so it says how many so far."""
    import html

    from explorer.dashboard.tabs.explore.text import TextView

    e = explore(state)
    view, seen = TextView(state=e), []
    e.param.watch(lambda event: seen.append(html.unescape(view.div.text)) if e.running else None, "n_rows")
    state.steps = 8
    assert e.start_run(wait=True)
    assert seen and all("</b> of 8:" in text for text in seen), seen[:2]
    assert "step 8</b> of 8:" in html.unescape(view.div.text)  # the end
    seen.clear()
    state.threshold = 0.9
    assert e.start_run(wait=True)
    assert seen and all("so far:" in text for text in seen), seen[:2]
    assert "so far" not in html.unescape(view.div.text)


@pytest.mark.slow
def test_an_empty_quality_panel_says_how_to_fill_it(state):
    """With auto-sweep off (`serve --no-auto-sweep`, a class's server) the quality panel was a heading over
    a blank: it now says the sweep has not been computed and what Compute does; running and done say so."""
    from explorer.dashboard.tabs.explore.quality import QualityView

    e = explore(state)
    e.param.update(sweep_strategies=["confidence"], sweep_samples=2)
    view = QualityView(state=e)
    assert "not computed for these knobs yet" in view.status.object and "Compute" in view.status.object
    assert view.stop.disabled and not view.progress.visible  # nothing to stop, no empty bar
    e.quality.running = True
    assert not view.stop.disabled and view.progress.visible
    e.quality.running = False
    assert e.start_sweep(wait=True) and e.quality.result is not None
    assert view.status.object == "Quality vs steps: done" and view.plot.object is not None and view.progress.visible
    e.quality.clear()  # what a checkpoint switch leaves
    assert "not computed for these knobs yet" in view.status.object and not view.progress.visible


def test_several_samples_of_an_ar_model_and_a_bad_prompt(checkpoints):
    """The AR baseline's seeds are its solo runs too; a prompt the model cannot take is a notice, not a crash."""
    from explorer.sampling import sample_ar

    s = open_session(checkpoint="tiny-ar", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    ex = explore(s)
    ex.param.update(samples=3, prompts="AB | C")
    wait_for(lambda: ex.samples_task.result is not None and len(ex.samples_task.result["rows"]) == 6)
    for row in ex.samples_task.result["rows"]:
        alone = sample_ar(s.model, s.sampler_config().replace(seed=row["seed"]), length=LENGTH,
                          prompt=row["template"], record=False).texts()[0]
        assert row["text"] == alone
    ex.prompts = "AB | a lower-case prompt!"
    assert "several samples:" in ex.samples_notice and ex.samples_task.result is None
    s.close()


@pytest.mark.slow
def test_the_quality_legend_names_the_stars_briefly():
    """The stars' legend entry (the rule in words, about 65 characters) ran past a 1366-pixel page's right
    edge at projector type, and at normal type where it fell in the legend's second column (a uniform-state
    model's one curve): Explore's narrow column gives it the short name at both."""
    import holoviews as hv
    import pandas as pd

    from explorer.dashboard.tabs.explore.quality import quality_figure
    from explorer.dashboard.ui.legend import SHORT_SWEET_SPOT

    hv.extension("bokeh")
    summary = pd.DataFrame({"sampler": "diffusion", "strategy": "confidence", "steps": [1, 2, 4, 8],
                            "pattern_quality_mean": [0.2, 0.5, 0.9, 0.95], "pattern_quality_std": 0.1,
                            "tokens_per_s_mean": [500.0, 250, 120, 60], "tokens_per_s_std": 0.0})

    def legend(presentation):
        fig = hv.render(quality_figure(summary, "pattern_quality", "steps", presentation))
        return [item.label.value for lg in fig.legend for item in lg.items], fig.legend[0].nrows, fig.legend[0].ncols

    for presentation in (False, True):
        labels, _, _ = legend(presentation)
        assert SHORT_SWEET_SPOT in labels and max(map(len, labels)) <= 35
    # the x axis at the projector's type too (under the tokens/s axis HoloViews left it at its default)
    from explorer.dashboard.ui.palette import FONT

    fig = hv.render(quality_figure(summary, "pattern_quality", "steps", True))
    assert {(a.major_label_text_font_size, a.axis_label_text_font_size) for a in fig.xaxis} == {(FONT[True]["plot"],) * 2}
    assert type(fig.xaxis[0].ticker).__name__ == "FixedTicker"  # the plot's own hooks kept: a tick at every step
    # one strategy: "diffusion (confidence): tokens/s" beside the stars ran past the column: one column of them
    labels, _, cols = legend(False)
    assert "diffusion (confidence): tokens/s" in labels and cols == 1


def test_the_quality_legend_takes_two_columns_where_they_fit():
    from explorer.dashboard.ui.legend import legend_columns

    two_strategies = ["confidence", "confidence: tokens/s", "random", "random: tokens/s", "AR baseline",
                      "AR baseline: tokens/s", "held-out text", "sweet spot (90% of the best)"]
    assert legend_columns(two_strategies) == 2  # 20 + 28 characters side by side, as a 1366-pixel page shows
    assert legend_columns(["diffusion (confidence)", "diffusion (confidence): tokens/s", "",
                           "sweet spot (90% of the best)"]) == 1
    assert legend_columns(["a", "a", "b"]) == 2  # repeated labels are one entry


def test_heatmap_letters_shrink_with_narrow_cells():
    """A 64-character canvas at 1024 px drew cells about 7 px wide, and the cell letters (10 px, shown from
    8 px cells) vanished: they now show from 6 px cells, their type the cell's size (the labelling
    script run by node over a 64 x 10 grid, 7 x 30 px cells)."""
    import json
    import shutil
    import subprocess

    from explorer.dashboard.frames import CODE
    from explorer.dashboard.ui.heatmap import FIT_LABELS

    if shutil.which("node") is None:
        pytest.skip("needs node to run the heatmap's JavaScript")
    L, R = 64, 10
    cells = {"x": [i % L for i in range(L * R)], "y": [i // L for i in range(L * R)],
             "state": [CODE["earlier"]] * (L * R), "token": [1] * (L * R), "conf": [0.9] * (L * R)}
    args = {"p": {"x_range": {"start": -0.5, "end": L - 0.5}, "y_range": {"start": R - 0.5, "end": -0.5},
                  "inner_width": 7 * L, "inner_height": 30 * R},
            "cells": {"data": cells}, "labels": {"data": {"x": []}}, "vocab": {"data": {"glyph": ["A", "B"]}},
            "glyph": {"text_font_size": {"value": "10px"}}}
    script = (f"const a = {json.dumps(args)}; new Function('p', 'cells', 'labels', 'vocab', 'glyph', {json.dumps(FIT_LABELS)})"
              "(a.p, a.cells, a.labels, a.vocab, a.glyph);"
              "console.log(JSON.stringify([a.labels.data.x.length, a.glyph.text_font_size.value]));")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out) == [L * R, "9px"]
