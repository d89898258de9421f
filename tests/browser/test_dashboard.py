"""The dashboard in a real headless Chromium (playwright): loads cleanly, the three views show, knobs
change the run (the Steps box, the heatmap hover, a bad template and "Fill only the blanks" on the same
page); at projector sizes no plot is cut off, and a screenshot of the whole page, curves drawn, goes to
pytest's tmp directory (tests never write into the repository: `python tools/tour.py --picture` retakes
the README's picture on the shipped model).

Needs Debian's Chromium and `pip install playwright`, as every test in tests/browser/ (tests/support/browser.py).
"""
from __future__ import annotations

import time

import pytest

from explorer.data.patterns import pattern_tokenizer
from tests.support.browser import (FRAME_JS, POLL_MS, TOOLTIP_JS, open_page, sample_text, wait_finished, wait_rows,
                                   wait_until)
from tests.support.dashboard import LENGTH, explore


def test_page_runs_and_knobs_change_the_run(browser, served):
    """One page: the sidebar is open, the views show, the sliders, the strategy and Run change the run, the
    Steps box takes an exact count, the heatmap's hover names the cell under the pointer, a bad template
    is a notice that keeps the previous result, and "Fill only the blanks" fits Length to a template."""
    url, states = served
    page, problems = open_page(browser, url)
    wait_rows(page, 33, states=states)  # auto-run on load: 32 steps + the start canvas
    # at a desk the knobs are the point: the sidebar is open (presentation starts it collapsed: test_projector)
    assert "show" in page.locator("#sidebar").get_attribute("class").split()
    for view in (".heatmap-view", ".text-view", ".confidence-view", ".quality-view"):
        box = page.locator(view).first.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 50, view
    first = wait_finished(page, states)
    assert len(first) == LENGTH and set(first) <= set(pattern_tokenizer().chars), first  # every position decided

    page.locator(".knob-steps .noUi-handle").first.focus()  # slider keyboard: one step per key
    state = states[-1]
    for expected in range(31, 27, -1):
        # one key at a time, each acknowledged by the server: a burst of presses can be coalesced
        # differently by a loaded machine, which is not what this test is about
        page.keyboard.press("ArrowLeft")
        wait_until(lambda: state.steps == expected)
    wait_rows(page, 29, states=states)
    assert states[-1].steps == 28 and explore(states[-1]).frames.n_rows == 29

    page.locator(".knob-strategy select").select_option("left_to_right")
    wait_until(lambda: state.strategy == "left_to_right")
    page.locator(".knob-temperature .noUi-handle").first.focus()
    for i in range(1, 5):  # 1.0 -> 0.8 in steps of 0.05, each press acknowledged
        page.keyboard.press("ArrowLeft")
        wait_until(lambda: state.temperature == pytest.approx(1.0 - 0.05 * i))
    runs = explore(state).run_id
    page.locator(".knob-run button").first.click()
    wait_until(lambda: explore(state).run_id > runs and explore(state).trajectory is not None)
    config = explore(state).trajectory.config
    assert (config.strategy, config.temperature, config.steps) == ("left_to_right", pytest.approx(0.8), 28)
    wait_rows(page, 29, states=states)
    assert wait_finished(page, states) != first

    # The Steps slider is linear 1-256, hard to stop on 64; the box beside it takes the number.
    box = page.locator(".knob-steps-exact input").first
    box.fill("6")
    box.press("Enter")
    wait_until(lambda: states[-1].steps == 6)
    wait_rows(page, 7, states=states)
    assert explore(states[-1]).trajectory.config.steps == 6
    before = wait_finished(page, states)
    hover_names_each_cell(page, explore(states[-1]).frames)

    # A template the model cannot write is a notice naming the character; the previous result stays.
    editor = page.locator(".template-editor textarea").first
    editor.fill("AB zz█")
    editor.press("Tab")  # the text area commits its value on blur
    notice = page.locator(".error-notice").get_by_text("does not know")  # text inside the shadow DOM
    notice.wait_for(state="visible", timeout=30_000)
    assert "'z'" in notice.inner_text()
    assert sample_text(page) == before

    # "Fill only the blanks" sets Length to the template's length, slider and box included (set inside the
    # click's own handling, Panel's link to the throttled slider raised and the page kept the old Length)
    editor.fill("AB[___]C")
    editor.press("Tab")
    wait_until(lambda: state.template == "AB[___]C" and not explore(state).running)
    page.get_by_text("Fill only the blanks").click()
    wait_until(lambda: state.length == 8)
    wait_until(lambda: page.locator(".knob-length-exact input").input_value() == "8")
    wait_until(lambda: explore(state).trajectory is not None and explore(state).trajectory.final.shape[1] == 8)
    assert problems == []


