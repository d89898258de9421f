"""The header's `data-settled`: which tabs have finished what a link opening them starts (ui/header.py).
`python run.py rehearse` waits for it in the browser, so it must not name a tab while its work is still to
come: not before the model is loaded, not between a run's end and the quality sweep that follows it, not
for a tab that was never shown."""
from __future__ import annotations

import queue
import re
import threading

import pytest

from explorer.dashboard.app import create_app
from explorer.dashboard.session import Session
from explorer.dashboard.ui.header import header_html, tab_settled
from tests.support.dashboard import explore, threads_now, wait_for


class SerialDispatch:
    """A served session's dispatcher in miniature: callbacks run one after another on one thread, and a
    callback handed in by another callback runs after it (not inside it, as `call_now` would)."""

    def __init__(self):
        self._queue = queue.Queue()
        threading.Thread(target=self._loop, daemon=True).start()

    def __call__(self, callback):
        self._queue.put(callback)

    def _loop(self):
        while True:
            self._queue.get()()

    def wait_idle(self):
        done = threading.Event()
        self(done.set)
        assert done.wait(30)


def settled(header) -> list[str] | None:
    """The tabs the header line names as settled (None: the line has no data-settled)."""
    match = re.search(r'data-settled="([^"]*)"', header.object)
    return None if match is None else match.group(1).split()


def header_pane(app):
    """The header line's HTML pane in the page's template."""
    return [o for o in app.header.objects if getattr(o, "name", "") == "header"][0]


def find_tabs(app):
    import panel as pn

    return [o for o in app.main.objects if isinstance(o, pn.Tabs)][0]


def test_the_attribute_is_escaped_and_absent_without_a_model():
    assert "data-settled" not in header_html({}, "cpu", "loading model …")
    info = {"name": "m", "kind": "diffusion", "corpus": "c", "n_params": 1000}
    assert 'data-settled="Explore Model"' in header_html(info, "cpu", "", settled=("Explore", "Model"))
    assert 'data-settled="a&quot;b"' in header_html(info, "cpu", "", settled=('a"b',))


def test_on_a_projector_the_line_is_short_and_its_tooltip_whole():
    info = {"name": "m<x", "kind": "diffusion", "corpus": "c", "n_params": 1000, "nelbo_bits": 1.1, "nelbo_nats": 0.77}
    desk, short = header_html(info, "cpu", "ready"), header_html(info, "cpu", "ready", compact=True)
    assert "(diffusion, c)" in desk and "perplexity" in desk and 'title="' not in desk
    tip = re.search(r'title="([^"]*)"', short).group(1)
    assert tip == "m&lt;x (diffusion, c) · 1k params · NELBO 1.100 bits/char (0.770 nats, perplexity ≤ 2.16) · device cpu · ready"
    shown = short.split(">", 1)[1]
    assert "perplexity" not in shown and "(diffusion" not in shown and "NELBO 1.100 bits/char ·" in shown
    assert "white-space: nowrap" in short and "text-overflow: ellipsis" in short


@pytest.mark.slow
def test_explore_is_settled_only_once_its_run_and_the_sweep_after_it_are_done(checkpoints):
    dispatch = SerialDispatch()
    state = Session("tiny", "cpu", dispatch=dispatch, steps=4)
    app = create_app(state=state, autoload=False)
    ex = explore(state)
    ex.sweep_auto = True
    header = header_pane(app)
    seen = []  # (Explore named settled, its run and the sweep after it finished) at every redraw
    header.param.watch(lambda e: seen.append(("Explore" in (settled(header) or []),
                                                   ex.trajectory is not None and not ex.quality.running
                                                   and ex.quality.result is not None)), "object")
    assert settled(header) is None  # no model yet
    dispatch(state.load)
    wait_for(lambda: ex.quality.result is not None and not ex.quality.running, timeout=120,
             message=lambda: (f"no sweep: quality status {ex.quality.status!r}, error {ex.quality.error!r}, "
                              f"running {ex.quality.running}; session status {state.status!r}, error "
                              f"{state.error!r}; run shown {ex.trajectory is not None}, running {ex.running}\n"
                              + threads_now()))
    dispatch.wait_idle()
    dispatch.wait_idle()  # the re-read the last change asked for, then its redraw
    assert "Explore" in settled(header) and "Model" in settled(header)
    assert [done for named, done in seen if named] and all(done for named, done in seen if named), seen
    assert "Inspect" not in settled(header) and "Compare" not in settled(header)  # never shown: nothing done


def test_a_dispatched_change_of_the_status_and_the_work_going_on_redraws_the_line_once(checkpoints):
    """A run's start or end changes the status, the run shown and which tabs are settled in one callback:
    the line is redrawn once, at the callback's end, with all of it (it was redrawn at each change: six
    times a run). A change made outside a dispatched callback is drawn at once."""
    from collections import deque

    from bokeh.document import Document

    from explorer.dashboard.runtime.dispatch import run_in_order

    state = Session("tiny", "cpu", steps=4)
    app = create_app(state=state, autoload=False)
    header, ex = header_pane(app), explore(state)
    draws = []
    header.param.watch(lambda e: draws.append(e.new), "object")

    def start():
        state.status = "sampling 4 steps …"
        ex.running = True  # asks for the settled tabs to be read again
        state.status = "sampling 4 steps … still"

    run_in_order(Document(), deque([start]))
    assert len(draws) == 1 and "sampling 4 steps … still" in draws[0]
    state.status = "stopped"
    assert len(draws) == 2 and "stopped" in draws[-1]
    state.close()


@pytest.mark.slow
def test_a_tab_shown_is_settled_once_its_result_is_in(checkpoints):
    dispatch = SerialDispatch()
    state = Session("tiny", "cpu", dispatch=dispatch, steps=4)
    app = create_app(state=state, autoload=False)
    explore(state).param.update(auto_run=False, sweep_auto=False)
    header = header_pane(app)
    dispatch(state.load)
    wait_for(lambda: state.model is not None, timeout=60)
    sweep = state.tabs["Sweep"]
    sweep.note = "No AR checkpoint with this model's alphabet in checkpoints/: no AR baseline."
    assert not tab_settled("Sweep", sweep, state)  # a note is no result: the sweep is still to run
    tabs = find_tabs(app)
    dispatch(lambda: setattr(tabs, "active", list(state.tabs).index("Compare")))
    compare = state.tabs["Compare"]
    wait_for(lambda: compare.results and all(compare.results) and not compare.running, timeout=60)
    dispatch.wait_idle()
    dispatch.wait_idle()
    assert "Compare" in settled(header) and "Explore" not in settled(header)  # Explore ran nothing
    assert "Sweep" not in settled(header)
    state.close()
