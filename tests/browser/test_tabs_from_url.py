"""Every tab opened from a shared link, in a real headless Chromium: the README tour's links
(tools/tour.py), pointed at the tests' tiny checkpoint and shrunk to run in seconds, open
on the tab they name, draw its plots, and show numbers that match the link's knobs and the session's
server-side state. One screenshot per tab goes to pytest's tmp directory."""
from __future__ import annotations

import importlib.util
import re
import sys
from urllib.parse import parse_qsl, urlencode

import pytest
import torch

from tests.support import ROOT
from tests.support.browser import open_page, wait_finished, wait_until
from tests.support.dashboard import LENGTH, explore, save_tiny_checkpoints
from tests.support.serving import serve_in_process

_spec = importlib.util.spec_from_file_location("tools_tour", ROOT / "tools" / "tour.py")
tour = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # tools/ holds scripts, not a package
_spec.loader.exec_module(tour)
HELPERS_JS, TOUR = tour.HELPERS_JS, tour.TOUR

STOPS = {stop.tab: stop for stop in TOUR}
STEPS, GRID = 8, (1, 2, 4)
# The tour's sizes are for the shipped models; the tiny one has a 24-character context and is judged in
# milliseconds, so a short run and a small sweep say the same thing.
SHRINK = {"Explore": {"length": str(LENGTH), "steps": str(STEPS)},
          "Sweep": {"sweep.steps_grid": ",".join(map(str, GRID)), "sweep.samples": "2"}}
PLOTS = {"Explore": (".heatmap-view", ".confidence-view"), "Compare": (".compare-column",),  # its heatmap
         "Inspect": (".inspect-fraction", ".inspect-accuracy", ".inspect-positions"),
         "Sweep": (".sweep-quality-plot", ".sweep-speed-plot"), "Model": (".model-page",)}  # its curves
# Laid-out containers of `sel` that hold a canvas (Panel draws into shadow roots: HELPERS_JS walks them).
# A Bokeh figure pane takes no css class of its own: Compare and Model name the container around it.
CANVASES_JS = ("(sel) => window.__tourAll(sel).filter(el => window.__tourVisible(el)"
               " && window.__tourDeep(el, 'canvas').length > 0).length")
# The sweet spots' hover texts ("Sweet spot ~N steps (...)") as the browser's Bokeh documents hold them.
SPOTS_JS = """() => { const out = []; for (const doc of Bokeh.documents) for (const m of doc.all_models)
  if (m.data && m.data.spot) out.push(...m.data.spot); return out; }"""


def link(tab: str) -> dict:
    """The tour's query for `tab`, on the tiny checkpoint and shrunk."""
    query = dict(parse_qsl(STOPS[tab].query))
    query["checkpoint"] = "tiny"  # the tour names shakespeare / patterns
    return {**query, **SHRINK.get(tab, {})}


def ready_js(tab: str) -> str:
    """The tour's ready condition, where it names the shipped models' sizes rewritten for the tiny one."""
    js = STOPS[tab].ready_js
    if tab == "Explore":
        js = js.replace("=== 33", f"=== {STEPS + 1}")  # one heatmap row per step, plus the start canvas
    if tab == "Model":  # the tiny checkpoint stores a 1-point curve and no learning-rate schedule
        js = "window.__tourSource('stored-train') === 1 && window.__tourText('.model-summary')"
    assert tab in ("Compare", "Inspect", "Sweep") or js != STOPS[tab].ready_js, "the tour's condition changed"
    return js


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The app as `run.py serve --no-auto-sweep` builds it (served_args: ?checkpoint= honoured), with
    every tab, over the tiny checkpoints. Yields (url, the sessions' states, the checkpoints dir)."""
    from explorer.dashboard import create_app
    from explorer.dashboard.app import served_args

    ckpts = save_tiny_checkpoints(tmp_path / "ckpt")
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(ckpts))
    monkeypatch.setenv("MDLM_EXPLORER_DEVICE", "cpu")
    torch.set_num_threads(1)

    def build():
        template = create_app(**served_args())
        explore(template.explorer_state).sweep_auto = False  # as the tour's server: Explore's sweep is not shown
        return template

    with serve_in_process(build) as (url, states):
        yield url, states, ckpts


