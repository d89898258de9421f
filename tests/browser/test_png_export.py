"""Figures as PNG, drawn by headless Chromium (explorer/plots.save_plot, the Sweep tab's and the downloads'
PNG export): a real PNG of a quality-vs-speed plot, of a HoloViews curve and of a Bokeh figure."""
from __future__ import annotations

import pandas as pd
import pytest

from explorer.dashboard import downloads
from explorer.plots import chromium_path

PNG = b"\x89PNG\r\n\x1a\n"


def _curve():
    from explorer.plots import _hv

    return _hv().Curve(([1, 2, 3], [3, 1, 2]), "steps", "quality").opts(title="a test curve")


def test_png_export_with_headless_chromium(tmp_path):
    from explorer.plots import quality_speed_plot, save_plot

    if chromium_path() is None:
        pytest.skip("no Chromium installed")
    summary = pd.DataFrame({"sampler": "diffusion", "steps": [1, 2, 4], "strategy": "confidence",
                            "pattern_quality_mean": [0.2, 0.6, 0.9], "pattern_quality_std": [0.1, 0.1, 0.05],
                            "tokens_per_s_mean": [300.0, 150.0, 75.0]})
    path = save_plot(quality_speed_plot(summary, "pattern_quality"), tmp_path / "q.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


@pytest.mark.skipif(chromium_path() is None, reason="no chromium for PNG export")
def test_plot_png():
    pytest.importorskip("playwright.sync_api")
    from bokeh.plotting import figure

    assert downloads.plot_png(_curve()).startswith(PNG)
    p = figure(title="bokeh figure", width=300, height=200)
    p.line([1, 2], [1, 2])
    assert downloads.plot_png(p).startswith(PNG)
