"""Sampler speed figures, printed as a table.

    python benchmarks/bench_sampler.py [--quick] [--device auto|cpu|cuda] [--threads N] [--random-weights]
                                       [--parts sweep,overhead,ar] [--tokens-per-call 4096,16384,65536]

1. The step-count sweep of the "Sampling Strategies & Speed Tradeoffs" notebook on `patterns` (steps
   1,2,3,5,8,12,16,24,32 x 30 samples x confidence/random), in one run: one sample at a time, batched per
   cell (one `sample` of 30 rows per cell), and packed (all cells through `sample_many`: shared model calls,
   and the cells stepped as one merged batch; the same samples). Goals: packed >= 1.8x batched (the median
   of the rounds' paired ratios), batched >= 20x one at a time. Also where each sweep's time goes (the
   model, the rest), and the sweeps' device ops (not views) and host syncs, batched vs packed: a GPU's time follows them
   where kernel launches dominate, so a run on a CPU alone can see what a change does there; and both
   sweeps timed on a launch-bound stand-in of the model (its forward costs its op count whatever its rows). Batched and
   packed alternate over a few rounds (the CPU is shared); the table gives medians of the times and of the
   rounds' batched / packed ratios.
2. Overhead on `shakespeare`, 256 chars, 32 steps, batch 1 and 32: sampler wall time / (NFE x one
   model forward of that batch). Goal <= 1.10. Forward time drifts when the CPU is shared, so the
   table also gives the in-run ratio: wall time / time spent inside the model calls of that run. Both record
   settings are warmed up at the timed batch first, and at batch 1 timed in both orders (their mean).
3. AR with KV cache vs recomputing the prefix, tokens/s ratio, on `shakespeare-ar`.
--parts runs only some parts (a few minutes of GPU time: `--device cuda --quick --parts sweep`);
--tokens-per-call times the packed sweep at several shared-call sizes, each round against its own batched
sweep, with the model calls and device ops each makes as a GPU runs it (fewer, larger calls cut launches).
A missing checkpoint skips its part, unless --random-weights, which times an untrained model of the
same shape instead (speed does not depend on the weights). Ratios within one run are what count.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from explorer.devices import describe_device, model_device, resolve_device  # noqa: E402
from explorer.model import ModelConfig, Transformer  # noqa: E402
from explorer.sampling import SamplerConfig, sample, sample_ar, sample_many  # noqa: E402
from explorer.sampling.packing import TOKENS_PER_CALL  # noqa: E402

# The shipped models' shapes, for --random-weights when a checkpoint is not there yet.
SHAPES = {
    "patterns": dict(vocab_size=16, mask_id=15, block_size=24, n_layer=3, n_head=4, n_embd=64,
                     time_conditioning="adaln"),
    "shakespeare": dict(vocab_size=66, mask_id=65, block_size=256, n_layer=6, n_head=4, n_embd=256),
    "shakespeare-ar": dict(vocab_size=66, mask_id=65, block_size=256, n_layer=6, n_head=4, n_embd=256,
                           kind="ar"),
}
ROWS: list[tuple[str, str, str]] = []


def row(figure: str, value: str, note: str = "") -> None:
    ROWS.append((figure, value, note))
    print(f"  {figure:<52} {value:>12}  {note}", flush=True)


def get_model(name: str, device, random_weights: bool):
    try:
        return load_checkpoint(name, device), "checkpoint"
    except CheckpointError:
        if not random_weights:
            print(f"[skip] checkpoints/{name}.safetensors is not there yet (or rerun with --random-weights)")
            return None, None
        torch.manual_seed(0)
        return Transformer(ModelConfig(**SHAPES[name])).to(device).eval(), "untrained, same shape"


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


class Wrapper(torch.nn.Module):
    """A model around `inner` that computes where `inner` does: its `device` is the inner model's
    (devices.model_device), so the sampler makes a run's tensors there even where the inner model has
    no parameter of its own (LaunchBoundModel). Without it a wrapper looked like a CPU model and a run on
    a GPU met the GPU's logits with its CPU tensors (a merged walk's torch.cat(out=...))."""

    def __init__(self, model):
        super().__init__()
        self.inner, self.config = model, model.config
        self.tokenizer = getattr(model, "tokenizer", None)

    @property
    def device(self) -> torch.device:
        return model_device(self.inner)


class TimedModel(Wrapper):
    """Wraps a model and adds up the wall time spent inside its forward calls."""

    def __init__(self, model):
        super().__init__(model)
        self.seconds = 0.0

    def forward(self, *args, **kwargs):
        sync(self.device)
        start = time.perf_counter()
        out = self.inner(*args, **kwargs)
        sync(self.device)
        self.seconds += time.perf_counter() - start
        return out


SWEEP_STEPS = [1, 2, 3, 5, 8, 12, 16, 24, 32]  # the step counts of the notebook's step-count sweep


class CountingModel(Wrapper):
    """Wraps a model and counts its forward calls and the rows they computed (untimed passes only)."""

    def __init__(self, model):
        super().__init__(model)
        self.calls, self.rows = 0, 0

    def forward(self, x, t=None):
        self.calls, self.rows = self.calls + 1, self.rows + x.shape[0]
        return self.inner(x, t)


class LaunchBoundModel(torch.nn.Module):
    """The patterns model as a GPU runs it at these sizes, roughly: a forward costs its op count whatever
    its rows. Its logits are a fixed table lookup (so runs still diverge and commit), plus as many tiny
    ops as the real forward dispatches, on a one-element tensor."""

    def __init__(self, model, ops: int):
        super().__init__()
        self.config, self.ops = model.config, ops
        V = model.config.vocab_size
        self.register_buffer("table", torch.randn(V, V, generator=torch.Generator().manual_seed(0)).to(model.device))
        self.register_buffer("tick", torch.zeros(1, device=model.device))

    @property
    def device(self) -> torch.device:
        """Where it computes: with no parameter, the sampler would take it for a CPU model (model_device)."""
        return self.table.device

    def forward(self, x, t=None):
        tick = self.tick
        for _ in range(self.ops - 1):
            tick = tick + 1
        return self.table[x]  # (B, L, V)


def bench_launch_bound(device, model, configs, n, rounds: int) -> None:
    """Batched vs packed with LaunchBoundModel, packing's CPU-only paths off: where each op costs about
    the same whatever its size (a GPU's launches), the ratio follows the sweeps' op counts and the sampler's
    own Python; on a CPU the sampler's ops still grow with their tensors, so this is a floor, not a GPU
    timing."""
    L = model.config.block_size
    x, t = torch.full((n, L), model.config.mask_id, device=model.device), torch.full((n,), 0.5, device=model.device)
    stub = LaunchBoundModel(model, device_ops(lambda m: m(x, t), model)[0])
    ratios = []
    with as_off_the_cpu(device):
        sweep_packed(stub, configs, n)  # warm-up
        for _ in range(rounds):
            ratios.append(timed(sweep_batched, stub, configs, n) / timed(sweep_packed, stub, configs, n))
    row("  launch-bound model: packed vs batched", f"{statistics.median(ratios):.2f}x",
        f"median of {rounds} paired rounds; a forward of {stub.ops} ops whatever its rows, CPU-only paths off")


def sweep_batched(model, configs, n):
    return [sample(model, cfg, batch_size=n, record=False) for cfg in configs]


def sweep_packed(model, configs, n, merge=True, tokens_per_call=TOKENS_PER_CALL):
    return sample_many(model, [dict(config=cfg, batch_size=n, record=False) for cfg in configs], merge=merge,
                       tokens_per_call=tokens_per_call)


def sweep_apart(model, configs, n):
    """Packed model calls, but every cell stepping on its own (sample_many(merge=False))."""
    return sweep_packed(model, configs, n, merge=False)


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def bench_call_sizes(device, model, configs, n, sizes: list[int], rounds: int) -> None:
    """Packed sweeps at several tokens_per_call (sample_many's shared-call size), each round's against its own
    batched sweep: off the CPU a call's cost is its kernel launches, so fewer, larger calls may pay there."""
    def packed_at(size):
        return functools.partial(sweep_packed, tokens_per_call=size)

    ratios = {size: [] for size in sizes}
    for _ in range(rounds):
        for size in sizes:  # each size right after its own batched sweep: the pair shares the machine's state
            ratios[size].append(timed(sweep_batched, model, configs, n) / timed(packed_at(size), model, configs, n))
    for size in sizes:
        with as_off_the_cpu(device):
            counted = CountingModel(model)
            packed_at(size)(counted, configs, n)
            ops = device_ops(packed_at(size), model, configs, n)
        row(f"  packed vs batched, tokens_per_call={size}", f"{statistics.median(ratios[size]):.2f}x",
            f"median of {rounds} paired rounds; {counted.calls} model calls and {ops[0]} device ops as a GPU runs it")


def bench_sweep(device, quick: bool, random_weights: bool, call_sizes: list[int] = ()) -> None:
    model, source = get_model("patterns", device, random_weights)
    if model is None:
        return
    n = 30
    configs = [SamplerConfig(steps=steps, strategy=strategy, schedule="remaining")  # the notebook rule
               for strategy in ("confidence", "random") for steps in SWEEP_STEPS]
    print(f"\n1. step-count sweep on patterns ({source}): steps {SWEEP_STEPS} x {n} samples x confidence/random")
    counted = CountingModel(model)
    same = all((a.final == b.final).all() and a.nfe == b.nfe for a, b in
               zip(sweep_batched(model, configs, n), sweep_packed(counted, configs, n)))  # also the warm-up
    nfe = sum(t.nfe for t in sweep_batched(model, configs, n))
    one = timed(lambda: [sample(model, cfg.replace(seed=i), record=False) for cfg in configs for i in range(n)])
    times = {"batched": [], "packed": [], "apart": []}
    for _ in range(5 if quick else 9):
        times["batched"].append(timed(sweep_batched, model, configs, n))
        times["packed"].append(timed(sweep_packed, model, configs, n))
        times["apart"].append(timed(sweep_apart, model, configs, n))
    batched, packed, apart = (statistics.median(times[k]) for k in ("batched", "packed", "apart"))
    row("patterns sweep, one sample at a time (s)", f"{one:.2f}")
    row("patterns sweep, batched per cell (s)", f"{batched:.2f}", f"{nfe} model calls of <= {n} rows")
    row("patterns sweep, packed (s)", f"{packed:.2f}",
        f"{counted.calls} model calls, {counted.rows} rows; same samples: {'yes' if same else 'NO'}")
    row("patterns sweep, packed, cells stepping apart (s)", f"{apart:.2f}", "sample_many(merge=False)")
    row("patterns sweep speed-up, batched vs one at a time", f"{one / batched:.1f}x", "goal >= 20x")
    row("patterns sweep speed-up, packed vs one at a time", f"{one / packed:.1f}x")
    # each round's batched and packed sweeps run back to back: their ratio cancels the shared CPU's drift
    paired = statistics.median(b / p for b, p in zip(times["batched"], times["packed"]))
    row("patterns sweep speed-up, packed vs batched", f"{paired:.2f}x",
        f"goal >= 1.8x; median of {len(times['packed'])} rounds' ratios (medians' ratio {batched / packed:.2f}x, "
        f"fastest rounds' {min(times['batched']) / min(times['packed']):.2f}x)")
    sweep_costs(device, model, configs, n)
    bench_launch_bound(device, model, configs, n, 5 if quick else 9)
    if call_sizes:
        bench_call_sizes(device, model, configs, n, call_sizes, 5 if quick else 9)
    # The sampler cannot beat the model: if one forward of 30 rows costs more than 1/20 of 30 forwards
    # of one row (compute-bound CPU), 20x is out of reach whatever the sampler does.
    L = model.config.block_size
    ceiling = statistics.median(n * forward_seconds(model, 1, L, 5) / forward_seconds(model, n, L, 1)
                                for _ in range(15))  # interleaved: CPU load drifts
    row(f"  ceiling: {n} x forward(B=1) / forward(B={n})", f"{ceiling:.1f}x", "model only, no sampler")


def sweep_costs(device, model, configs, n) -> None:
    """Where each sweep's time goes (one more pass each, the model timed with a sync around every call, so
    on a GPU the totals run a little over the rounds'): the model and the rest (the sampler, packing);
    and their device ops and host syncs, which a GPU's time follows where kernel launches dominate."""
    sweeps = (("batched", sweep_batched), ("packed", sweep_packed))
    for name, fn in sweeps:
        inner = TimedModel(model)
        total = timed(fn, inner, configs, n)
        model_ms, rest_ms = inner.seconds * 1e3, (total - inner.seconds) * 1e3
        row(f"  {name} sweep: in the model / the rest (ms)", f"{model_ms:.0f} / {rest_ms:.0f}",
            "one pass, a sync around each model call")
    with as_off_the_cpu(device):
        ops = {name: device_ops(fn, model, configs, n) for name, fn in sweeps}
    row("  device ops, batched / packed", f"{ops['batched'][0] / ops['packed'][0]:.2f}x",
        f"{ops['batched'][0]} / {ops['packed'][0]} ops on the device ({ops['batched'][1]} / {ops['packed'][1]} "
        f"host syncs): where kernel launches dominate (a GPU), the time follows these"
        + ("; the packed sweep's CPU-only paths (unique rows, split calls) left out and its grouping keys read "
           "through host copies, as a GPU runs it"
           if device.type == "cpu" else ""))


VIEW_OPS = ("view", "_unsafe_view", "slice", "select", "t", "transpose", "unsqueeze", "squeeze", "expand",
            "permute", "detach", "alias", "as_strided", "split", "unbind", "narrow", "lift_fresh", "_reshape_alias")
SYNC_OPS = ("_local_scalar_dense", "nonzero", "is_nonzero", "unique_dim", "_unique2", "masked_select")


@contextlib.contextmanager
def as_off_the_cpu(device):
    """On the CPU, packing's CPU-only paths (computing equal rows once, splitting a shared call into
    cache-sized ones: packing._distinct_rows) switched off, so the op count is the one a GPU would run."""
    import explorer.sampling.packing as packing
    import explorer.sampling.proposals as proposals

    if device.type != "cpu":
        yield
        return
    # and the grouping keys read through one host copy per canvas length, and the draws guarded, as off the CPU
    cpu_only = packing._distinct_rows, packing._on_host, set(proposals.SEQUENTIAL_CUMSUM)
    packing._distinct_rows, packing._on_host = (lambda model, x, t: model(x, t)), packing.host_copies
    proposals.SEQUENTIAL_CUMSUM.clear()
    try:
        yield
    finally:
        packing._distinct_rows, packing._on_host = cpu_only[:2]
        proposals.SEQUENTIAL_CUMSUM.update(cpu_only[2])


def device_ops(fn, *args) -> tuple[int, int]:
    """(ops, host syncs) of fn(*args): aten ops with a tensor on the model's device that are not views (each a
    kernel launch on a GPU; on the CPU every op counts), and those that make the host wait for the device
    (an item(), a nonzero(), a copy to the host)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    device = args[0].device
    counts = [0, 0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, fargs=(), kwargs=None):
            out = func(*fargs, **(kwargs or {}))
            name = func.overloadpacket.__name__
            tensors = [a for a in (*fargs, *(kwargs or {}).values(), out) if isinstance(a, torch.Tensor)]
            on_device = any(a.device == device for a in tensors)
            if on_device and name not in VIEW_OPS:
                counts[0] += 1
            to_host = name == "_to_copy" and device.type != "cpu" and isinstance(out, torch.Tensor) and out.device.type == "cpu"
            if on_device and (name in SYNC_OPS or to_host):
                counts[1] += 1
            return out

    with Count(), host_reads_counted(counts, device):
        fn(*args)
    return counts[0], counts[1]


@contextlib.contextmanager
def host_reads_counted(counts: list, device):
    """On the CPU, tolist() and cpu() dispatch no op, but off the CPU each waits for the device: counted
    here as the host syncs they are there (on a GPU the copy they make is counted as an op already)."""
    if device.type != "cpu":
        yield
        return
    saved = {name: getattr(torch.Tensor, name) for name in ("tolist", "cpu")}

    def counted(read):
        def wrapper(self, *a, **k):
            counts[1] += 1
            return read(self, *a, **k)
        return wrapper

    for name, read in saved.items():
        setattr(torch.Tensor, name, counted(read))
    try:
        yield
    finally:
        for name, read in saved.items():
            setattr(torch.Tensor, name, read)


def forward_seconds(model, B: int, L: int, reps: int) -> float:
    """Median wall time of one forward pass on a half-masked (B, L) canvas."""
    x = torch.randint(0, model.config.mask_id, (B, L), device=model.device)
    x[:, ::2] = model.config.mask_id
    t = torch.full((B,), 0.5, device=model.device)
    times = []
    with torch.no_grad():
        model(x, t)  # warm-up
        for _ in range(reps):
            sync(model.device)
            start = time.perf_counter()
            model(x, t)
            sync(model.device)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_overhead(device, quick: bool, random_weights: bool) -> None:
    model, source = get_model("shakespeare", device, random_weights)
    if model is None:
        return
    L = min(256, model.config.block_size)
    print(f"\n2. overhead on shakespeare ({source}): {L} chars; ratio = wall / (NFE x forward)")
    timed = TimedModel(model)
    for B in (1, 32):
        steps = 8 if quick and B == 32 and device.type == "cpu" else 32
        reps = 3 if B == 32 and device.type == "cpu" else 10
        # Each setting warmed up at its own batch and length, through the timed wrapper, before either is
        # timed: a first run pays once for what later runs reuse (on a GPU, kernels loaded lazily and the
        # caching allocator's first blocks; on a CPU, first-touch pages), and that landed in whichever
        # record setting was timed first: record=False, once 17 ms/step against record=True's 2.2 on a GPU.
        for record in (False, True):
            sample(timed, SamplerConfig(steps=2), batch_size=B, length=L, record=record)
        # then timed in turn, each order once at batch 1 (cheap there), so neither always runs first
        order = (False, True, True, False) if B == 1 else (False, True)
        fwd = forward_seconds(model, B, L, reps)
        took = {False: [], True: []}
        for record in order:
            timed.seconds = 0.0
            tr = sample(timed, SamplerConfig(steps=steps), batch_size=B, length=L, record=record)
            took[record].append((tr.seconds, timed.seconds, tr.nfe, tr.n_steps))
        fwd = (fwd + forward_seconds(model, B, L, reps)) / 2
        for record in (False, True):
            wall, inside, nfe, n = (statistics.mean(x) for x in zip(*took[record]))
            tag = f"B={B}, {steps} steps, record={record}"
            row(f"overhead {tag}", f"{wall / (nfe * fwd):.3f}", f"goal <= 1.10; forward {fwd * 1e3:.1f} ms")
            row(f"  in-run overhead {tag}", f"{wall / inside:.3f}",
                f"{(wall - inside) / n * 1e3:.2f} ms/step outside the model"
                + (f" (mean of {len(took[record])} runs)" if len(took[record]) > 1 else ""))


def bench_ar(device, quick: bool, random_weights: bool) -> None:
    model, source = get_model("shakespeare-ar", device, random_weights)
    if model is None:
        return
    L = 128 if quick else min(256, model.config.block_size)
    print(f"\n3. AR on shakespeare-ar ({source}): {L} positions, batch 1, tokens/s with and without KV cache")
    rates = {}
    for use_cache in (True, False):
        tr = sample_ar(model, SamplerConfig(), length=L, use_cache=use_cache, record=False)
        rates[use_cache] = tr.nfe / tr.seconds
        row(f"AR tokens/s, {'KV cache' if use_cache else 'recompute prefix'}", f"{rates[use_cache]:.0f}")
    row("AR KV cache speed-up (tokens/s ratio)", f"{rates[True] / rates[False]:.1f}x")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer settings: seconds to a minute or two on a CPU")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--random-weights", action="store_true",
                   help="time untrained models of the shipped shapes when a checkpoint is missing")
    p.add_argument("--parts", default="sweep,overhead,ar",
                   help="which parts to run, comma-separated (a few GPU minutes: --parts sweep)")
    p.add_argument("--tokens-per-call", default="", metavar="LIST",
                   help="also time the packed sweep at these shared-call sizes, e.g. 4096,16384,65536")
    args = p.parse_args(argv)
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    if not parts or parts - {"sweep", "overhead", "ar"}:
        p.error(f"--parts: pick from sweep, overhead, ar; got {args.parts!r}")
    try:
        sizes = [int(x) for x in args.tokens_per_call.split(",") if x.strip()]
    except ValueError:
        p.error(f"--tokens-per-call: whole numbers, e.g. 4096,16384; got {args.tokens_per_call!r}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    print(f"device {describe_device(device)}, torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s)"
          f"{', quick' if args.quick else ''}")
    with torch.no_grad():
        if "sweep" in parts:
            bench_sweep(device, args.quick, args.random_weights, sizes)
        if "overhead" in parts:
            bench_overhead(device, args.quick, args.random_weights)
        if "ar" in parts:
            bench_ar(device, args.quick, args.random_weights)
    print("\nsummary")
    for figure, value, note in ROWS:
        print(f"| {figure.strip():<52} | {value:>8} | {note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
