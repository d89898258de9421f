"""How fast the dashboard feels: knob change -> first heatmap rows, and its cost on top of the sampler.

    python benchmarks/bench_dashboard.py [--checkpoint shakespeare] [--runs 5] [--threads 1] [--no-browser]
                                         [--profile N]   # + the N costliest functions of that work

Setting: `shakespeare`, 256 characters, 32 steps, on the CPU. Prints:
  * the sampler's own time for one run (explorer.sampling.sample, no dashboard), median of --runs, before
    the server starts, and again beside each run in the page (same seed, back to back): the speed goal
    (whole run <= 1.15 x the sampler alone + 150 ms) is judged on those pairs. Those runs are
    made on the device queue's thread, where the page's runs are made, and no other thread of this
    process that outlives its work runs torch: each thread that runs a parallel torch op keeps its own
    OpenMP team, and once the teams' threads outnumber the cores, libgomp makes idle workers sleep at
    once instead of spinning, so every parallel op pays a wake-up (one sampler run went from about
    540 to 650 ms when the benchmark's main thread had sampled too, measured on a 2-core CPU);
  * served session, real headless Chromium: a knob change made in the page (the seed widget's value)
    -> the new run's start canvas (row 0) and its first sampled row (row 1) in the page's data, and
    the whole run until its last row is in the page; browser clock, median of --runs;
  * server-side dashboard work per run: time in the callbacks that turn steps into plot updates
    (frames, heatmap cells, text, bars) and time serialising the document patches sent to the page.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CHROMIUM = "/usr/bin/chromium"
QUIET_S = 1.2  # after a page run: > app.URL_QUIET, so the URL rewrite a knob change defers is done
RUN_TIMEOUT_S = 600.0  # a page's run on a loaded 2-core machine took over a minute (one minute was the wait)
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

# In the page: set the seed widget's value (as typing would) and time when the heatmap's data source
# holds row 0, row 1 and the last row of the new run (polled every millisecond).
KNOB_JS = """async ([seed, lastRow]) => {
  let src = null, knob = null;
  for (const doc of Bokeh.documents) {
    src = src || doc.get_model_by_name('trajectory-cells');
    for (const m of doc.all_models) {
      if (!knob && m.css_classes && m.css_classes.includes('knob-seed') && 'value' in m) knob = m;
    }
  }
  const rows = () => { let n = -1; for (const v of src.data.y) n = Math.max(n, v); return n; };
  const seen = {};
  let t0 = 0, finish = null;
  const check = () => {  // runs when the data source changes: a reset (new run) or a patched row
    const now = performance.now(), n = src.data.y.length ? rows() : -1;
    if (n >= 0 && seen.row0 === undefined) seen.row0 = now - t0;  // row 0 may come with row 1
    if (n >= 1 && seen.row1 === undefined && seen.row0 !== undefined) seen.row1 = now - t0;
    if (n === lastRow && seen.row1 !== undefined && seen.done === undefined) { seen.done = now - t0; finish(); }
  };
  src.patching.connect(check);
  src.change.connect(check);
  const done = new Promise(resolve => { finish = resolve; setTimeout(resolve, 120000); });
  t0 = performance.now(); knob.value = seed;
  await done;
  src.patching.disconnect(check); src.change.disconnect(check);
  return seen; }"""
# The seed widget is changed through its Bokeh model, as typing a value does; the times are taken
# in the page when the heatmap's data source reports the change (no polling).


def sampler_baseline(model, config, length: int, runs: int) -> float:
    """Median seconds of one recorded run of the real sampler, nothing else."""
    sample_once(model, config.replace(steps=2), length)  # warm-up: allocator, kernels
    return statistics.median(sample_once(model, config.replace(seed=100 + r), length) for r in range(runs))


def sample_once(model, config, length: int, owner=None) -> float:
    """Seconds of one recorded run of explorer.sampling.sample (its Trajectory's own wall time), run
    alone on the device queue's thread: no page. `owner`: the page's session, so that the queue does not
    count a second asker and make the page's next run wait to gather a batch (queue._gather_wait)."""
    from explorer.dashboard.runtime.queue import SampleRequest, device_queue
    from explorer.dashboard.runtime.tasks import Job
    from explorer.devices import model_device

    job, out = Job("bench"), {}
    request = SampleRequest(job, model, config, length, None, on_done=lambda traj: out.update(traj=traj),
                            on_failed=lambda e: out.update(error=e), owner=owner)
    device_queue(model_device(model)).submit(request)
    job.done.wait()
    if "traj" not in out:
        raise RuntimeError(f"the sampler run failed: {out.get('error')!r}")
    return out["traj"].seconds


def load_off_main(name: str, device):
    """The model, loaded on a thread that then exits (its OpenMP team goes with it; see the docstring)."""
    import threading

    from explorer.dashboard import checkpoints

    box = {}
    loader = threading.Thread(target=lambda: box.update(model=checkpoints.load(name, device)))
    loader.start()
    loader.join()
    if "model" not in box:
        raise SystemExit(f"could not load {name}")
    return box["model"]


class ServerWork:
    """Accumulates server-side dashboard time: dispatched UI callbacks and PATCH-DOC serialisation."""

    def __init__(self, profile: bool = False):
        self.callbacks = self.callbacks_cpu = 0.0  # wall time, and CPU time of the UI thread
        self.serialise = 0.0
        self.patches = 0
        # --profile: cProfile of the measured runs' callbacks and serialisation (UI thread only)
        self.profiler = cProfile.Profile() if profile else None
        self.measuring = False
        self.depth = 0

    def profiled(self, fn, *args, **kwargs):
        if self.profiler is None or not self.measuring or self.depth:  # nested: already profiled
            return fn(*args, **kwargs)
        self.depth += 1
        self.profiler.enable()
        try:
            return fn(*args, **kwargs)
        finally:
            self.profiler.disable()
            self.depth -= 1

    def wrap_dispatch(self, dispatch):
        def timed(callback):
            def run():
                start, cpu = time.perf_counter(), time.thread_time()
                try:
                    self.profiled(callback)
                finally:
                    self.callbacks += time.perf_counter() - start
                    self.callbacks_cpu += time.thread_time() - cpu
            dispatch(run)
        return timed

    def patch_protocol(self):
        from bokeh.protocol import Protocol

        create = Protocol.create

        def timed_create(protocol, msgtype, *args, **kwargs):
            start = time.perf_counter()
            msg = self.profiled(create, protocol, msgtype, *args, **kwargs)
            if msgtype == "PATCH-DOC":
                self.serialise += time.perf_counter() - start
                self.patches += 1
            return msg
        Protocol.create = timed_create

    def reset(self):
        self.callbacks = self.callbacks_cpu = self.serialise = 0.0
        self.patches = 0


def serve(checkpoint: str, work: ServerWork):
    import panel as pn

    from explorer.dashboard import create_app

    states = []

    def app():
        template = create_app(checkpoint=checkpoint)
        state = template.explorer_state
        state.tabs["Explore"].sweep_auto = False  # measure the live run alone
        state.dispatch = work.wrap_dispatch(state.dispatch)
        states.append(state)
        return template

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    server = pn.serve({"/": app}, port=port, address="localhost", show=False, threaded=True, start=True)
    return server, port, states


def cpu_split() -> tuple[float, float]:
    """CPU seconds so far of this process (server, sampler) and of the browser's processes (every
    Chromium process under this one: renderer, compositor and raster threads, GPU process), which the
    renderer's busy time alone leaves out. Linux only (/proc): NaN elsewhere."""
    import os

    from load_test import process_cpu_seconds

    if not Path("/proc/self/stat").exists():
        return float("nan"), float("nan")
    return process_cpu_seconds(os.getpid()), sum(process_cpu_seconds(p) for p in browser_pids())


def browser_pids() -> list[int]:
    """The Chromium processes under this one (Linux: /proc)."""
    import os

    from load_test import process_tree

    return [p for p in process_tree(os.getpid())[1:] if _command(p).startswith("chrom")]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return ""  # it has just exited


def renderer_busy(cdp) -> float:
    """Seconds the page's renderer main thread has been busy (scripts, layout, paint)."""
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics.get("TaskDuration", float("nan"))


def start_sweep_and_wait(state, timeout: float = 60.0) -> bool:
    """--during-sweep: start Explore's quality sweep (on the UI thread) and wait until it is computing,
    so the knob change below lands while it holds the device between steps."""
    explore = state.tabs["Explore"]
    explore.sweep_samples = 8  # long enough to be running when the knob changes
    state.dispatch(explore.start_sweep)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if explore.quality.running and explore.quality.progress > 0:
            return True
        time.sleep(0.01)
    return False


def browser_runs(url: str, states, work: ServerWork, runs: int, last_row: int, during_sweep: bool = False,
                 alone=None) -> list[dict]:
    """Each run: the sampler alone (`alone(seed, owner)`, seconds; the page open and idle) and the same run made
    by a knob change in the page, back to back, so the machine's drift (on a shared 2-core CPU medians of
    runs minutes apart differed by 15%) falls on both sides of each ratio."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        cdp = page.context.new_cdp_session(page)  # the renderer's own busy time (Performance metrics)
        cdp.send("Performance.enable")
        page.goto(url)
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=120_000)
        deadline = time.monotonic() + 300
        while not (states and states[-1].tabs["Explore"].trajectory is not None) and time.monotonic() < deadline:
            time.sleep(0.1)  # the first (auto) run
        time.sleep(1.0)
        work.measuring = True
        for r in range(runs):
            alone_first = r % 2 == 0  # the order alternates, so neither side always runs on a fresher machine
            alone_s = alone(1000 + r, id(states[-1])) if alone is not None and alone_first else float("nan")
            out.append(page_run(page, cdp, states, work, 1000 + r, last_row, during_sweep))
            time.sleep(QUIET_S)  # the page's deferred work (its URL rewrite) ends before the alone run
            if alone is not None and not alone_first:
                alone_s = alone(1000 + r, id(states[-1]))
            out[-1]["alone_s"] = alone_s
        browser.close()
    return out


def page_run(page, cdp, states, work: ServerWork, seed: int, last_row: int, during_sweep: bool) -> dict:
    """One run made by changing the seed knob in the page, with what it cost the server and the browser."""
    swept = start_sweep_and_wait(states[-1]) if during_sweep else None
    work.reset()
    busy, (own, chrome) = renderer_busy(cdp), cpu_split()
    seen = page.evaluate(KNOB_JS, [seed, last_row])
    job = states[-1].tabs["Explore"]._runs.current
    if not job.done.wait(RUN_TIMEOUT_S):
        raise SystemExit(f"error: the page's run did not finish in {RUN_TIMEOUT_S:.0f} s (a loaded machine?)")
    time.sleep(0.3)  # the final callbacks and patches
    traj = states[-1].tabs["Explore"].trajectory
    if traj is None:  # stopped or failed: the header says why
        raise SystemExit(f"error: the page's run ended without a result: {states[-1].status!r} {states[-1].error!r}")
    own_after, chrome_after = cpu_split()
    return {**seen, **({"sweep_was_running": float(swept)} if during_sweep else {}),
            "sampler_s": traj.seconds, "callbacks_s": work.callbacks, "callbacks_cpu_s": work.callbacks_cpu,
            "serialise_s": work.serialise, "patches": work.patches, "browser_s": renderer_busy(cdp) - busy,
            "browser_cpu_s": chrome_after - chrome, "server_cpu_s": own_after - own}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="shakespeare")
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--during-sweep", action="store_true",
                    help="change the knob while Explore's quality sweep is computing (it must not delay the run)")
    ap.add_argument("--profile", metavar="N", type=int, default=0,
                    help="print the N costliest functions of the measured runs' dashboard work (cProfile)")
    args = ap.parse_args()

    import torch

    from explorer.devices import describe_device, resolve_device
    from explorer.sampling.config import config_for

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device("auto")
    model = load_off_main(args.checkpoint, device)
    config = config_for(model, steps=args.steps)  # the page runs the checkpoint's recommended knobs too
    print(f"{args.checkpoint}: {args.length} chars, {args.steps} steps, {config.strategy} order, temperature "
          f"{config.temperature:g}, device {describe_device(device)}, torch threads {torch.get_num_threads()}")
    base = sampler_baseline(model, config, args.length, args.runs)
    print(f"sampler alone (explorer.sampling.sample, recorded), before the server starts: {base * 1000:.0f} ms per run "
          f"(median of {args.runs})")
    if args.no_browser:
        return 0
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} missing: browser figures skipped")
        return 0
    report(args, lambda seed, owner: sample_once(model, config.replace(seed=seed), args.length, owner))
    return 0


def report(args, alone) -> None:
    work = ServerWork(profile=bool(args.profile))
    work.patch_protocol()
    server, port, states = serve(args.checkpoint, work)
    try:
        url = f"http://localhost:{port}/?steps={args.steps}&length={args.length}"  # over the recommended ones
        rows = browser_runs(url, states, work, args.runs, args.steps, args.during_sweep, alone)
    finally:
        server.stop()
    med = {k: statistics.median(r[k] for r in rows if k in r) for k in rows[0]}
    base = med["alone_s"]
    print(f"knob change -> row 0 (start canvas) in the page: {med['row0']:.0f} ms; "
          f"-> row 1 (first sampled step): {med['row1']:.0f} ms")
    print(f"knob change -> last row in the page (whole run): {med['done']:.0f} ms; "
          f"the run's own sampler time in the dashboard: {med['sampler_s'] * 1000:.0f} ms; "
          f"sampler alone: {base * 1000:.0f} ms")
    print(f"dashboard work per run on the server: {med['callbacks_s'] * 1000:.0f} ms in plot/frame callbacks "
          f"(wall; {med['callbacks_cpu_s'] * 1000:.0f} ms CPU) + {med['serialise_s'] * 1000:.0f} ms serialising "
          f"{med['patches']:.0f} patches = {(med['callbacks_s'] + med['serialise_s']) * 1000:.0f} ms")
    print(f"browser renderer busy per run (receive, draw): {med['browser_s'] * 1000:.0f} ms")
    print(f"CPU per run: browser processes (all threads) {med['browser_cpu_s'] * 1000:.0f} ms; this process "
          f"(sampler, server) {med['server_cpu_s'] * 1000:.0f} ms")
    print(f"whole run in the page minus the sampler alone: {med['done'] - base * 1000:.0f} ms")
    if args.during_sweep:  # goal: a sweep never delays the next run's first row past 300 ms
        print(f"goal: knob change -> first row within 300 ms while a sweep runs: {med['row1']:.0f} ms, "
              f"{'met' if med['row1'] <= 300 else 'NOT met'}")
        print(f"(each knob change landed while Explore's quality sweep was computing: "
              f"{sum(r['sweep_was_running'] for r in rows):.0f} of {len(rows)} runs; it cancels the sweep)")
    else:
        ratio = statistics.median(r["done"] / (r["alone_s"] * 1000) for r in rows)
        goal = 1.15 * base * 1000 + 150
        print(f"whole run / sampler alone, median of the back-to-back pairs: {ratio:.2f}; goal: the whole "
              f"run at most 1.15 x the sampler alone + 150 ms = {goal:.0f} ms: {'met' if med['done'] <= goal else 'NOT met'}")
    for i, r in enumerate(rows):
        print(f"  run {i}: " + ", ".join(f"{k}={v * 1000 if k.endswith('_s') else v:.0f}" for k, v in r.items()))
    if work.profiler is not None:
        pstats.Stats(work.profiler).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    sys.exit(main())
