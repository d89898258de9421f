"""The heatmap's cell states belong to the data (frames.py); the palette only draws them: every state
has its colour, and the heatmap's bitmap colours follow the states' codes."""
from __future__ import annotations

import numpy as np

from explorer.dashboard.frames import CODE, STATE_LABELS, STATES, Frames


def test_every_cell_state_has_a_code_a_label_and_a_colour():
    from explorer.dashboard.ui.palette import STATE_COLORS, STATE_MARK

    assert [CODE[s] for s in STATES] == list(range(len(STATES)))
    assert set(STATE_LABELS) == set(STATES) == set(STATE_COLORS) and set(STATE_MARK) <= set(STATES)


def test_the_heatmap_paints_each_code_in_its_states_colour():
    from explorer.dashboard.ui.heatmap import _RGB
    from explorer.dashboard.ui.palette import STATE_COLORS

    for state, code in CODE.items():
        hex_colour = "#" + "".join(f"{int(v):02X}" for v in _RGB[code])
        assert hex_colour == STATE_COLORS[state].upper(), state


def test_frames_mark_each_cell_with_its_state():
    frames = Frames(np.array([9, 9, 1]), np.array([False, False, True]), mask_id=9, glyphs=np.array(list("abcdefghi_")))
    frames.add_step([2, 9, 1], np.zeros(3), [2, 3, 1], np.ones(3), committed=[True, False, False],
                    remasked=[False, False, False])
    frames.add_step([2, 9, 1], np.zeros(3), [2, 3, 1], np.ones(3), committed=[False, False, False],
                    remasked=[False, True, False])
    names = [[STATES[c] for c in row] for row in frames.state]
    assert names == [["masked", "masked", "fixed"], ["new", "masked", "fixed"], ["earlier", "remasked", "fixed"]]


def test_a_uniform_state_run_shows_noise_accepted_and_settled_cells():
    """A uniform-state run (random-token noise, sampling/uniform.py): row 0 is the first block's noise and
    the blocks not started; each step its accepted and re-noised positions; a block's stop row 'settled',
    then 'earlier'. The downloads carry the same states and the settled events."""
    from explorer.dashboard import downloads
    from explorer.dashboard.frames import glyph_table, state_labels
    from explorer.dashboard.ui.heatmap import legend_html
    from explorer.sampling import SamplerConfig, sample
    from tests.support.models import random_mock

    model = random_mock(8)
    model.meta = {"process": "uniform"}
    traj = sample(model, SamplerConfig(steps=3, block_length=4, entropy_bound=0.5, seed=0, stop_entropy=None),
                  template="a███████")
    frames = Frames.from_trajectory(traj, glyph_table(model.tokenizer))
    names = [[STATES[c] for c in row] for row in frames.state]
    assert names[0] == ["fixed"] + ["noise"] * 4 + ["masked"] * 3
    for row in names[1:3]:  # block 0 (positions 1-4) stepping, block 1 not started
        assert set(row[1:5]) <= {"noise", "accepted"} and "accepted" in row[1:5] and row[5:] == ["masked"] * 3
    assert names[3][1:5] == ["settled"] * 4 and names[4][1:5] == ["earlier"] * 4
    assert set(names[4][5:]) <= {"noise", "accepted"} and names[6][5:] == ["settled"] * 3
    for r, row in enumerate(names[1:], start=1):
        accepted = [i for i, s in enumerate(row) if s == "accepted"]
        assert np.flatnonzero(traj.committed[r - 1, 0] & ~traj.settled[r - 1, 0]).tolist() == accepted
    assert "random token" in legend_html("uniform") and "block not started" in legend_html("uniform")
    assert "noise" not in state_labels("masked") and "still masked" in legend_html()
    df = downloads.trajectory_table(traj)
    assert df.settled.sum() == traj.settled.sum() == 7 and set(df.state) >= {"noise", "accepted", "settled"}
    assert '"process": "uniform"' in downloads.trajectory_json(traj)


def test_a_comparison_of_both_processes_keys_each_processs_cells():
    """Compare with a masked and a uniform-state column (the Generation lesson's last figure): the key names
    both processes, each with its own cells (random token, accepted, still masked, ...), the tint's meaning
    once; columns of one process get that process's key alone, as before."""
    from explorer.dashboard.ui.heatmap import legend_html, legends_html

    both = legends_html(["masked", "uniform"])
    masked, uniform = both.split("<br>")
    assert masked.startswith("<b>masked:</b>") and "still masked" in masked and "random token" not in masked
    assert uniform.startswith("<b>uniform-state:</b>") and "random token (re-noised)" in uniform
    assert "accepted this step" in uniform and both.count("paler = less confident") == 1
    assert legends_html(["uniform", "uniform"]) == legend_html("uniform") and legends_html([]) == legend_html()


