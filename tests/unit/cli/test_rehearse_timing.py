"""How `python run.py rehearse` times pages opened at once (rehearse.watch), without a browser: each page's
seconds are from its opening to its result, also when another page's result came first and finishing
that page (its quiet wait, layout check and screenshot) takes seconds. Pages stand in for playwright's,
showing their result at a given time."""
from __future__ import annotations

import time

from explorer.cli import rehearse

FINISHING_S = 1.0  # what finishing one page takes here (a layout check waits up to DRAW_S in a browser)


class Handle:
    """A page that shows the Sweep tab settled from `settles_at` (time.monotonic) on."""

    def __init__(self, settles_at: float):
        self.settles_at = settles_at

    def evaluate(self, script, *args):
        settled = "Sweep" if time.monotonic() >= self.settles_at else None
        return {"settled": settled, "status": "loaded" if settled else "loading", "notices": [], "tab": "Sweep"}

    def wait_for_timeout(self, ms):
        time.sleep(ms / 1000)

    def is_closed(self):
        return False


def test_pages_opened_at_once_are_each_timed_to_their_own_result(monkeypatch, tmp_path):
    monkeypatch.setattr(rehearse, "QUIET_S", 0.0)
    monkeypatch.setattr(rehearse, "check_layout", lambda page, query: time.sleep(FINISHING_S))
    monkeypatch.setattr(rehearse, "finish", lambda page, shots: setattr(page, "handle", None))
    start = time.monotonic()
    settle = [0.3, 0.6, 0.9]  # seconds after opening
    pages = [rehearse.Page(f"at once {i + 1}", handle=Handle(start + s), started=start, changed=start)
             for i, s in enumerate(settle)]
    rehearse.watch(pages, "Sweep", timeout=30, shots=[tmp_path / f"{i}.png" for i in range(3)])
    for page, s in zip(pages, settle):
        assert page.outcome == "completed"
        # at most a poll late; finishing the pages before it (FINISHING_S each) is not counted
        assert s <= page.seconds <= s + rehearse.POLL_S + 0.4, [p.seconds for p in pages]


def test_a_page_that_never_shows_its_result_is_hung_and_the_others_still_complete(monkeypatch, tmp_path):
    monkeypatch.setattr(rehearse, "QUIET_S", 0.0)
    monkeypatch.setattr(rehearse, "check_layout", lambda page, query: None)
    monkeypatch.setattr(rehearse, "finish", lambda page, shots: setattr(page, "handle", None))
    start = time.monotonic()
    pages = [rehearse.Page("at once 1", handle=Handle(start + 0.2), started=start, changed=start),
             rehearse.Page("at once 2", handle=Handle(float("inf")), started=start, changed=start)]
    rehearse.watch(pages, "Sweep", timeout=1.0, shots=[tmp_path / "1.png", tmp_path / "2.png"])
    assert [p.outcome for p in pages] == ["completed", "hung"]
    assert pages[0].seconds is not None and pages[1].seconds is None
    assert pages[1].unchanged >= 0.9  # its header said 'loading' from the start
