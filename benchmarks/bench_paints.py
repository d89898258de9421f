"""What the browser spends on a page with one of the dashboard's savings on its paints, and without.

    python benchmarks/bench_paints.py [--repeats 2] [--spare css-reads|stylesheets]

css-reads: BokehJS asks getComputedStyle, on every paint of every plot, for `--bk-` variables that no
stylesheet of the page sets and for the plot's font size; each read after a change of the page's DOM makes
the browser recompute the whole page's styles first. The dashboard answers those reads without asking once
the page's document is ready (ui/internals.lighter_paints).

stylesheets: Panel re-sends an HTML or Markdown pane's stylesheets with its first new text, adding
Bootstrap's whole stylesheet to the pane, and BokehJS lays out the whole page and repaints every plot for
each such change. The dashboard's panes keep the stylesheets they were drawn with
(ui/internals.steady_pane_stylesheets); without it, each page here gets Panel's own update.

Served app over the shipped checkpoints (the lessons' links name them), one headless Chromium at a
projector's 1366x768; each lesson's figure that shows the most at once (the most Compare columns, then the
most Inspect rows), and an Explore run, opened --repeats times each way, in turns (the page that goes first
alternates): with the patch, and without it (the page marked as patched before its own code runs, so the
app's hook leaves BokehJS as it is). A page counts until its header says its tab settled and its figure is
drawn, then resized to 1024x768. Prints per page the CPU seconds of the browser's processes (per process,
read before the page closes), their means each way, and the ratio.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_dashboard import ARGS, CHROMIUM  # noqa: E402 (this folder is the script's sys.path[0])

EXPLORE = "checkpoint=patterns&seed=42&length=24&steps=32&sweep_metric=pattern_quality"


def browser_cpu() -> dict[int, float]:
    """CPU seconds of every Chromium process now, by pid (a closed page's renderer leaves this list, so
    a page is read before it closes)."""
    from bench_dashboard import browser_pids
    from load_test import process_cpu_seconds

    return {pid: process_cpu_seconds(pid) for pid in browser_pids()}


def links(base: str) -> dict[str, tuple[str, str, str]]:
    """{name: (address, query, tab)}: each lesson's most demanding figure and an Explore run."""
    from explorer.dashboard import lessons
    from explorer.dashboard.projector import demand

    out = {}
    for item in lessons.LESSONS:
        fig = max(item.figures, key=demand)
        out[item.slug] = (lessons.figure_url(fig, base=base, presentation=True), fig.query, fig.tab)
    out["explore"] = (f"{base}?presentation=true&{EXPLORE}", EXPLORE, "Explore")
    return out


class PaneUpdates:
    """Panel's own update of a pane's new text (`steady` False) or the dashboard's (True), switched per page
    in this process; installed as already steady, so the app's create_app leaves it in place."""

    def __init__(self):
        from panel.pane.markup import HTMLBasePane

        from explorer.dashboard.ui.internals import steady_pane_stylesheets

        self.panel_own = HTMLBasePane._update
        steady_pane_stylesheets()
        self.ours, self.steady = HTMLBasePane._update, True

        def update(pane, ref, model):
            return (self.ours if self.steady else self.panel_own)(pane, ref, model)

        update.steady = True
        HTMLBasePane._update = update


def one_page(browser, address: str, query: str, tab: str, patched: bool, spare: str = "css-reads",
             updates: PaneUpdates | None = None) -> float:
    """Browser CPU seconds of one page, from its request until settled, drawn and resized; `patched`:
    with the saving `spare` names (css-reads, or stylesheets switched through `updates`)."""
    from explorer.cli.rehearse import PROBE_JS
    from explorer.dashboard.projector import DRAWN_JS, figure_selector

    page = browser.new_page(viewport={"width": 1366, "height": 768})
    if spare == "stylesheets":
        updates.steady = patched
    elif not patched:
        page.add_init_script("window.__mdlmLighterPaints = true")  # the hook sees it applied: leaves it
    before = browser_cpu()
    page.goto(address, wait_until="commit")
    page.wait_for_function(f"(tab) => {{ const s = ({PROBE_JS})().settled; return !!s && s.split(' ').includes(tab); }}",
                           arg=tab, timeout=120_000, polling=250)
    page.wait_for_function(DRAWN_JS, arg=figure_selector(query), timeout=60_000, polling=250)
    page.set_viewport_size({"width": 1024, "height": 768})
    page.wait_for_timeout(500)
    after = browser_cpu()
    page.close()
    time.sleep(0.3)
    return sum(after[pid] - before.get(pid, 0.0) for pid in after)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="pages each way, per link")
    ap.add_argument("--spare", choices=("css-reads", "stylesheets"), default="css-reads",
                    help="the saving measured (see above)")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} missing: nothing to measure")
        return 0
    import torch
    from playwright.sync_api import sync_playwright

    from explorer.dashboard import create_app
    from explorer.dashboard.app import served_args
    from tests.support.serving import serve_in_process

    os.environ.pop("MDLM_EXPLORER_CHECKPOINTS", None)  # the shipped checkpoints/
    os.environ["MDLM_EXPLORER_AUTO_SWEEP"] = "0"
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    seconds: dict[str, dict[bool, list[float]]] = {}
    updates = PaneUpdates() if args.spare == "stylesheets" else None
    with serve_in_process(lambda: create_app(**served_args(checkpoint="patterns", device="cpu"))) as (url, states), \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pages = links(url)
        for name, (address, query, tab) in pages.items():  # the server's caches filled: not measured
            first = one_page(browser, address, query, tab, True, args.spare, updates)
            print(f"{name}: first page {first:.2f} s", flush=True)
        for i in range(args.repeats):
            for name, (address, query, tab) in pages.items():
                for patched in ((True, False) if i % 2 == 0 else (False, True)):
                    seconds.setdefault(name, {True: [], False: []})[patched].append(
                        one_page(browser, address, query, tab, patched, args.spare, updates))
        browser.close()
    print(f"{args.repeats} pages each way per link, load average {os.getloadavg()[0]:.1f}; "
          "browser CPU seconds per page (mean):")
    without, spared = ("as BokehJS paints", "CSS reads spared") if args.spare == "css-reads" else \
        ("Panel's updates", "sheets kept")
    print(f"{'page':24}{without:>19}{spared:>18}{'ratio':>8}")
    for name, by in seconds.items():
        plain, lighter = statistics.mean(by[False]), statistics.mean(by[True])
        print(f"{name:24}{plain:>19.2f}{lighter:>18.2f}{plain / lighter:>8.2f}")
    plain = sum(sum(by[False]) for by in seconds.values())
    lighter = sum(sum(by[True]) for by in seconds.values())
    print(f"{'all pages':24}{plain:>19.1f}{lighter:>18.1f}{plain / lighter:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
