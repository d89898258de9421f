"""Explore's default run against its floor: the run a dashboard session starts, and the model's forward alone.

    python benchmarks/bench_live.py [--checkpoint shakespeare shakespeare-large] [--device auto]
                                    [--runs 5] [--compile] [--threads N] [--only ROW ...] [--profile]

Per checkpoint, the run Explore starts when a page opens (the checkpoint's recommended knobs over the
defaults, its whole context, batch 1, the trajectory recorded and each step handed to a live callback as the
page's stream is), timed end to end (median of --runs after one warm-up run) under each way of running the
model that applies on the device:

  fp32            the plain forward in float32 (what `run.py sample` does)
  fp32 unrecorded the same with record=False and no live callback (a sweep's runs)
  tf32            float32 with TF32 matrix products (CUDA)
  bf16            torch.autocast to bfloat16 (`serve --precision auto` on CUDA)
  ... + graphs    the same with explorer.graphs installed: each forward replayed from a CUDA graph
  ... resident    the same through the resident walk (sampling/resident.py: every step planned on the host,
                  nothing read from the device; with graphs, each step, forward included, one CUDA graph);
                  the other rows take the general walk, which reads the device once a step
  compile         torch.compile(mode="reduce-overhead") on the model (--compile; CUDA)

Printed per row: ms per run, model calls (NFE), ms per step outside the model (the run minus NFE x that
variant's forward, over the steps), the run over the floor (NFE x the float32 forward replayed from a
graph: the launch floor, CUDA only), and whether its text is the fp32 run's. The forwards are timed
alone, a call at a time, each synchronised (medians of 50).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer import graphs, load_checkpoint  # noqa: E402
from explorer.devices import describe_device, resolve_device  # noqa: E402
from explorer.sampling import sample  # noqa: E402
from explorer.sampling.config import config_for, recommended  # noqa: E402

FORWARD_CALLS = 50


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def precision(name: str, device):
    """float32, TF32 matrix products or bf16 autocast around the calls inside."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = name == "tf32"
    try:
        if name == "bf16":
            with torch.autocast(device.type, dtype=torch.bfloat16):
                yield
        else:
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def forward_ms(model, x, t, device, graphed: bool) -> float:
    """Median ms of one forward of (x, t), each call synchronised; graphed: replayed from a CUDA graph."""
    call = (lambda: model(x, t))
    if graphed:
        replay = graphs.capture_cuda(model.forward, x, t, graphs.active_autocast_dtype(x.device.type))
        call = (lambda: replay(x, t))
    times = []
    with torch.no_grad():
        for _ in range(FORWARD_CALLS + 3):
            sync(device)
            start = time.perf_counter()
            call()
            sync(device)
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times[3:])


def run_ms(model, cfg, length: int, device, runs: int, live: bool = True):
    """(median ms of a run, its Trajectory): one warm-up run, then `runs` timed ones."""
    kwargs = dict(on_step=lambda record: True) if live else dict(record=False)
    times, traj = [], None
    for _ in range(runs + 1):
        sync(device)
        start = time.perf_counter()
        traj = sample(model, cfg, length=length, **kwargs)
        sync(device)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times[1:]), traj


def variants(device, with_compile: bool):
    """(row name, precision, graphs, live, compile, walk) of the rows that apply on `device`; walk is
    MDLM_EXPLORER_RESIDENT's value for the row: off (the general walk, reading the device once a step) or
    on (the resident walk, sampling/resident.py: on a GPU with graphs, each step one captured graph)."""
    rows = [("fp32", "fp32", False, True, False, "off"), ("fp32 unrecorded", "fp32", False, False, False, "off")]
    if device.type != "cuda":
        return rows + [("bf16", "bf16", False, True, False, "off"), ("fp32 resident", "fp32", False, True, False, "on")]
    rows += [("bf16", "bf16", False, True, False, "off"),
             ("fp32 + graphs", "fp32", True, True, False, "off"), ("fp32 unrecorded + graphs", "fp32", True, False, False, "off"),
             ("tf32 + graphs", "tf32", True, True, False, "off"), ("bf16 + graphs", "bf16", True, True, False, "off"),
             ("fp32 resident", "fp32", False, True, False, "on"),
             ("fp32 + graphs resident", "fp32", True, True, False, "on"),
             ("fp32 unrecorded + graphs resident", "fp32", True, False, False, "on"),
             ("tf32 + graphs resident", "tf32", True, True, False, "on"),
             ("bf16 + graphs resident", "bf16", True, True, False, "on")]
    return rows + ([("compile", "fp32", False, True, True, "off")] if with_compile else [])


