"""The tiny-checkpoint dashboard served in this process (`serve_tiny`): per test as tests/browser/conftest.py's
`served`, or once for a whole browser test module, so that the server, its checkpoints and their loaded
models (and so the process-wide caches keyed by them) are made once while each test's pages are still their
own sessions. `sessions_of_this_test` ends the sessions a test opened when it ends, as the per-test server's
end did: a page closed leaves its session running until Bokeh finds it unused, seconds later, and its
background work (a sweep, a run) would take the next test's CPU meanwhile."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.support.dashboard import save_tiny_checkpoints
from tests.support.serving import serve_in_process


@contextlib.contextmanager
def serve_tiny(directory: Path, build=None, auto_sweep: bool = False, **env: str):
    """The app over the tiny checkpoints saved in `directory` (MDLM_EXPLORER_CHECKPOINTS), Explore's quality
    sweep after each run off unless `auto_sweep` (as `serve --no-auto-sweep` has it: with the plot it draws,
    it is a third of every page's work, for tests that look elsewhere), `env` more MDLM_EXPLORER_* variables
    (e.g. AUTO_START_SECONDS="0.1"); `build`: makes one session's template (default: create_app on `tiny`,
    cpu). Yields (url, the sessions' states)."""
    from explorer.dashboard import create_app

    save_tiny_checkpoints(directory)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDLM_EXPLORER_CHECKPOINTS", str(directory))
        if not auto_sweep:
            mp.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
        for name, value in env.items():
            mp.setenv(f"MDLM_EXPLORER_{name}", value)
        with serve_in_process(build or (lambda: create_app(checkpoint="tiny", device="cpu"))) as served_app:
            yield served_app


@contextlib.contextmanager
def sessions_of_this_test(states: list):
    """Close the sessions opened (appended to `states`) while the block runs, when it ends."""
    first = len(states)
    try:
        yield
    finally:
        for state in states[first:]:
            state.close()
