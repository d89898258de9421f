"""Colours and type sizes of the dashboard: chosen here, where plots are drawn.

Okabe-Ito colours (safe for the common colour-blindnesses); states never differ by hue alone:
new cells also differ in lightness, re-masked cells carry an x mark and fixed cells are dark.
"""
from __future__ import annotations

# How each heatmap cell state (frames.STATES, which the data owns) is drawn: its colour, and a mark
# over the cell for the one state that needs more than a colour.
STATE_COLORS = {"masked": "#E6E6E6", "new": "#D55E00", "earlier": "#0072B2", "remasked": "#CC79A7",
                "fixed": "#4D4D4D",
                # a uniform-state run: noise is a pale tint of the re-masked hue (the same event, a random
                # token instead of [MASK]), lighter than every chosen token; accepted tokens orange, a
                # block's stop green, its final tokens then the committed blue
                "noise": "#F2D7E6", "accepted": "#E69F00", "settled": "#009E73",
                # a masked run's token editing: yellow, the one hue left (a light one: never dark like new)
                "edited": "#F0E442"}
STATE_MARK = {"remasked": "×"}  # drawn over the cell as well as its colour

# Confidence bars: committed vs still-masked proposals (marker shape differs too).
BAR_COMMITTED = "#D55E00"
BAR_PROPOSED = "#56B4E9"
BAR_MEAN = "#009E73"

# Per-sampler lines of quality-vs-steps are drawn by explorer.plots; nothing here.

ACCENT = "#0072B2"  # the header bar
INK, PAPER, EDGE = "#000000", "#FFFFFF", "#888888"  # marks on cells, the step marker, swatch edges
MASKED_TEXT = "#9A9A9A"  # not-yet-generated characters in text views
MASKED_BG = "#4D4D4D"  # Inspect's masked characters (the heatmap's "fixed" grey)
CORRECT, WRONG = "#0072B2", "#D55E00"  # Inspect's candidates: the right character or not
DIFF_COLOR = "#F0E442"  # Compare: characters that differ between columns (also bold, underlined)
SAME_COLOR, SAME_BG = "#009E73", "#B9E3D6"  # Compare: agreeing characters (double underline)
TRAIN_COLOR, VAL_COLOR, LR_COLOR, PLAN_COLOR = "#0072B2", "#D55E00", "#009E73", "#999999"  # Model tab curves
EARLIER_COLORS = ("#E69F00", "#56B4E9", "#CC79A7", "#000000")  # the Model tab's earlier runs, oldest first (Okabe-Ito)

# Type sizes: normal and presentation (projector) mode.
FONT = {False: {"base": "14px", "plot": "12px", "title": "14px", "text": "15px"},
        True: {"base": "20px", "plot": "18px", "title": "22px", "text": "24px"}}

MIN_ALPHA = 0.3  # confidence 0 is still visible; 1 is fully saturated
DARK_CONF = 0.5  # committed cells at least this confident are dark enough for white characters


def confidence_alpha(conf):
    """Fill opacity for a committed cell of confidence `conf` in [0, 1] (numpy in, numpy out)."""
    import numpy as np

    c = np.nan_to_num(np.clip(conf, 0.0, 1.0), nan=1.0)
    return MIN_ALPHA + (1.0 - MIN_ALPHA) * c