def test_an_edited_token_shows_at_its_step_then_as_committed_earlier():
    """Token editing (edit_threshold): the step that replaced a committed token shows the cell 'edited',
    tinted by the new token's confidence and dated by that step; later rows 'earlier'. Live records and
    the finished trajectory give the same rows, and the hover names the tokens: 'edited: X -> Y at step s'."""
    from explorer.dashboard.frames import COMMITTED, glyph_table, state_labels
    from explorer.dashboard.ui.heatmap import FORMATTERS
    from explorer.sampling import SamplerConfig, sample
    from tests.support.scripted import ScriptedDenoiser

    model, records = ScriptedDenoiser(block_size=10, seed=8), []
    traj = sample(model, SamplerConfig(steps=5, edit_threshold=0.5, temperature=0), length=10, on_step=records.append)
    glyphs = glyph_table(model.tokenizer)
    frames = Frames.from_trajectory(traj, glyphs)
    live = Frames(traj.tokens[0, 0], traj.fixed[0], traj.mask_id, glyphs)
    for rec in records:
        live.add_record(rec)
    assert [s.tolist() for s in live.state] == [s.tolist() for s in frames.state]
    s, i = map(int, np.argwhere(traj.edited[:, 0])[0])
    row = s + 1  # row k is the canvas after step k - 1
    assert STATES[frames.state[row][i]] == "edited" and "edited" in COMMITTED and "edited" in state_labels()
    assert frames.committed_at[row][i] == row and np.isclose(frames.conf[row][i], traj.confidence[s, 0, i])
    later = [STATES[frames.state[r][i]] for r in range(row + 1, frames.n_rows)]
    assert set(later) <= {"earlier", "edited"}
    assert "edited: ${g[d.token[i - L]]} -> ${g[d.token[i]]} at step ${y}" in FORMATTERS["$y"]
    from explorer.dashboard import downloads

    df = downloads.trajectory_table(traj)  # the downloads carry the same events
    assert df.edited.sum() == traj.edited.sum() == (df.state == "edited").sum() > 0
    assert '"edited": [[[' in downloads.trajectory_json(traj)


