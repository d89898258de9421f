"""Projector mode (?presentation=true) at a projector's 1024x768 and 1366x768: the sidebar starts
collapsed, the linked tab's main figure starts in the first screen, no view runs past the window's
right edge (nothing cut off, no sideways scroll), no table's key wraps, the Model tab's values have room
for a line of text, and no select clips its value. One link per tab, over the tests' tiny patterns
checkpoint; a screenshot of each tab goes to pytest's tmp directory."""
from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.support.browser import open_page, wait_until

# One link per tab (small sizes: the tiny checkpoint has 24 positions), and the container of the tab's main
# figure, whose first canvas is that figure (a Bokeh figure pane takes no css class of its own).
LINKS = {
    "Explore": ({"length": "24", "steps": "8", "sweep_metric": "pattern_quality"}, ".heatmap-view"),
    "Compare": ({"tab": "Compare", "steps": "8", "compare.preset": "strategies"}, ".compare-column"),
    "Inspect": ({"tab": "Inspect", "inspect.t": "0.5"}, ".inspect-fraction"),
    "Sweep": ({"tab": "Sweep", "sweep.steps_grid": "1,2,4", "sweep.samples": "2", "sweep.metric": "pattern_quality"},
              ".sweep-quality-plot"),
    "Model": ({"tab": "Model"}, ".model-page"),
}
VIEWPORTS = ((1024, 768), (1366, 768))

# The first laid-out container matching `sel` that holds a drawn canvas, and that canvas, searched through
# Panel's shadow roots: [container, canvas] or null.
FIND_JS = """(sel) => { const all = []; const walk = root => { root.querySelectorAll(sel).forEach(e => all.push(e));
  root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); }; walk(document);
  const canvas = root => { for (const e of root.querySelectorAll('*')) {
      if (e.tagName === 'CANVAS' && e.getBoundingClientRect().width > 50) return e;
      const inner = e.shadowRoot && canvas(e.shadowRoot); if (inner) return inner; } return null; };
  for (const e of all) { const r = e.getBoundingClientRect(); if (r.width < 50 || r.height < 50) continue;
    const c = (e.shadowRoot && canvas(e.shadowRoot)) || canvas(e); if (c) return [e, c]; }
  return null; }"""
# Where the figure lies, and whether the main area and the figure's container are wider than shown.
MEASURE_JS = f"""(sel) => {{ const found = ({FIND_JS})(sel); if (!found) return null; const [box, fig] = found;
  const r = fig.getBoundingClientRect(), main = document.querySelector('#main');
  const sidebar = document.querySelector('#sidebar');
  return {{top: r.top, bottom: r.bottom, left: r.left, right: r.right,
          main: [main.scrollWidth, main.clientWidth], box: [box.scrollWidth, box.clientWidth],
          page: [document.documentElement.scrollWidth, innerWidth],
          sidebar: [sidebar.className, sidebar.getBoundingClientRect().width]}}; }}"""

# What reads badly though nothing overflows, searched through Panel's shadow roots: a table's key (th) on more
# than one line; a Model-tab value cell (.meta-table td) under 20 em wide (at projector type beside the
# figures it had a third of the page, and its values wrapped every two or three words); a select whose
# value is wider than its box (a fixed width clipped "pattern_quality"). Returns the problems found.
READING_JS = """() => { const all = []; const walk = root => { root.querySelectorAll('th, td, select').forEach(e => all.push(e));
  root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); }; walk(document);
  const lines = e => { const r = document.createRange(); r.selectNodeContents(e); const tops = new Set();
    for (const q of r.getClientRects()) if (q.width > 0) tops.add(Math.round(q.top)); return tops.size; };
  const ctx = document.createElement('canvas').getContext('2d'), out = [];
  for (const e of all) { const b = e.getBoundingClientRect(), s = getComputedStyle(e);
    if (b.width === 0 || b.height === 0) continue;
    if (e.tagName === 'SELECT') { const opt = e.options[e.selectedIndex]; if (!opt) continue; ctx.font = s.font;
      const room = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight), need = ctx.measureText(opt.text).width;
      if (need > room + 1) out.push(`select ${opt.text}: ${need | 0} px in ${room | 0}`); }
    else if (e.tagName === 'TH' && lines(e) > 1) out.push(`th ${e.textContent.trim()} wraps`);
    else if (e.tagName === 'TD' && e.closest('.meta-table') && b.width < 20 * parseFloat(s.fontSize))
      out.push(`td ${e.textContent.trim().slice(0, 30)}: ${b.width | 0} px`); }
  return out; }"""


@pytest.mark.parametrize("width,height", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_projector_puts_each_tabs_figure_first(served, browser, width, height, tmp_path):
    url, states = served
    for tab, (query, figure) in LINKS.items():
        page, problems = open_page(browser, f"{url}?{urlencode({'presentation': 'true', **query})}")
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_function(f"() => !!({FIND_JS})({figure!r})", timeout=90_000, polling=250)
        wait_until(lambda: states and states[-1].model is not None and states[-1].presentation)
        page.wait_for_timeout(1500)  # late redraws (a sweep's plot, a run's last rows) settle the layout
        page.screenshot(path=str(tmp_path / f"{tab.lower()}-{width}x{height}.png"))
        seen = page.evaluate(MEASURE_JS, figure)
        where = f"{tab} at {width}x{height}: {seen}"
        assert "show" not in seen["sidebar"][0].split() and seen["sidebar"][1] < 5, where  # starts collapsed
        assert 0 <= seen["top"] < height, where  # the figure starts in the first screen
        assert seen["right"] <= width, where
        for part in ("main", "box", "page"):  # nothing wider than its place: no sideways scroll
            assert seen[part][0] <= seen[part][1], f"{part} overflows; {where}"
        assert page.evaluate(READING_JS) == [], where
        assert problems == [], where
        page.close()


def test_sidebar_opens_with_one_click(served, browser):
    """Collapsed is not gone: the header's toggle brings the knobs back."""
    url, states = served
    page, problems = open_page(browser, f"{url}?presentation=true")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.wait_for_function("() => typeof Bokeh !== 'undefined' && Bokeh.documents.length > 0", timeout=60_000)
    assert "show" not in page.locator("#sidebar").get_attribute("class").split()
    page.locator("#sidebar-toggle").click()
    page.wait_for_function("() => document.querySelector('#sidebar').getBoundingClientRect().width > 200")
    # Bootstrap marks it 'collapsing' while it slides open, then 'show': wait for the end of the slide
    wait_until(lambda: "show" in page.locator("#sidebar").get_attribute("class").split(), 10)


def test_sidebar_stays_open_without_presentation(served, browser):
    """At a desk the knobs are the point: the sidebar is open as before."""
    url, states = served
    page, problems = open_page(browser, url)
    page.wait_for_function("() => typeof Bokeh !== 'undefined' && Bokeh.documents.length > 0", timeout=60_000)
    assert "show" in page.locator("#sidebar").get_attribute("class").split()
