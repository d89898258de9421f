"""The README's tour: one screenshot per tab, each opened from the link that reproduces a figure of the
teaching notebooks.

    python tools/tour.py [--out assets/tour] [--port P] [--data FILE]   # serve, open each link, save PNGs
    python tools/tour.py --picture                                      # the README's picture, assets/dashboard.png
    python tools/tour.py --markdown                                     # print the README's "## Tour"

The screenshots come from the real server (`run.py serve`) in headless Chromium (playwright with the
system's /usr/bin/chromium): a link sets the knobs and the tab, and a tab shown with a model loaded
computes its result by itself (TabState.on_shown), so opening the link is all a shot needs. TOUR is
the one table both the screenshots and the README text are made from.
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from explorer.cli.rehearse import PROBE_JS

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1600, "height": 1000}
README_HOST = "http://localhost:5006/"  # the links as the README shows them (the default port)
SETTLE_S = 3.0  # after the result is in the DOM: Bokeh's canvases paint on the next frames
LOAD_TIMEOUT_S = 300  # the machine may be shared with training and tests: generous


@dataclass(frozen=True)
class Stop:
    file: str
    tab: str
    query: str  # the link's query: checkpoint, knobs, tab, <tab>.<param>
    figure: str  # the notebook figure it reproduces
    caption: str
    ready_js: str  # true in the page once the tab's result is drawn
    height: int = VIEWPORT["height"]  # taller where the figure it reproduces is further down
    reading: str = ""  # what the shot shows on the shipped checkpoints, measured when it was last retaken
    computed_js: str = ""  # after ready_js: click the page's Compute button, then wait until this is true


def _has(selector: str, inner: str = "canvas") -> str:
    """JS: `selector` exists, is laid out, and holds `inner` (Panel renders into shadow roots)."""
    return f"window.__tourHas({selector!r}, {inner!r})"


TOUR = (
    Stop("explore.png", "Explore", "checkpoint=shakespeare&length=128&steps=32&strategy=confidence&seed=3",
         "\"Sampling Strategies & Speed Tradeoffs\" §7 (the unmasking trajectory) and \"Generation: Iterative "
         "Unmasking\" §4.3 / §7 (step-by-step generation)",
         "A 128-character Shakespeare sample unmasked in 32 confidence-ordered steps: the heatmap (one row per step), "
         "the text, and per-position confidence.",
         "window.__tourRows() === 33 && " + _has(".confidence-view"),
         reading="Confidence order commits the spaces first (the first step's four commits are all spaces, eight of the "
         "first ten) and the text reads `the have the more the houe for  part a / mor head thee I am novs you the more,`: "
         "confident and repetitive, as figure 2 under Figures measures (its entropy 0.56-0.67 nats below real "
         "text). The page's own default, random order at 64 steps, reads closer to the held-out text."),
    Stop("compare.png", "Compare", "checkpoint=patterns&steps=32&temperature=1.0&seed=3&tab=Compare&compare.preset=strategies",
         "\"Sampling Strategies & Speed Tradeoffs\" §4.2 / §7: confidence-based vs random remasking on one seed",
         "Same seed, same model, two unmasking orders side by side at 32 steps: confidence-first vs random (the "
         "checkpoint's own recommendation, which the page starts from, is margin order at 10 steps, T 0.7).",
         "window.__tourColumnsDone()",
         reading="Confidence order tiles one symbol, `000000000000000000000000`: the notebook's pattern quality "
         "scores it 1.000 and the period-2 quality 0.000 (one distinct symbol); random order's "
         "`IENKNEINKEIKIENIIEINNEIK` scores 0.500 by both and gets the bold best mark, which ranks by the measure a "
         "collapse cannot fool."),
    Stop("inspect.png", "Inspect", "checkpoint=shakespeare&seed=3&tab=Inspect&inspect.t=0.5",
         "\"The Forward Process\" §4.2-4.3 (the forward process, masking statistics) and \"Training with the "
         "ELBO\" §4.5-4.6 "
         "(accuracy vs masking ratio, predictions on real text)",
         "Validation text masked at t = 0.5, the model's top-k guesses for each masked position, and "
         "masked fraction and accuracy across t.",
         "window.__tourText('.inspect-predictions') && " + _has(".inspect-accuracy"), height=1440,
         reading="At t = 0.5, 137 of 256 characters are masked and the model's first guess is right for 71 (52%, mean "
         "top-1 probability 0.52, this example's loss 1.76 nats per masked character); the accuracy-vs-t plot "
         "further down shows how accuracy falls as t grows, and a link's inspect.ts=0.2,0.5,0.8 stacks the text "
         "at those t in one figure."),
    Stop("sweep.png", "Sweep", "checkpoint=patterns&seed=3&tab=Sweep&sweep.steps_grid=1,2,4,8,16,32"
         "&sweep.samples=16&sweep.include_ar=false",
         "\"Sampling Strategies & Speed Tradeoffs\" §6: quality vs number of steps with the sweet spot, and "
         "speed vs steps",
         "Pattern quality of confidence and random unmasking over 1-32 steps (bands over samples), with "
         "the speed it costs.",
         "window.__tourDone('.sweep-main-status') && " + _has(".sweep-quality-plot"),
         reading="By the period-2 quality confidence order beats random from 2 to 16 steps (about 0.9 at 8 and 16) and "
         "falls to 0 at 32, where every sample is one repeated symbol; random rises to about 0.7 and stays there. "
         "The sweet spots are 8 steps for confidence and 16 for random; tokens/s falls as 1/steps for both (a log axis)."),
    Stop("model.png", "Model", "checkpoint=shakespeare&seed=3&tab=Model",
         "\"Training with the ELBO\" §4.4 (training and validation loss curves) and its TODO 1 (learning-rate "
         "schedules)",
         "The loaded checkpoint's architecture, data and training record beside its stored train / "
         "validation loss curves and learning-rate schedule (a live training panel is further down).",
         "window.__tourSource('stored-train') > 10 && window.__tourSource('stored-lr-plan') > 1 && "
         "window.__tourText('.model-summary')",
         reading="The shipped model's 6,000 adaptation steps: the loss falls from 4.4 at the AR initialisation to about "
         "1.8, validation tracking training; the learning-rate plot shows the schedule actually used, with the dip "
         "where the run was stopped and resumed (a short re-warm-up near step 2,700). The time-embedding "
         "heatmap is drawn for teaching: this model takes no time input, which the Model tab says in its title."),
)

# Helpers the ready_js expressions call; every lookup walks open shadow roots, as Panel renders into them.
HELPERS_JS = r"""
window.__tourAll = (sel) => {
  const out = [];
  const walk = (root) => { root.querySelectorAll(sel).forEach(e => out.push(e));
    root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); };
  walk(document); return out;
};
window.__tourDeep = (el, sel) => {
  const hits = [];
  const walk = (root) => { root.querySelectorAll(sel).forEach(e => hits.push(e));
    root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) walk(e.shadowRoot); }); };
  if (el.shadowRoot) walk(el.shadowRoot); walk(el); return hits;
};
window.__tourVisible = (el) => { const r = el.getBoundingClientRect(); return r.width > 50 && r.height > 30; };
window.__tourHas = (sel, inner) => window.__tourAll(sel).some(
  el => window.__tourVisible(el) && window.__tourDeep(el, inner).length > 0);
