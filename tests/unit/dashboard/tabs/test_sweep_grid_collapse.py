"""The Sweep tab's quality grid does not score a collapse as a success: the notebook's pattern quality gives
a one-symbol tiling 100%, so a column of mostly 'EEEE…' rows read 100%."""
from __future__ import annotations

import numpy as np
import pandas as pd

from explorer import metrics
from explorer.dashboard.tabs.sweep.view import format_score, grid_html


def _grid_table() -> pd.DataFrame:
    """Six samples at 20 steps, four of them one repeated symbol, all 100% by the notebook's quality."""
    texts = ["E" * 24, "ABCABC" * 4, "F" * 24, "GGGG" * 6, "ABAB" * 6, "C" * 24]
    ids = np.array([[ord(c) for c in t] for t in texts])
    scores = metrics.pattern_scores(ids)
    return pd.DataFrame({"sampler": "diffusion", "steps": 20, "sample": range(6), "text": texts}).join(scores)


def test_collapsed_rows_are_marked_and_the_column_is_not_scored_full():
    table = _grid_table()
    assert (table["pattern_quality"] == 1.0).all()  # what the notebook's score says of every row
    page = grid_html(table, "pattern_quality")
    assert page.count('class="collapsed"') == 4 and page.count("<b>collapsed</b>") == 4
    assert "<b>mean 33%</b> (4 collapsed)" in page  # 2 of 6 rows a pattern: the collapses count as failures
    assert "mean 100%" not in page


def test_a_collapse_with_a_stray_symbol_is_marked_too_and_counts_show_as_integers():
    table = _grid_table()
    table.loc[0, "text"] = "FFFE" + "F" * 20
    page = grid_html(table, "distinct_symbols")
    assert page.count('class="collapsed"') == 4
    assert format_score("distinct_symbols", 2.0) == "2"
    # a count has no success to fail: the mean is the patterned rows' (3 and 2 symbols), collapses left out
    assert "<b>mean 2.50</b> (4 collapsed)" in page and "<b>2</b></td>" in page


def test_short_samples_stay_on_one_line_and_long_ones_wrap():
    """At projector type the grid's 24-symbol rows wrapped in 1024 px's five columns, breaking each period:
    short samples keep one line (their type shrunk to the column), text of a sentence or more wraps."""
    table = _grid_table()
    page = grid_html(table, "pattern_quality")
    assert "container-type: inline-size" in page and page.count("white-space: pre;") == 6
    assert "pre-wrap" not in page
    long = table.assign(text=["To be, or not to be, that is the question: whether 'tis nobler"] * 6)
    assert "white-space: pre;" not in grid_html(long, "pattern_quality")
