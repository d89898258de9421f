"""The projector layout check: in a page opened at a projector's size (1024x768, 1366x768) with
presentation=true, does the linked figure lie whole in the first screen, and does any view run past the
window or read badly (a table key on two lines, a Compare title on two lines, a select clipping its value)?

One place for the browser tests (tests/browser/test_projector.py) and `python run.py rehearse`, which
checks every page it opens. The scripts run in the page through playwright's `page.evaluate`; nothing here
imports playwright or Panel.
"""
from __future__ import annotations

from urllib.parse import parse_qsl

# Each tab's main figure: the container(s) that hold it. A container's first drawn canvas is the figure (a
# Bokeh pane takes no css class of its own); a container without one (Inspect's rows of masked text) is the
# figure itself. Where several match (Compare's columns), the figure is all of them together.
FIGURES = {
    "Explore": ".heatmap-view",
    "Compare": ".compare-column",  # each column's first canvas: its heatmap
    "Inspect": ".inspect-fraction",
    "Sweep": ".sweep-quality-plot",
    "Model": ".model-page",
}
SEVERAL = ".inspect-several-box"  # Inspect's several texts and t, one row each: first when a link asks for them
INSPECT_FIRST = {"predictions": ".inspect-predictions", "top-p": ".inspect-nucleus"}  # inspect.first=<name>
SAMPLES = ".explore-samples"  # Explore's texts of several seeds or prompts: first when a link asks for them


def figure_selector(query: str) -> str:
    """The css selector of the main figure that a link's `query` (without '?') opens: the view its lesson
    figure names (lesson_target), else the tab's, or the figure the link puts first (several samples or
    prompts in Explore; several texts and t, or the text's predictions or top-p figure in Inspect)."""
    q = dict(parse_qsl(query))
    target = lesson_target(q)
    if target:
        return target
    tab = q.get("tab", "Explore")
    if tab == "Inspect" and ("inspect.ts" in q or "inspect.texts" in q):
        return SEVERAL
    if tab == "Inspect" and q.get("inspect.first") in INSPECT_FIRST:
        return INSPECT_FIRST[q["inspect.first"]]
    if tab == "Explore" and ("samples" in q or "prompts" in q):
        return SAMPLES
    return FIGURES.get(tab, FIGURES["Explore"])


def lesson_target(q: dict) -> str:
    """The view a lesson figure's link names (lessons.Figure.target), from the link's `lesson` and `figure`
    keys; '' when it names none, or names its tab's main figure."""
    from .lessons import find_figure

    fig = find_figure(q.get("lesson"), q.get("figure", ""))
    return fig.target if fig is not None else ""


def demand(fig) -> tuple[int, int, int]:
    """How hard a lesson figure's view is to fit on a projector: its columns side by side (Compare), then
    its rows one under another (Inspect's t x texts, Explore's prompts or samples), then the length of its
    link. `max(lesson.figures, key=demand)` is the lesson's most demanding figure: the one the projector
    test opens per lesson, and benchmarks/bench_paints.py too."""
    q = dict(parse_qsl(fig.query))
    columns = len(q.get("compare.columns", "a|b").split("|")) if fig.tab == "Compare" else 1
    rows = {"Inspect": len(q.get("inspect.ts", "0").split(",")) * len(q.get("inspect.texts", "").split("|")),
            "Explore": max(len(q.get("prompts", "").split("|")), int(q.get("samples", "1")))}.get(fig.tab, 1)
    return columns, rows, len(fig.query)


# The figure's parts for a selector, searched through Panel's shadow roots: for each laid-out container that
# matches, its first drawn canvas, or the container itself when it holds none.
_PARTS_JS = """(sel) => { const all = []; const walk = root => { root.querySelectorAll(sel).forEach(e => all.push(e));
  root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); }; walk(document);
  const canvas = root => { for (const e of root.querySelectorAll('*')) {
      if (e.tagName === 'CANVAS' && e.getBoundingClientRect().width > 50) return e;
      const inner = e.shadowRoot && canvas(e.shadowRoot); if (inner) return inner; } return null; };
  const parts = [];
  for (const e of all) { const r = e.getBoundingClientRect(); if (r.width < 50 || r.height < 20) continue;
    const c = (e.shadowRoot && canvas(e.shadowRoot)) || canvas(e);
    if (c) parts.push([e, c]); else if ((e.shadowRoot || e).textContent.trim()) parts.push([e, e]); }
  return parts; }"""

