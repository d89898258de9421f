"""What a page's updates cost the server in walks of Bokeh's model graph.

    python benchmarks/bench_graph_walks.py [--pages 6] [--link "tab=Inspect&inspect.t=0.5"]

Bokeh walks every model of a document again (DocumentModelManager.recompute) whenever a property that
holds models changes outside a freeze: a pane's new figure, a list of children, a pane's stylesheets. The
dashboard's updates reach a session through its dispatcher (runtime/dispatch.run_in_order), which runs
each one inside `one_graph_walk`: at most one walk, at its end, and only if the graph changed; its page
is built by `page_template`, inside Bokeh's freeze: one walk (both in ui/internals.py).

Served app over the tests' tiny checkpoints (tests/support/dashboard.py), one headless Chromium; the
link's page is opened --pages times with both in place and as many times without them (Bokeh walking at
every change, as under Panel alone), in turns, each page closed once its results are shown. Prints per page the
walks and their CPU time, all of them and those made inside dispatched updates, and the CPU time of the
process serving it (the browser's are other processes) from the page's request until two seconds after its
results were in; medians, and their ratios.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_dashboard import ARGS, CHROMIUM  # noqa: E402 (this folder is the script's sys.path[0])

class Walks:
    """Counts Bokeh's graph walks (and their CPU seconds), and those made from inside a dispatched update."""

    def __init__(self):
        from bokeh.document.models import DocumentModelManager

        self.n = self.seconds = self.dispatched = self.dispatched_seconds = 0
        real = DocumentModelManager.recompute
        walks = self

        def recompute(manager):
            start = time.process_time()
            real(manager)
            spent = time.process_time() - start
            walks.n += 1
            walks.seconds += spent
            if any(f.name == "run_in_order" for f in traceback.extract_stack(limit=60)):
                walks.dispatched += 1
                walks.dispatched_seconds += spent
        DocumentModelManager.recompute = recompute

    def reset(self) -> None:
        self.n = self.seconds = self.dispatched = self.dispatched_seconds = 0


def inspect_done(state) -> bool:
    """The Inspect tab's results all in: predictions, confidence by position, accuracy over t."""
    from explorer.dashboard.tabs.inspect.state import ACC_TS

    tab = state.tabs.get("Inspect")
    return (tab is not None and tab.predictions is not None and tab.positions is not None
            and tab.accuracy is not None and len(tab.accuracy) == len(ACC_TS))


def one_page(browser, url: str, link: str, states: list, walks: Walks, done) -> dict:
    """Open the link, wait until `done(state)` and two quiet seconds more; the page's walks and server CPU."""
    from tests.support.dashboard import wait_for

    walks.reset()
    before, start = len(states), time.process_time()
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"{url}?{link}")
    wait_for(lambda: len(states) > before and states[-1].loaded and done(states[-1]), timeout=300)
    time.sleep(2.0)  # late updates (the page's own answers) land
    cpu = time.process_time() - start
    result = dict(walks=walks.n, walk_s=walks.seconds, dispatched=walks.dispatched,
                  dispatched_s=walks.dispatched_seconds, cpu_s=cpu)
    page.close()
    states[-1].close()
    return result


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=6, help="pages each way")
    ap.add_argument("--link", default="tab=Inspect&inspect.t=0.5")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} missing: nothing to measure")
        return 0
    import torch
    from playwright.sync_api import sync_playwright

    from explorer.dashboard import create_app
    import panel as pn

    from explorer.dashboard.runtime import dispatch
    from explorer.dashboard.ui.internals import page_template
    from tests.support.dashboard import save_tiny_checkpoints
    from tests.support.serving import serve_in_process

    os.environ["MDLM_EXPLORER_CHECKPOINTS"] = str(save_tiny_checkpoints(Path(tempfile.mkdtemp())))
    os.environ["MDLM_EXPLORER_AUTO_SWEEP"] = "0"
    torch.set_num_threads(1)
    walks, real = Walks(), dispatch.one_graph_walk
    template = page_template()
    frozen_build, plain_build = template.server_doc, pn.template.BootstrapTemplate.server_doc
    done = inspect_done if "tab=Inspect" in args.link else (
        lambda s: s.tabs["Explore"].trajectory is not None and not s.tabs["Explore"].running)
    rows = {"one walk per update": [], "a walk per change": []}  # (and per page build)
    with serve_in_process(lambda: create_app(checkpoint="tiny", device="cpu")) as (url, states), \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        one_page(browser, url, args.link, states, walks, done)  # imports and caches, not measured
        for _ in range(args.pages):
            for label in rows:  # in turns: the machine's drift touches both alike
                ours = label == "one walk per update"
                dispatch.one_graph_walk = real if ours else (lambda doc: contextlib.nullcontext())
                template.server_doc = frozen_build if ours else plain_build
                rows[label].append(one_page(browser, url, args.link, states, walks, done))
        dispatch.one_graph_walk, template.server_doc = real, frozen_build
        browser.close()
    print(f"link ?{args.link}, {args.pages} pages each way, load average {os.getloadavg()[0]:.1f}; medians per page:")
    print(f"{'':22}{'walks':>7}{'walk CPU (ms)':>15}{'in updates':>12}{'their CPU (ms)':>16}{'server CPU (s)':>16}")
    for label, r in rows.items():
        print(f"{label:22}{median(r, 'walks'):>7.0f}{median(r, 'walk_s') * 1000:>15.0f}"
              f"{median(r, 'dispatched'):>12.0f}{median(r, 'dispatched_s') * 1000:>16.0f}{median(r, 'cpu_s'):>16.2f}")
    new, old = rows["one walk per update"], rows["a walk per change"]
    print(f"walk CPU per page: {median(old, 'walk_s') / max(median(new, 'walk_s'), 1e-9):.2f}x less; "
          f"server CPU per page: {median(old, 'cpu_s') / max(median(new, 'cpu_s'), 1e-9):.2f}x less")
    return 0


if __name__ == "__main__":
    sys.exit(main())
