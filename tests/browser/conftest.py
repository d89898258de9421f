"""The browser tests' served dashboard. Every test here is marked `browser` (tests/conftest.py) and drives
the test session's one Chromium (the `browser` fixture)."""
from __future__ import annotations

import pytest

from tests.support.module_app import serve_tiny


@pytest.fixture
def served(tmp_path, request):
    """The app on a free port, over tiny checkpoints, for one test; yields (url, the sessions' states).
    Explore's quality sweep after each run is off unless the test is marked `auto_sweep` (serve_tiny)."""
    with serve_tiny(tmp_path, auto_sweep=request.node.get_closest_marker("auto_sweep") is not None) as served_app:
        yield served_app