window.__tourTextOf = (el) => {  // the text a reader sees: text nodes, not <style> sheets
  const parts = [];
  const walk = (node) => { for (const c of node.childNodes) {
      if (c.nodeType === 3) parts.push(c.nodeValue);
      else if (c.nodeType === 1 && !['STYLE', 'SCRIPT'].includes(c.tagName)) walk(c); }
    if (node.shadowRoot) walk(node.shadowRoot); };
  walk(el); return parts.join(' ');
};
window.__tourText = (sel) => window.__tourAll(sel).some(el => window.__tourTextOf(el).trim().length > 20);
window.__tourDone = (sel) => window.__tourAll(sel).some(el => /done|from cache/.test(window.__tourTextOf(el)));
window.__tourColumnsDone = () => {
  const cols = window.__tourAll('.compare-column').filter(window.__tourVisible);
  return cols.length >= 2 && cols.every(c => { const t = window.__tourTextOf(c);
    return !/sampling …|not run yet/.test(t) && window.__tourDeep(c, 'canvas').length > 0; });
};
window.__tourSource = (name) => { for (const doc of Bokeh.documents) {  // rows in a named data source
  const m = doc.get_model_by_name(name); if (m) { const cols = Object.values(m.data);
  return cols.length ? cols[0].length : 0; } } return 0; };
window.__tourRows = () => { for (const doc of Bokeh.documents) {
  const m = doc.get_model_by_name('trajectory-cells'); if (m) { let n = 0;
  for (const v of m.data.y) n = Math.max(n, v + 1); return n; } } return 0; };