@contextlib.contextmanager
def walk(value: str):
    """MDLM_EXPLORER_RESIDENT set to `value` inside."""
    old = os.environ.get("MDLM_EXPLORER_RESIDENT")
    os.environ["MDLM_EXPLORER_RESIDENT"] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ["MDLM_EXPLORER_RESIDENT"]
        else:
            os.environ["MDLM_EXPLORER_RESIDENT"] = old


def bench_checkpoint(name: str, device, runs: int, with_compile: bool, only=None) -> None:
    plain = load_checkpoint(name, device, graphs=False)
    wanted = recommended(plain)
    cfg = config_for(plain)
    length = wanted.get("length", plain.config.block_size)
    x = torch.full((1, length), plain.config.mask_id, dtype=torch.long, device=device)
    t = torch.ones(1, device=device)
    fwd = {}
    for prec in ("fp32", "tf32", "bf16") if device.type == "cuda" else ("fp32", "bf16"):
        with precision(prec, device):
            for graphed in (False, True) if device.type == "cuda" else (False,):
                fwd[(prec, graphed)] = forward_ms(plain, x, t, device, graphed)
    floor = fwd.get(("fp32", True))
    print(f"\n{name} on {describe_device(device)}: {length} positions, {cfg.steps} steps, {cfg.strategy}, "
          f"T {cfg.temperature:g}, batch 1; forward ms " +
          ", ".join(f"{p}{' graph' if g else ''} {ms:.3f}" for (p, g), ms in fwd.items()))
    print(f"{'variant':<26} {'ms/run':>8} {'NFE':>4} {'ms/step outside':>16} {'/ floor':>8} {'same text':>10}")
    reference = None
    for row, prec, graphed, live, compiled, resident in variants(device, with_compile):
        if only and row not in only:
            continue
        model = load_checkpoint(name, device, graphs=False)
        try:
            if graphed:
                graphs.install(model)
            if compiled:
                model = torch.compile(model, mode="reduce-overhead")
                model.config, model.tokenizer = plain.config, plain.tokenizer
            with precision(prec, device), walk(resident):
                ms, traj = run_ms(model, cfg, length, device, runs, live)
        except Exception as e:  # a variant the device or torch cannot run: said, and the others go on
            print(f"{row:<26} failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
            continue
        text = traj.texts()[0]
        reference = text if reference is None else reference
        call_ms = fwd.get((prec, graphed), fwd[("fp32", False)])
        outside = (ms - traj.nfe * call_ms) / cfg.steps
        ratio = f"{ms / (traj.nfe * floor):.2f}" if floor else "-"
        print(f"{row:<26} {ms:>8.1f} {traj.nfe:>4} {outside:>16.2f} {ratio:>8} {'yes' if text == reference else 'no':>10}",
              flush=True)


def profile(name: str, device, rows: int = 25) -> None:
    """torch.profiler's table of one default run with CUDA graphs (where they apply): where a step's time
    outside the model goes, op by op, on the host and on the device."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    model = graphs.install(load_checkpoint(name, device, graphs=False))
    cfg = config_for(model)
    length = recommended(model).get("length", model.config.block_size)
    run_ms(model, cfg, length, device, 1)  # captures made
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        sample(model, cfg, length=length, on_step=lambda record: True)
        sync(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\n{name}: one default run, profiled (two passes over it: ops by host time, then by {key})")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))
    print(prof.key_averages().table(sort_by=key, row_limit=10))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", nargs="+", default=["shakespeare", "shakespeare-large"])
    p.add_argument("--device", default="auto")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--compile", action="store_true", help="also time torch.compile(mode='reduce-overhead') (CUDA)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--only", nargs="+", default=None, metavar="ROW",
                   help="time only these rows (their names as printed: fp32, 'fp32 + graphs', compile ...)")
    p.add_argument("--profile", action="store_true", help="also print torch.profiler's tables of one run")
    args = p.parse_args(argv)
    torch.set_flush_denormal(True)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    for name in args.checkpoint:
        bench_checkpoint(name, device, args.runs, args.compile and device.type == "cuda", args.only)
        if args.profile:
            profile(name, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