def test_a_live_uniform_state_run_starts_from_its_random_tokens(checkpoints):
    """Explore's live rows of a uniform-state run (grown from its StepRecords): row 0 holds the random
    tokens the run started from, every cell 'noise', as its Trajectory's row 0 has them: not the
    placeholder of a block not started."""
    from explorer.dashboard.tabs.explore import open_session
    from tests.support.dashboard import explore, save_twins

    save_twins(checkpoints)
    s = open_session(checkpoint="tiny-uniform", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    s.param.update(steps=4, seed=1, entropy_bound=2.0)
    ex = explore(s)
    assert ex.start_run(wait=True) and s.error == "", s.error
    traj, frames = ex.trajectory, ex.frames
    assert traj.process == "uniform" and frames.n_rows == traj.n_steps + 1
    np.testing.assert_array_equal(frames.tokens[0], traj.tokens[0, 0])
    assert [STATES[c] for c in frames.state[0]] == ["noise"] * frames.length
    assert not (frames.tokens[0] == traj.mask_id).any()


def test_the_t_axis_says_what_t_is_for_the_runs_process():
    """The live heatmap's t axis: the masked fraction for a masked run; for a uniform-state run, which has
    no [MASK], the share of positions holding random tokens."""
    from explorer.dashboard.frames import glyph_table
    from explorer.dashboard.ui.heatmap import HeatmapFigure
    from explorer.sampling import SamplerConfig, sample
    from tests.support.models import random_mock

    model = random_mock(6)
    heat = HeatmapFigure(labels=False)
    labels = {}
    for process in ("uniform", "masked"):
        model.meta = {"process": process}
        traj = sample(model, SamplerConfig(steps=2, entropy_bound=0.5, seed=0, stop_entropy=None), length=6)
        heat.show(Frames.from_trajectory(traj, glyph_table(model.tokenizer)))
        labels[process] = [a.axis_label for a in heat.figure.right if a.axis_label.startswith("t ")]
    assert labels == {"uniform": ["t (share of random tokens)"], "masked": ["t (masked fraction)"]}


def test_a_uniform_state_runs_confidence_bars_keep_every_settled_position():
    """Explore's "when committed" bars of a uniform-state run: each accepted position at its draw's confidence,
    and every settled one at the confidence it settled with, so the finished run shows a bar per generated
    position (the heatmap leaves settled cells untinted: NaN there). The downloads' commit_confidence too."""
    from explorer.dashboard import downloads
    from explorer.dashboard.frames import glyph_table
    from explorer.dashboard.tabs.explore.confidence import committed_bars
    from explorer.sampling import SamplerConfig, sample
    from tests.support.models import random_mock

    model = random_mock(8)
    model.meta = {"process": "uniform"}
    traj = sample(model, SamplerConfig(steps=3, block_length=4, entropy_bound=0.5, seed=0, stop_entropy=None),
                  template="a███████")
    frames = Frames.from_trajectory(traj, glyph_table(model.tokenizer))
    last = frames.n_rows - 1
    bars = committed_bars(frames, last)
    assert bars["x"].tolist() == list(range(1, 8))  # every generated position; the template's has none
    assert np.isnan(frames.conf[last][1:]).all()  # the heatmap: settled cells at full colour
    for r in range(1, frames.n_rows):  # a block's stop row: its positions at the confidence of that step
        now = traj.settled[r - 1, 0]
        np.testing.assert_array_equal(frames.bar_conf[r][now], traj.confidence[r - 1, 0][now])
    np.testing.assert_array_equal(frames.bar_conf[last][1:5], frames.bar_conf[3][1:5])  # block 0 kept since
    accepted = traj.committed[0, 0] & ~traj.settled[0, 0]  # mid-block: the accepted positions' draws
    np.testing.assert_array_equal(committed_bars(frames, 1)["x"], np.flatnonzero(accepted))
    df = downloads.trajectory_table(traj)
    assert df[df.step == last].commit_confidence.iloc[1:].notna().all()


def test_a_masked_runs_bars_are_its_commit_confidences():
    frames = Frames(np.array([9, 9, 1]), np.array([False, False, True]), mask_id=9, glyphs=np.array(list("abcdefghi_")))
    frames.add_step([2, 9, 1], np.zeros(3), [2, 3, 1], np.array([0.7, 0.2, 1.0]), committed=[True, False, False],
                    remasked=[False, False, False])
    np.testing.assert_array_equal(frames.bar_conf[1], frames.conf[1])
    assert np.isclose(frames.bar_conf[1][0], 0.7) and np.isnan(frames.bar_conf[1][1:]).all()


def test_a_uniform_runs_start_canvas_replaces_a_row_0_already_drawn():
    """The live heatmap may draw row 0 before a uniform-state run's first record brings its random start
    canvas (the view draws as soon as a run begins); that row is drawn again, not left as "block not
    started" for good."""
    from explorer.dashboard.frames import glyph_table
    from explorer.dashboard.ui.heatmap import HeatmapFigure, image_rows
    from explorer.sampling import SamplerConfig, sample
    from tests.support.models import random_mock

    model = random_mock(6)
    model.meta = {"process": "uniform"}
    traj = sample(model, SamplerConfig(steps=2, entropy_bound=0.5, seed=0, stop_entropy=None), length=6)
    glyphs = glyph_table(model.tokenizer)
    placeholder = np.full(6, traj.mask_id)
    live = Frames(placeholder, traj.fixed[0], traj.mask_id, glyphs, "uniform")  # as Explore's run begins
    heat = HeatmapFigure(labels=False)
    heat.start(live)
    heat.append(live)  # row 0 sent while it still holds the placeholder
    live.set_start(traj.tokens[0, 0])
    for s in range(traj.n_steps):
        live.add_step(traj.tokens[s + 1, 0], traj.scores[s, 0], traj.proposals[s, 0], traj.confidence[s, 0],
                      traj.committed[s, 0], traj.remasked[s, 0], traj.settled[s, 0])
    heat.append(live)
    sent = np.asarray(heat.grid.data["image"][0]).reshape(-1, 6)
    whole = image_rows(Frames.from_trajectory(traj, glyphs), 0, traj.n_steps + 1)
    np.testing.assert_array_equal(sent[:traj.n_steps + 1], whole)
    assert [STATES[c] for c in live.state[0]] == ["noise"] * 6
    cells = heat.cells.data
    assert list(np.asarray(cells["state"])[:6]) == [CODE["noise"]] * 6  # the hover's row 0 too
