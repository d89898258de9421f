"""Plots paint the same with BokehJS's per-paint CSS reads spared (ui/internals.lighter_paints): the same
link's Explore page, opened once as BokehJS paints it and once with the patch, draws the same heatmap and
confidence plot, pixel for pixel, in a real headless Chromium."""
from __future__ import annotations

from tests.support.browser import wait_finished

PLOTS = (".heatmap-view", ".confidence-view")  # axes, grids and titles: the visuals the patch answers for
# BokehJS's own read needs a plot's element (it throws on the bare prototype); the patch's answers ""
APPLIED_JS = """() => { const {VisualProperties} = Bokeh.require("core/visuals/visual")
  try { return VisualProperties.prototype._get_css_value("line-color") === "" } catch (e) { return false } }"""


def drawn(browser, url, states, patched: bool) -> dict[str, bytes]:
    """The plots of the link's page once its run has finished, as PNG bytes; the patch kept out of the
    page (marked applied before the page's own code runs) unless `patched`."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    if not patched:
        page.add_init_script("window.__mdlmLighterPaints = true")
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(url)
    wait_finished(page, states)
    page.wait_for_timeout(500)  # the last row's paint
    assert page.evaluate(APPLIED_JS) == patched
    shots = {sel: page.locator(sel).first.screenshot() for sel in PLOTS}
    assert problems == []
    page.close()
    return shots


def test_plots_paint_the_same_without_the_css_reads(browser, served):
    url, states = served
    link = f"{url}?seed=5&steps=12"
    plain = drawn(browser, link, states, patched=False)
    lighter = drawn(browser, link, states, patched=True)
    for sel in PLOTS:
        assert len(plain[sel]) > 2000 and plain[sel] == lighter[sel], sel
