"""What the real-browser tests share: the Chromium they drive (conftest.py starts one per test session),
opening a page with its console errors collected, waiting for the dashboard's runs to reach the page, and
the scripts that read Bokeh's document in the page.

Needs Debian's Chromium: its headless shell (package `chromium-headless-shell`; `.ci/run` installs it) or
its browser (`chromium`) and `pip install playwright`
(`playwright install` is not needed, and cannot download browsers: nothing outside is reached).
"""
from __future__ import annotations

from explorer.cli.rehearse import CHROMIUM_ARGS  # noqa: F401  (re-exported: conftest launches with it)
from explorer.plots import chromium_path
from tests.support.dashboard import explore, wait_for

# Debian's headless shell where installed, else its chromium: as the dashboard's PNG export
# and rehearse take (explorer.plots.CHROMIUMS)
CHROMIUM = chromium_path()
INSTALL = "apt-get install -y chromium-headless-shell (or chromium)"
# How often page.wait_for_function checks its condition, in ms. Playwright's default checks it on every
# animation frame, which keeps a waiting page drawing 60 frames a second: a tenth of a core per page
# while it waits, against a fiftieth at this interval, and waits are much of a browser test's time.
POLL_MS = 100

# In a page: how many Bokeh views it holds, which is what Bokeh lays out after each change (its JS
# document keeps removed models listed, so the model count does not tell).
BOKEH_VIEWS_JS = """(() => { let n = 0; const walk = v => { n++; for (const c of (v.child_views || [])) walk(c); };
                           for (const v of Bokeh.index.roots) walk(v); return n; })()"""

# Heatmap rows and text as the browser has them (Bokeh's document, the text pane's DOM).
ROWS_JS = """() => { for (const doc of Bokeh.documents) {
  const m = doc.get_model_by_name('trajectory-cells'); if (m) { let n = 0;
  for (const v of m.data.y) n = Math.max(n, v + 1); return n; } } return 0; }"""

# The live heatmap's plot frame in page pixels and its axis ranges, and the hover tooltip's values.
FRAME_JS = """() => { let found = null; const walk = v => {
  if (v.model && v.model.title && v.model.title.text === 'Trajectory: step × position' && v.frame) found = v;
  for (const c of (v.child_views || [])) walk(c); };
  for (const r of Bokeh.index.roots) walk(r);
  const f = found.frame, c = found.canvas_view.el.getBoundingClientRect(), m = found.model;
  return [c.left + f.bbox.left, c.top + f.bbox.top, f.bbox.width, f.bbox.height,
          m.x_range.start, m.x_range.end, m.y_range.start, m.y_range.end]; }"""
TOOLTIP_JS = """() => { const out = []; const walk = root => { for (const el of root.querySelectorAll('*')) {
  if (el.shadowRoot) walk(el.shadowRoot);
  if (String(el.className).includes('bk-tooltip-row-value')) out.push(el.textContent.trim()); } };
  walk(document); return out; }"""


def open_page(browser, url):
    """A new page (its own browser context) at `url`, 1600x1000; returns (page, the console errors and
    page errors it gives, a list that grows)."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(url)
    return page, problems


def open_tab_after_explore(browser, url, states, title: str):
    """Open the app, let the Explore tab's first run (and its sweep, if on: its plot, drawn while another
    tab is shown, would fetch a CDN file) finish, then click tab `title`. Failed requests count as problems."""
    page, problems = open_page(browser, url)
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))

    def settled():
        ex = explore(states[-1])
        return ex.trajectory is not None and not ex.running and not (ex.sweep_auto and (
            ex.quality.result is None or ex.quality.running))
    wait_until(lambda: states and settled())
    page.locator(".bk-tab").get_by_text(title, exact=True).click()
    return page, problems


def wait_rows(page, n: int, timeout: float = 60_000, states=()) -> None:
    """Until the page's heatmap has `n` rows (`timeout` in ms); on failure, says what the sessions
    `states` were doing."""
    try:
        page.wait_for_function(f"() => ({ROWS_JS})() === {n}", timeout=timeout, polling=POLL_MS)
    except Exception as e:  # say what the server side was doing
        seen = page.evaluate(ROWS_JS)
        info = [(s.status, s.error, explore(s).n_rows, explore(s).running) for s in states]
        raise AssertionError(f"page shows {seen} heatmap rows, not {n}; sessions: {info}") from e


def wait_until(condition, timeout: float = 60.0) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    wait_for(condition, timeout, interval=0.1, message="timed out waiting for the dashboard")


def wait_finished(page, states) -> str:
    """Until the newest session's run has ended and the page shows its final text; returns that text."""
    def shown():  # read together each time: a final text read once could be a superseded run's
        ex = states[-1] if states else None
        return (ex is not None and not explore(ex).running and explore(ex).trajectory is not None
                and sample_text(page) == explore(ex).frames.text())
    wait_until(shown)
    return explore(states[-1]).frames.text()


def sample_text(page) -> str:
    """The sample text the page shows."""
    return page.locator(".sample-text .canvas").inner_text()