# A lesson link's page brings its figure into view once drawn (ui/lesson.py puts it in the lesson bar, with
# SELECTOR the figure's): where the figure lies below the first screen (Explore's quality plot, Inspect's
# training ratios), the lesson's reader saw another view and had to find it. It brings the whole figure to
# the middle of the window, again while the views above it are still filling in (for 6 s from when it is
# first drawn), and never once the reader scrolled, clicked or pressed a key.
SCROLL_JS = f"""<script>(function () {{
  const sel = SELECTOR, parts = {_PARTS_JS};
  const start = Date.now(); let touched = false, drawn = 0;
  const stop = () => {{ touched = true; }};
  for (const ev of ["wheel", "touchmove", "keydown", "mousedown"])
    window.addEventListener(ev, stop, {{once: true, passive: true, capture: true}});
  const tick = () => {{
    if (touched || Date.now() - start > 60000) return;
    const found = parts(sel);
    if (found.length) {{
      const [box, fig] = found[0], r = fig.getBoundingClientRect();
      // centred where it fits (aligned to an edge, it ended a fraction of a pixel past it), else its top
      if (r.top < 0 || r.bottom > innerHeight)
        box.scrollIntoView({{block: box.getBoundingClientRect().height < innerHeight - 120 ? "center" : "start"}});
      drawn = drawn || Date.now();
      if (Date.now() - drawn > 6000) return;
    }}
    setTimeout(tick, 400);
  }};
  setTimeout(tick, 400);
}})();</script>"""

# Whether the figure for a selector is drawn yet (page.wait_for_function(DRAWN_JS, arg=selector)).
DRAWN_JS = f"(sel) => ({_PARTS_JS})(sel).length > 0"

# What reads badly though nothing overflows: a table's key (th) or a Compare title on more than one line; a
# Model-tab value cell (.meta-table td) under 20 em wide (beside the figures its values wrapped every two or
# three words); a select whose value is wider than its box; a download button under 18 px or a data table
# under 16 px (the projector's type, which Panel's own CSS had overridden). A list of problems.
_READING_JS = """() => { const all = []; const walk = root => {
    root.querySelectorAll('th, td, select, .compare-title, .download-button, table.panel-df').forEach(e => all.push(e));
    root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); }; walk(document);
  const lines = e => { const r = document.createRange(); r.selectNodeContents(e); let n = 0, bottom = -Infinity;
    // a line starts where a box begins below the last line's bottom: boxes of one line in smaller type
    // (a key's note) begin lower than its larger words but overlap them
    const boxes = [...r.getClientRects()].filter(q => q.width > 0).sort((a, b) => a.top - b.top);
    for (const q of boxes) { if (q.top >= bottom - 1) { n += 1; bottom = q.bottom; } else bottom = Math.max(bottom, q.bottom); }
    return n; };
  const ctx = document.createElement('canvas').getContext('2d'), out = [];
  for (const e of all) { const b = e.getBoundingClientRect(), s = getComputedStyle(e);
    if (b.width === 0 || b.height === 0) continue;
    if (e.tagName === 'SELECT') { const opt = e.options[e.selectedIndex]; if (!opt) continue; ctx.font = s.font;
      const room = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight), need = ctx.measureText(opt.text).width;
      if (need > room + 1) out.push(`select ${opt.text}: ${need | 0} px in ${room | 0}`); }
    else if (e.tagName === 'TH' && lines(e) > 1) out.push(`table key ${e.textContent.trim()} wraps`);
    else if (e.classList.contains('compare-title')) {
      const text = e.shadowRoot ? [...e.shadowRoot.children].find(c => c.textContent.trim()) : e;
      if (text && lines(text) > 1) out.push(`Compare title ${text.textContent.trim()} wraps`); }
    else if (e.tagName === 'TD' && e.closest('.meta-table') && b.width < 20 * parseFloat(s.fontSize))
      out.push(`value ${e.textContent.trim().slice(0, 30)}: ${b.width | 0} px wide`);
    else if (e.classList.contains('download-button')) { const button = (e.shadowRoot || e).querySelector('button');
      const px = button ? parseFloat(getComputedStyle(button).fontSize) : 18;
      if (px < 18) out.push(`download button ${button.textContent.trim()} in ${px} px type`); }
    else if (e.tagName === 'TABLE' && parseFloat(s.fontSize) < 16) out.push(`a table in ${s.fontSize} type`); }
  return out; }"""

