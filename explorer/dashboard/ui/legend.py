"""Legends of the quality figures in a page's columns: the sweet-spot stars' short name and how many
legend columns fit. Explore's quality panel (a sidebar-wide column) and the Sweep tab's plots (half the
main area each) share them; the downloaded figures keep them too."""
from __future__ import annotations

# The stars' name at every type size: the rule in words ("sweet spot: fewest steps reaching 90% of the best
# pattern quality", explorer.plots.sweet_spot_rule) ran past a 1366-pixel page's columns; the tabs' captions
# state the rule
SHORT_SWEET_SPOT = "sweet spot (90% of the best)"
# A legend under the plot: bokeh leaves no room for the legend's own bottom margin there, so its last row
# was cut at the figure's edge (a PNG download showed it); without the margin it fits whole
BELOW = {"legend_position": "bottom", "legend_opts": {"margin": 0}}
LEGEND_CHARS = 50  # label characters two legend columns hold side by side in a 420-pixel plot


def legend_columns(labels, chars: int = LEGEND_CHARS) -> int:
    """Two legend columns where their widest labels fit side by side in `chars` characters, else one.
    Bokeh fills the first column, then the second: one strategy's "diffusion (confidence): tokens/s" beside
    the stars' label ran past a 1366-pixel page's column, where two strategies' shorter labels fit.

    Args: labels, the figure's element labels in order ('' = none, repeats drawn once).
    Returns 1 or 2."""
    shown = list(dict.fromkeys(label for label in labels if label))  # the legend merges repeated labels
    half = (len(shown) + 1) // 2
    widest = lambda part: max(map(len, part), default=0)  # noqa: E731
    return 2 if widest(shown[:half]) + widest(shown[half:]) <= chars else 1


def short_stars(plot):
    """`plot` (a HoloViews overlay) with its sweet-spot stars named SHORT_SWEET_SPOT."""
    import holoviews as hv

    return plot.map(lambda el: el.relabel(SHORT_SWEET_SPOT) if str(el.label).startswith("sweet spot") else el,
                    [hv.Scatter])