def open_tab(browser, url: str, states, tab: str):
    """Open the link, wait for the tab's result to be drawn; returns (page, console problems, state)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # here: the module skips without playwright

    query = link(tab)
    page, problems = open_page(browser, f"{url}?{urlencode(query)}")
    page.set_viewport_size({"width": 1600, "height": STOPS[tab].height})  # the tour's: Inspect's plots are low
    page.wait_for_function("() => typeof Bokeh !== 'undefined' && Bokeh.documents.length > 0", timeout=60_000)
    page.evaluate(HELPERS_JS)
    try:
        page.wait_for_function(f"() => {{ try {{ return !!({ready_js(tab)}); }} catch (e) {{ return false; }} }}",
                               timeout=90_000, polling=250)
    except PlaywrightTimeout:  # say where it stood: a bare timeout (seen once in CI, Sweep) says nothing
        try:
            stood = where_it_stood(states, tab)
        except Exception as e:  # the report must not hide the timeout behind an error of its own
            stood = f"(state unreadable: {e!r})"
        pytest.fail(f"{tab} was not ready after 90 s; {stood}; problems: {problems}")
    wait_until(lambda: states and states[-1].loaded)  # load done: model knobs, then the link
    return page, problems, states[-1]


def where_it_stood(states, tab: str) -> str:
    """The newest session's model and its tab's background tasks, and who holds the device."""
    from explorer.dashboard.runtime.queue import device_queue
    from explorer.dashboard.runtime.tasks import Task

    if not states:
        return "no session was built"
    state, turns = states[-1], device_queue("cpu").turns
    tasks = {name: value for name, value in vars(state.tabs[tab]).items() if isinstance(value, Task)}
    shown = {name: dict(running=t.running, status=t.status, error=t.error, progress=t.progress,
                        result=t.result is not None) for name, t in tasks.items()}
    return (f"{len(states)} session(s), model loaded: {state.model is not None}, tasks: {shown}, device turns: "
            f"holder {turns._holder}, waiting {dict(turns._waiting)}, last {turns._last}")


def knobs_applied(state, query: dict) -> None:
    """Every knob of the link is the session's (or its tab's) value: `compare.preset` -> tabs['Compare']."""
    for key, value in query.items():
        if key == "checkpoint":
            assert state.model_info["name"] == value
        elif key != "tab":
            owner, _, name = key.rpartition(".")
            obj = state.tabs[owner.capitalize()] if owner else state
            assert str(getattr(obj, name)).lower() == value.lower(), key


def check_explore(page, state, query, ckpts):
    steps, length = int(query["steps"]), int(query["length"])
    text = wait_finished(page, [state])  # the run has ended and its final text is on the page
    assert page.evaluate("window.__tourRows()") == steps + 1 == explore(state).frames.n_rows
    assert len(text) == length and explore(state).trajectory.config.steps == steps


def check_compare(page, state, query, ckpts):
    tab = state.tabs["Compare"]
    wait_until(lambda: not tab.running and len(tab.results) == 2 and all(tab.results))
    assert [r["config"].strategy for r in tab.results] == ["confidence", "random"]  # the preset's columns
    tables = page.locator(".compare-metrics table")
    assert tables.count() == 2
    for i, result in enumerate(tab.results):
        shown = tables.nth(i).inner_text()
        quality = float(re.search(r"pattern quality\s+([\d.]+)", shown)[1])
        assert 0 <= quality <= 1 and quality == pytest.approx(result["metrics"]["pattern_quality"], abs=5e-4)
        steps, nfe = map(int, re.search(r"steps / NFE\s+(\d+) / (\d+)", shown).groups())
        assert (steps, nfe) == (result["config"].steps, result["metrics"]["nfe"])
        assert re.search(r"time\s+\d+ ms", shown)


def check_inspect(page, state, query, ckpts):
    table = state.tabs["Inspect"].predictions["table"]
    caption = page.locator(".inspect-predictions .cap").inner_text()
    m = re.search(r"Predictions at t = ([\d.]+): (\d+) of (\d+) masked characters right \(\d+%\), "
                  r"mean top-1 probability ([\d.]+)", caption)
    assert m, caption
    assert float(m[1]) == float(query["inspect.t"])
    hits, n = int(m[2]), int(m[3])
    assert (hits, n) == (int(table["correct"].sum()), len(table)) and n > 0 and 0 <= hits / n <= 1
    assert 0 <= float(m[4]) <= 1 and float(m[4]) == pytest.approx(table["p1"].mean(), abs=0.005)
    assert f"t = {float(query['inspect.t']):.2f}" in page.locator(".inspect-forward .cap").inner_text()


def summary_rows(page) -> list[dict]:
    """The Sweep summary table as the page shows it: one {header: cell text} per row."""
    heads = [h.strip() for h in page.locator(".sweep-summary thead th").all_inner_texts()]
    rows = page.locator(".sweep-summary tbody tr")
    return [dict(zip(heads, (c.strip() for c in rows.nth(i).locator("td").all_inner_texts())))
            for i in range(rows.count())]


def check_sweep(page, state, query, ckpts):
    from explorer.experiments import pick_metric, sweet_spot

    summary = state.tabs["Sweep"].main.result[1]
    metric = pick_metric(summary)  # the tab's "auto": the period->=2 pattern quality
    assert metric == "pattern_quality_p2"
    rows = summary_rows(page)
    for strategy in ("confidence", "random"):  # the grid of the link is each curve's x values
        assert [int(r["steps"]) for r in rows if r.get("strategy") == strategy] == list(GRID)
    for r in rows:
        mean = float(r[metric].split("±")[0])
        assert 0 <= mean <= 1 and int(r["n"]) == int(query["sweep.samples"])
    shown = sorted(int(re.search(r"~(\d+) steps", s)[1]) for s in page.evaluate(SPOTS_JS))
    assert len(shown) == 2 and set(shown) <= set(GRID)  # one star per strategy, on the grid
    assert shown == sorted(int(v) for v in sweet_spot(summary, metric)["steps"])


def check_model(page, state, query, ckpts):
    from explorer.checkpoint import read_metadata

    meta = read_metadata(ckpts / "tiny.safetensors")
    wait_until(lambda: f"{meta['n_params']:,}" in page.locator(".model-summary .meta-page").inner_text())
    shown = page.locator(".model-summary .meta-page").inner_text()
    assert f"NELBO {meta['metrics']['nelbo_nats_per_char']:.3f} nats/char" in shown
    assert state.tabs["Model"].meta["n_params"] == meta["n_params"]


CHECKS = {"Explore": check_explore, "Compare": check_compare, "Inspect": check_inspect, "Sweep": check_sweep,
          "Model": check_model}


@pytest.mark.parametrize("tab", list(CHECKS))
def test_tab_opens_from_its_link(browser, served, tmp_path, tab):
    url, states, ckpts = served
    page, problems, state = open_tab(browser, url, states, tab)
    try:
        assert page.locator(".bk-tab.bk-active").first.inner_text().strip() == tab  # the link's tab is shown
        query = link(tab)
        knobs_applied(state, query)
        for sel in PLOTS[tab]:  # each plot drawn (Compare: one heatmap per column)
            n = 2 if tab == "Compare" else 1
            page.wait_for_function(f"() => ({CANVASES_JS})({sel!r}) >= {n}", timeout=30_000)
        CHECKS[tab](page, state, query, ckpts)
        page.wait_for_timeout(500)  # Bokeh paints on the next frames
        page.screenshot(path=str(tmp_path / f"{tab.lower()}.png"), full_page=True)
        assert problems == [], problems
    finally:
        page.close()  # the session's background work stops with it


H3_SIZE_JS = """prefix => { let size = null; const walk = root => { for (const el of root.querySelectorAll('*')) {
  if (el.shadowRoot) walk(el.shadowRoot);
  if (el.tagName === 'H3' && el.textContent.startsWith(prefix) && el.getBoundingClientRect().width > 0)
    size = getComputedStyle(el).fontSize + ' ' + getComputedStyle(el).fontWeight; } }; walk(document); return size; }"""


def test_headings_keep_their_size_whether_a_tab_is_linked_or_clicked(browser, served):
    """A tab filled on its first click got Bootstrap's whole stylesheet (h3 28 px), one opened
    from a link only the theme's (16 px); later a clicked tab's headings were not bold. Sweep's headings
    (Markdown) opened by link and Inspect's (HTML) opened by a click must now be the same size and weight."""
    url, states, _ = served
    page, problems = open_page(browser, f"{url}?tab=Sweep")
    page.wait_for_function(f"() => ({H3_SIZE_JS})('Quality grid') !== null", timeout=60_000)
    linked = page.evaluate(H3_SIZE_JS, "Quality grid")
    page.locator(".bk-tab", has_text="Inspect").click()
    page.wait_for_function(f"() => ({H3_SIZE_JS})('Forward process') !== null", timeout=60_000)
    clicked = page.evaluate(H3_SIZE_JS, "Forward process")
    assert linked == clicked and 14 < float(linked.split()[0].rstrip("px")) < 20, (linked, clicked)  # size, weight
    assert problems == []