"""


# The README's picture: the page a newcomer first sees (its default run on `shakespeare`), with the
# quality-vs-steps curves computed by a click (the server runs without the sweep after each run), over two
# samples per point so that they are drawn in seconds.
PICTURE = Stop("dashboard.png", "Explore", "checkpoint=shakespeare&sweep_samples=2", "", "",
               f"(({PROBE_JS})().settled || '').split(' ').includes('Explore') && " + _has(".confidence-view"),
               computed_js=_has(".quality-view"))


def link(stop: Stop, base: str = README_HOST) -> str:
    return f"{base}?{stop.query}"


def markdown(out: str = "assets/tour") -> str:
    """The README's tour section, from TOUR."""
    lines = ["## Tour", "",
             "One screenshot per tab, each taken from a link that reproduces a figure of the teaching notebooks "
             "(`python tools/tour.py` retakes them). Start the server with `python run.py serve` "
             "and open a link: it sets the checkpoint, the knobs and the tab, and the tab computes its result "
             "by itself.", ""]
    for stop in TOUR:
        lines += [f"### {stop.tab}", "", f"![{stop.tab} tab]({out}/{stop.file})", "",
                  f"**Notebook figure:** {stop.figure}. {stop.caption}", "",
                  *([f"**What it shows:** {stop.reading}", ""] if stop.reading else []),
                  f"Link: <{link(stop)}>", ""]
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def start_server(port: int, log_path: Path, data: str | None = None) -> subprocess.Popen:
    """`run.py serve` on `port` (`data`: its --data, Tiny Shakespeare's local copy); returns once it answers
    HTTP (raises if it died first)."""
    # --no-auto-sweep: Explore's quality-vs-steps sweep after each run would cost minutes on shakespeare and
    # is not in the shot; the Sweep stop shows that figure
    cmd = [sys.executable, str(ROOT / "run.py"), "serve", "--no-show", "--port", str(port), "--threads", "1",
           "--no-auto-sweep"] + (["--data", data] if data else [])
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log_path.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}); see {log_path}")
        try:
            urllib.request.urlopen(f"http://localhost:{port}/liveness", timeout=5)
        except OSError:
            try:  # --liveness is not on: any answer from / will do
                urllib.request.urlopen(f"http://localhost:{port}/", timeout=30)
                return proc
            except OSError:
                time.sleep(1)
        else:
            return proc
    proc.terminate()
    raise RuntimeError(f"the server did not answer within {LOAD_TIMEOUT_S} s; see {log_path}")


# The notices a page shows (Bootstrap alerts, in Panel's shadow roots): why a stop never got drawn, e.g. a
# server without Tiny Shakespeare's held-out text (offline and no --data) cannot fill Inspect.
NOTICES_JS = "() => window.__tourAll('.alert').map(window.__tourTextOf).map(t => t.trim()).filter(Boolean)"


def shoot(browser, stop: Stop, port: int, out: Path) -> Path:
    """Open the stop's link, wait until its result is drawn (and what its Compute button computes, if the
    stop asks for it), settle, save the PNG."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = browser.new_page(viewport=dict(VIEWPORT, height=stop.height))
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(link(stop, f"http://localhost:{port}/"), timeout=LOAD_TIMEOUT_S * 1000)
        page.wait_for_function("() => typeof Bokeh !== 'undefined' && Bokeh.documents.length > 0",
                               timeout=LOAD_TIMEOUT_S * 1000)
        page.evaluate(HELPERS_JS)
        try:
            page.wait_for_function(f"() => {{ try {{ return !!({stop.ready_js}); }} catch (e) {{ return false; }} }}",
                                   timeout=LOAD_TIMEOUT_S * 1000, polling=500)
        except PlaywrightTimeout:
            raise RuntimeError(f"{stop.file}: not drawn within {LOAD_TIMEOUT_S} s; the page's notices: "
                               f"{page.evaluate(NOTICES_JS) or 'none'}") from None
        if stop.computed_js:
            page.get_by_role("button", name="Compute", exact=True).click()
            page.mouse.move(0, VIEWPORT["height"] - 1)  # off the button: its tooltip is not in the picture
            page.wait_for_function(f"() => !!({stop.computed_js})", timeout=LOAD_TIMEOUT_S * 1000, polling=500)
        time.sleep(SETTLE_S)
        path = out / stop.file
        page.screenshot(path=str(path))
        if errors:
            print(f"  {stop.file}: page errors: {errors[:3]}", file=sys.stderr)
        return path
    finally:
        page.close()


def take(out: Path, port: int, only=(), picture: bool = False, data: str | None = None) -> list[Path]:
    """Serve, and save each TOUR stop's PNG in `out` (only: the tabs to shoot, lower case; picture: the
    README's picture instead, in `out`; data: the server's --data). Returns the files saved."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    server = start_server(port, Path(tempfile.gettempdir()) / f"tour-server-{port}.log", data)
    saved = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless"])
            for stop in (PICTURE,) if picture else TOUR:
                if only and stop.tab.lower() not in only:
                    continue
                start = time.monotonic()
                saved.append(shoot(browser, stop, port, out))
                print(f"{stop.file}: {time.monotonic() - start:.0f} s", flush=True)
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    return saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="folder of the PNGs (default assets/tour; --picture: assets)")
    ap.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    ap.add_argument("--markdown", action="store_true", help="print the README's tour section and exit")
    ap.add_argument("--picture", action="store_true",
                    help="save the README's picture (the default page, quality curves drawn) as "
                         "dashboard.png in --out (default assets)")
    ap.add_argument("--data", default=None, metavar="FILE",
                    help="Tiny Shakespeare's local copy for the server (run.py serve --data): Inspect's stop "
                         "shows its held-out text, which an offline server without it cannot")
    ap.add_argument("--only", nargs="*", default=(), help="tabs to shoot (default all), e.g. --only sweep")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(args.out or "assets/tour"))
        return 0
    folder = args.out or ("assets" if args.picture else "assets/tour")
    out = Path(folder) if Path(folder).is_absolute() else ROOT / folder
    take(out, args.port or free_port(), only={t.lower() for t in args.only}, picture=args.picture, data=args.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
