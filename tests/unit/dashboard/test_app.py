"""create_app outside a server (a script, a notebook): the model loads and the first run happens in the
background, on the session's worker threads."""
from __future__ import annotations

import time

import pytest

from tests.support.dashboard import explore


@pytest.mark.slow
def test_create_app_outside_a_server_loads_in_the_background(checkpoints):
    from explorer.dashboard import create_app

    template = create_app(checkpoint="tiny", device="cpu")
    state = template.explorer_state
    try:
        deadline = time.monotonic() + 120
        while explore(state).trajectory is None and not state.error and time.monotonic() < deadline:
            time.sleep(0.05)  # loading, then the auto-run, on worker threads
        import panel as pn
        assert state.error == "" and state.model_info.get("name") == "tiny" and explore(state).trajectory is not None, (
            state.status, state.model_info, pn.state.curdoc, state.dispatch)
    finally:
        state.close()