def hover_names_each_cell(page, frames) -> None:
    """The hover read one step behind the drawn cells (the page had row 0 twice in its cells source): each
    hovered cell of two columns must report its own position, step, state and commit."""
    from explorer.dashboard.frames import STATES
    from explorer.dashboard.ui.heatmap import display_glyphs

    left, top, width, height, x0, x1, y0, y1 = page.evaluate(FRAME_JS)
    for x in (2, LENGTH // 2):
        for step in range(frames.n_rows):
            page.mouse.move(left + (x - x0) / (x1 - x0) * width, top + (step - y1) / (y0 - y1) * height)
            expected = f"{step}: {STATES[frames.state[step][x]]}"
            page.wait_for_function(f"() => ({TOOLTIP_JS})()[1] === {expected!r}", timeout=5_000)  # each frame: a hover answers fast
            position, _, _, committed = page.evaluate(TOOLTIP_JS)
            assert position == f"{x}: {display_glyphs(frames.chars(step))[x]} (id {frames.tokens[step][x]})"
            at = frames.committed_at[step][x]
            assert committed.startswith(f"{at}," if at >= 0 else "–,")


# Every drawn canvas's horizontal extent, and the widths the page can show (its viewport, its scrollable width).
CANVASES_JS = """() => { const out = []; const walk = root => { for (const el of root.querySelectorAll('*')) {
  if (el.shadowRoot) walk(el.shadowRoot);
  if (el.tagName === 'CANVAS') { const r = el.getBoundingClientRect(); if (r.width > 40 && r.height > 40) out.push([r.left, r.right]); }
  if (['BUTTON', 'SELECT', 'INPUT'].includes(el.tagName)) { const r = el.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) controls.push([r.left, r.right, el.tagName + ' ' + (el.textContent || el.value || '').trim()]); } } };
  const controls = []; walk(document); return [window.innerWidth, document.documentElement.scrollWidth, out, controls]; }"""


# The width (px) of the widest canvas in the heatmap view (shadow DOMs included).
HEATMAP_WIDTH_JS = """() => { let w = 0; const walk = (root, inside) => { for (const el of root.querySelectorAll('*')) {
  const here = inside || el.classList.contains('heatmap-view');
  if (here && el.tagName === 'CANVAS') w = Math.max(w, el.getBoundingClientRect().width);
  if (el.shadowRoot) walk(el.shadowRoot, here); } }; walk(document, false); return w; }"""


# Font sizes (px) of the sidebar's Run button, checkpoint select and seed input, and of two segmented
# controls beside the plots, read inside their shadow DOMs.
SIDEBAR_SIZES_JS = """() => { const size = (cls, tag) => { let found = 0; const walk = root => {
  for (const el of root.querySelectorAll('*')) { if (el.shadowRoot) walk(el.shadowRoot);
    if (!found && String(el.className).includes(cls)) { const t = (el.shadowRoot || el).querySelector(tag);
      if (t) found = parseFloat(getComputedStyle(t).fontSize); } } };
  walk(document); return found; };
  return [size('knob-run', 'button'), size('knob-checkpoint', 'select'), size('knob-seed', 'input'),
          size('quality-x', 'button'), size('confidence-mode', 'button')]; }"""



def settled(page, js: str, reads: int = 3, gap_ms: int = 100, timeout: float = 10.0):
    """`js`'s value once it has stayed the same for `reads` reads `gap_ms` apart (Bokeh lays the plots
    out again over a few frames after the window changes; a fixed 700 ms wait cost 5 s per test)."""
    deadline, same, last = time.monotonic() + timeout, 0, None
    while same < reads and time.monotonic() < deadline:
        page.wait_for_timeout(gap_ms)
        value = page.evaluate(js)
        same, last = (same + 1 if value == last else 1), value
    return last


@pytest.mark.auto_sweep  # its plot is one of those checked
def test_no_plot_is_cut_off_at_classroom_screen_sizes(browser, served, tmp_path):
    """At 1024x768 the Explore tab's right column (confidence, quality) ran past the
    window's edge with no scroll, and presentation mode left the sidebar's values and buttons small. At
    each projector size, normal and in presentation mode, every plot lies inside the page's width. First,
    at a desk's size, a screenshot of the whole page with every plot drawn (pytest's tmp directory)."""
    url, states = served
    page, problems = open_page(browser, url)
    wait_rows(page, 33, states=states)
    wait_until(lambda: explore(states[-1]).quality.result is not None)
    page.locator(".quality-view .bk-Canvas, .quality-view canvas").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)  # Bokeh paints on the next frames
    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    sizes = {}
    for presentation in (False, True):
        if presentation:
            page.locator(".knob-presentation").get_by_text("Presentation (large type)").click()  # the label
            wait_until(lambda: states[-1].presentation)
            page.wait_for_function(f"() => ({SIDEBAR_SIZES_JS})()[0] > {sizes[False][0]}",
                                   timeout=60_000, polling=POLL_MS)
        sizes[presentation] = page.evaluate(SIDEBAR_SIZES_JS)
        for width, height in ((1024, 768), (1280, 720), (1366, 768)):  # projectors' sizes; wider only has more room
            page.set_viewport_size({"width": width, "height": height})
            inner, scrollable, canvases, controls = settled(page, CANVASES_JS)
            assert len(canvases) >= 3, (width, presentation)  # heatmap, confidence, quality at least
            cut = [box for box in canvases if box[1] > max(inner, scrollable) + 1 or box[0] < -1]
            assert not cut, f"{width}x{height}, presentation={presentation}: plots cut off at {cut} (page {inner} px)"
            cut = [box for box in controls if box[1] > max(inner, scrollable) + 1]  # buttons, inputs too
            assert not cut, f"{width}x{height}, presentation={presentation}: controls cut off: {cut}"
            # the heatmap keeps its column's minimum width (the confidence column wraps under it): squeezed
            # to 270 px at 1024 in presentation mode, its title was cut at the figure's edge
            heatmap = page.evaluate(HEATMAP_WIDTH_JS)
            assert heatmap >= 440, f"{width}x{height}, presentation={presentation}: heatmap {heatmap} px wide"
    # presentation mode enlarges the widget values, buttons and segmented controls too (shadow DOMs)
    assert all(big >= 1.4 * small for big, small in zip(sizes[True], sizes[False])), sizes
    assert problems == []
