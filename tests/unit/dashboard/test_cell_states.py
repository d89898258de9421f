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
