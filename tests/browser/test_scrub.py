"""Scrubbing in a real browser (serve --scrub on; on by default with a GPU): dragging the temperature slider
re-samples while the handle moves, and the page shows the finished runs one after another (the header's
data-run, the number of the run it shows, climbs during the drag), not only the run of the released value.
The run shown at the end is the one of the slider's last value."""
from __future__ import annotations

from tests.support.browser import open_page, wait_until
from tests.support.dashboard import explore
from tests.support.module_app import serve_tiny



def run_number(page) -> str | None:
    """The number of the finished run the page's header shows (its line's data-run; None before one)."""
    line = page.locator(".dashboard-header .hdr[data-run]")
    return line.first.get_attribute("data-run") if line.count() else None


def test_a_drag_shows_finished_runs_while_the_handle_moves(browser, tmp_path):
    with serve_tiny(tmp_path, SCRUB="on") as (url, states):
        page, problems = open_page(browser, url)
        wait_until(lambda: states and explore(states[-1]).trajectory is not None
                   and run_number(page) is not None)
        session = states[-1]
        handle = page.locator(".knob-temperature .noUi-handle").first
        track = page.locator(".knob-temperature .noUi-base").first.bounding_box()
        box = handle.bounding_box()
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + box["width"] / 2, y)
        page.mouse.down()
        seen = set()
        for i in range(1, 21):  # two seconds of a slow drag towards the left end
            page.mouse.move(box["x"] + box["width"] / 2 - i * (box["x"] - track["x"]) / 20, y)
            page.wait_for_timeout(100)
            seen.add(run_number(page))
        page.mouse.up()
        assert len(seen) >= 3, f"the page showed runs {sorted(seen)} while the handle moved"
        e = explore(session)
        wait_until(lambda: not e.running and e.trajectory is not None
                   and e.trajectory.config.temperature == session.temperature)
        assert session.temperature < 0.5  # the handle ended near the left end
        assert not problems, problems
        page.close()
