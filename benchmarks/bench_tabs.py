"""What the other tabs cost the browser: its main-thread busy time after a run and after a checkpoint
switch on the Explore tab, on a fresh page and after every tab has been visited.

    python benchmarks/bench_tabs.py [--repeats 2] [--settle 30]

Served app over the tests' tiny checkpoints (tests/support/dashboard.py), so the sampler takes
milliseconds and what is measured is the page: Chromium's long tasks (main thread busy > 50 ms) in the
`--settle` seconds after the action, their total, and the longest time the page took to answer a
trivial script (how long it looked frozen). Bokeh lays out its whole document after every change it
receives; app.empty_tab keeps hidden tabs out of it (this benchmark on a 2-core CPU, after
visiting every tab: 104 views, as on a fresh page, and a switch 0.4 s busy; with every visited tab left
in the page, 275 views and 7.0 s).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_dashboard import ARGS, CHROMIUM  # noqa: E402 (this folder is the script's sys.path[0])
from tests.support.browser import BOKEH_VIEWS_JS  # noqa: E402
from tests.support.dashboard import wait_for  # noqa: E402

LONG_TASKS = """window.__busy = 0; window.__long = 0;
new PerformanceObserver(l => { for (const e of l.getEntries()) { window.__busy += e.duration; window.__long++; } })
  .observe({entryTypes: ['longtask']});"""
OTHER_TABS = ("Model", "Sweep", "Inspect", "Compare")


def measure(page, state, action: str, settle: float) -> dict:
    """Do `action` ('run' or 'switch') on the Explore tab; what the page did in the next `settle` s."""
    busy0, long0 = page.evaluate("[window.__busy, window.__long]")
    start = time.monotonic()
    if action == "run":
        page.locator(".knob-run button").click()
    else:
        name = "tiny-training" if state.model_info.get("name") != "tiny-training" else "tiny"
        page.locator(".knob-checkpoint select").select_option(name)
    frozen = 0.0
    while time.monotonic() - start < settle:
        t = time.monotonic()
        page.evaluate("1")
        frozen = max(frozen, time.monotonic() - t)
        time.sleep(0.05)
    busy1, long1 = page.evaluate("[window.__busy, window.__long]")
    return {"busy_s": (busy1 - busy0) / 1000, "long_tasks": long1 - long0, "frozen_s": frozen}


def one_page(browser, url, states, visit: bool, settle: float) -> dict:
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.add_init_script(LONG_TASKS)
    page.goto(url)
    wait_for(lambda: states and states[-1].tabs["Explore"].quality.result is not None and not states[-1].tabs["Explore"].quality.running,
             timeout=120, message="the dashboard's first run and sweep did not finish")
    state = states[-1]
    for tab in OTHER_TABS if visit else ():
        page.locator(".bk-tab", has_text=tab).click()
        page.wait_for_timeout(1500)
    page.locator(".bk-tab", has_text="Explore").click()
    page.wait_for_timeout(3000)
    out = {"views": page.evaluate(BOKEH_VIEWS_JS)}
    for action in ("run", "switch"):
        out[action] = measure(page, state, action, settle)
    page.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--settle", type=float, default=30.0, help="seconds watched after each action")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} missing: nothing to measure")
        return 0
    import torch
    from playwright.sync_api import sync_playwright

    from explorer.dashboard import create_app
    from tests.support.dashboard import save_tiny_checkpoints
    from tests.support.serving import serve_in_process

    os.environ["MDLM_EXPLORER_CHECKPOINTS"] = str(save_tiny_checkpoints(Path(tempfile.mkdtemp())))
    torch.set_num_threads(1)
    with serve_in_process(lambda: create_app(checkpoint="tiny", device="cpu")) as (url, states), \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for visit in (False, True):
            for r in range(args.repeats):
                m = one_page(browser, url, states, visit, args.settle)
                label = "after visiting every tab" if visit else "Explore only            "
                print(f"{label} #{r}: {m['views']:4d} Bokeh views in the page; " + "; ".join(
                    f"{a}: busy {m[a]['busy_s']:.1f} s in {m[a]['long_tasks']} long tasks, "
                    f"frozen up to {m[a]['frozen_s']:.1f} s" for a in ("run", "switch")), flush=True)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