# Canvases, buttons, selects and inputs that lie partly outside the page (clipped by a container: no
# scroll reaches them), one line each.
_CUT_JS = """() => { const out = [], right = Math.max(innerWidth, document.documentElement.scrollWidth) + 1;
  const walk = root => { for (const el of root.querySelectorAll('*')) { if (el.shadowRoot) walk(el.shadowRoot);
    const canvas = el.tagName === 'CANVAS', control = ['BUTTON', 'SELECT', 'INPUT'].includes(el.tagName);
    if (!canvas && !control) continue;
    const r = el.getBoundingClientRect();
    if ((canvas && (r.width <= 40 || r.height <= 40)) || r.width === 0 || r.height === 0) continue;
    if (r.right > right || r.left < -1) out.push(`${canvas ? 'a plot' : el.tagName.toLowerCase() + ' ' +
      (el.textContent || el.value || '').trim().slice(0, 30)} is cut off at ${r.left | 0}-${r.right | 0} px`); } };
  walk(document); return out; }"""

# Where the figure lies (the box around its parts), how wide the main area and the page are against what
# they show, which figure containers are wider than shown, what reads badly, and the sidebar's class and
# width; null when no figure is drawn.
MEASURE_JS = f"""(sel) => {{ const parts = ({_PARTS_JS})(sel); if (!parts.length) return null;
  const rs = parts.map(([box, fig]) => fig.getBoundingClientRect());
  const main = document.querySelector('#main'), sidebar = document.querySelector('#sidebar');
  return {{parts: parts.length, top: Math.min(...rs.map(r => r.top)), bottom: Math.max(...rs.map(r => r.bottom)),
          left: Math.min(...rs.map(r => r.left)), right: Math.max(...rs.map(r => r.right)),
          main: main ? [main.scrollWidth, main.clientWidth] : [0, 0],
          page: [document.documentElement.scrollWidth, innerWidth],
          boxes: parts.filter(([box]) => box.scrollWidth > box.clientWidth + 1).map(([box]) => [box.scrollWidth, box.clientWidth]),
          reading: ({_READING_JS})(), cut: ({_CUT_JS})(),
          sidebar: sidebar ? [sidebar.className, sidebar.getBoundingClientRect().width] : ['', 0]}}; }}"""


def judge(seen: dict | None, width: int, height: int) -> dict:
    """What MEASURE_JS saw in a `width` x `height` window, judged: {"drawn": a figure was found, "first_screen": the figure lies whole in
    the first screen, "overflow": some view runs past its place or reads badly, "problems": one line each}."""
    if seen is None:
        return {"drawn": False, "first_screen": False, "overflow": False, "problems": ["the figure is not drawn"]}
    where, wide = [], []
    if not (0 <= seen["top"] and seen["bottom"] <= height):
        where.append(f"the figure spans {seen['top']:.0f}-{seen['bottom']:.0f} px, not inside the first screen's "
                     f"0-{height} (all of its {seen['parts']} part(s))")
    if seen["left"] < 0 or seen["right"] > width:
        where.append(f"the figure spans {seen['left']:.0f}-{seen['right']:.0f} px across a {width} px window")
    for part in ("main", "page"):
        scroll, shown = seen[part]
        if scroll > shown:
            wide.append(f"the {part} area is {scroll} px wide in {shown} (scrolls sideways)")
    wide += [f"a figure container is {scroll} px wide in {shown}" for scroll, shown in seen["boxes"]]
    wide += seen["reading"] + seen["cut"]
    return {"drawn": True, "first_screen": not where, "overflow": bool(wide), "problems": where + wide}


def check(page, query: str, width: int, height: int) -> dict:
    """judge() of the figure that a link's `query` opens, measured in a playwright `page` of `width` x `height`."""
    return judge(page.evaluate(MEASURE_JS, figure_selector(query)), width, height)


def verdict(result: dict | None) -> str:
    """A check's result for a report's column: ok, off-screen, overflow, both, not drawn, waits for Run
    (not drawn because the request is over the limit a link starts by itself) ('-': unchecked)."""
    if result is None:
        return "-"
    if result.get("waiting"):
        return "waits for Run"
    if not result["drawn"]:
        return "not drawn"
    bad = [word for word, failed in (("off-screen", not result["first_screen"]), ("overflow", result["overflow"]))
           if failed]
    return ", ".join(bad) or "ok"
