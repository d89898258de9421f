"""The browser tests' served dashboard. Every test here is marked `browser` (tests/conftest.py) and drives
the test session's one Chromium (the `browser` fixture)."""
from __future__ import annotations

import pytest

from tests.support.dashboard import save_tiny_checkpoints
from tests.support.serving import serve_in_process


@pytest.fixture
def served(tmp_path, monkeypatch, request):
    """The app on a free port, over tiny checkpoints; yields (url, the sessions' states). Explore's
    quality sweep after each run is off, as `serve --no-auto-sweep` has it, unless the test is marked
    `auto_sweep`: with the plot it draws, it is a third of every page's work (0.7 of 2.1 s per page
    opened), for tests that look elsewhere."""
    from explorer.dashboard import create_app

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path)))
    if request.node.get_closest_marker("auto_sweep") is None:
        monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    with serve_in_process(lambda: create_app(checkpoint="tiny", device="cpu")) as served_app:
        yield served_app
