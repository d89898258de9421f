"""Block diffusion with a key/value cache (the `cache` knob: Fast-dLLM's prefix and dual caches) against the
uncached sampler, on the shipped checkpoints, one run.

    python benchmarks/bench_cache.py [--checkpoints shakespeare shakespeare-large] [--length 256]
                                     [--block-length 32] [--steps 64 128] [--temperatures 0 0.8]
                                     [--samples 3] [--repeats 1] [--judge shakespeare-ar] [--threads 1]
                                     [--hf-standin] [--llada-8b-shape] [--device cpu|cuda|auto]

For every checkpoint, step count and temperature, one untimed sample in each mode warms the device up; then
each sample is generated three times in a row, uncached,
with the prefix cache and with the dual cache (same seed, one sample a call: a sample's latency), so the
three see the same load (--repeats times, for steadier times on a loaded machine); printed per mode: wall
seconds per sample (median), the speed-up over uncached (the median of the back-to-back ratios), the fraction of positions holding the uncached run's token (greedy:
the cache's approximation alone; at a temperature a changed token also changes every later draw, so there
it says how soon the runs part) and the mean gen-NLL (nats per character, judged by the causal model
--judge; lower is better: the quality the cache costs). Strategy: confidence (LLaDA's low-confidence
remasking, the block-diffusion setting Fast-dLLM accelerates); greedy runs sample once (without a prompt
every greedy sample is the same).

--hf-standin times, instead of the checkpoints, a random LLaDA-shaped Hugging Face model loaded through the
project's loader as remote code (tests/support/hf.py: 4 layers, 256 wide, 4 heads, rotary positions,
bidirectional, a forward taking past_key_values and Fast-dLLM's replace_position; its 80-token WordPiece
vocabulary): the cache through the wrapper of LLaDA-style remote code. No judge reads its text (gen-NLL -).
--llada-8b-shape times the same code at LLaDA-8B's shape (llada_8b_standin), random, in bf16 on --device.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer import load_checkpoint  # noqa: E402
from explorer.checkpoint import resolve_checkpoint  # noqa: E402
from explorer.devices import describe_device, resolve_device  # noqa: E402
from explorer.metrics import gen_nll  # noqa: E402
from explorer.sampling import SamplerConfig, sample  # noqa: E402

MODES = ("none", "prefix", "dual")


def timed(model, cfg: SamplerConfig, length: int):
    """(seconds, final tokens (L,), text) of one sample (no text for a model without a tokenizer)."""
    device = model.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    traj = sample(model, cfg, batch_size=1, length=length, record=False)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    text = traj.texts()[0] if getattr(model, "tokenizer", None) is not None else ""
    return time.perf_counter() - start, traj.final[0], text


def warm_up(model, steps: int, temperature: float, args) -> None:
    """One untimed sample in each mode first. A mode's first call pays for what the device builds lazily the
    first time it meets a shape (cuBLAS and attention kernels picked, workspaces, the allocator's pool);
    timed, that cost falls on whichever mode ran first, and with one sample it can outweigh the cache."""
    for mode in MODES:
        cfg = SamplerConfig(steps=steps, block_length=args.block_length, temperature=temperature,
                            strategy="confidence", cache=mode, seed=0)
        timed(model, cfg, args.length)


def measure(model, judge, steps: int, temperature: float, args) -> dict:
    """Each mode's seconds, tokens and texts over the samples, the modes of a sample back to back."""
    n = 1 if temperature == 0 else args.samples
    out = {mode: {"seconds": [], "tokens": [], "texts": []} for mode in MODES}
    warm_up(model, steps, temperature, args)
    for seed in range(n):
        for repeat in range(args.repeats):
            for mode in MODES:
                cfg = SamplerConfig(steps=steps, block_length=args.block_length, temperature=temperature,
                                    strategy="confidence", cache=mode, seed=seed)
                seconds, tokens, text = timed(model, cfg, args.length)
                out[mode]["seconds"].append(seconds)
                if repeat == 0:  # the same seed gives the same sample
                    out[mode]["tokens"].append(tokens)
                    out[mode]["texts"].append(text)
    for mode in MODES:
        out[mode]["gen_nll"] = float(np.mean(gen_nll(judge, out[mode]["texts"]))) if judge is not None else None
    return out


def rows(name: str, steps: int, temperature: float, got: dict) -> list[str]:
    base = got["none"]
    lines = []
    for mode in MODES:
        mine = got[mode]
        speedup = statistics.median(b / s for b, s in zip(base["seconds"], mine["seconds"]))
        agree = float(np.mean([np.mean(a == b) for a, b in zip(mine["tokens"], base["tokens"])]))
        nll = "-" if mine["gen_nll"] is None else f"{mine['gen_nll']:.3f}"
        lines.append(f"| {name} | {steps} | {temperature:g} | {mode} | {len(mine['texts'])} | "
                     f"{statistics.median(mine['seconds']):.2f} | {speedup:.2f}x | {agree:.3f} | {nll} |")
    return lines


def hf_standin(tmp: Path, length: int):
    """The LLaDA-shaped remote-code model of tests/support/hf.py, random, written to tmp and loaded as the
    project loads a Hugging Face model (its remote code trusted: the benchmark wrote it)."""
    from explorer.hf import HFOptions
    from tests.support.hf import cached_remote_code_dir

    path = cached_remote_code_dir(tmp / "bench_llada_standin", "llada", "replace", layers=4, hidden=256, heads=4,
                                  context=length)
    model = load_checkpoint(str(path), hf=HFOptions(trust_remote_code=True))
    assert model.cache_modes == ("prefix", "dual")
    return model


LLADA_8B = dict(vocab_size=126464, hidden_size=4096, n_heads=32, n_layers=32, mask_token_id=126336)


def llada_8b_standin(tmp: Path, length: int, device, shape: dict = LLADA_8B):
    """The stand-in's remote code at LLaDA-8B's width, depth, heads and vocabulary (its MLP, 2 x the width
    with GELU, is smaller than LLaDA's SwiGLU of 12,288: 4.3 B parameters), random weights made on the
    device in bf16 (none written to disk), wrapped as load_hf_model wraps a model: speed does not depend on
    the weights."""
    from transformers import AutoConfig, AutoModel

    from explorer.hf.model import HFDenoiser, HFModelConfig
    from tests.support.hf import cached_remote_code_dir

    path = cached_remote_code_dir(tmp / "llada_8b_standin", "llada", "replace", context=length)
    cfg = AutoConfig.from_pretrained(path, trust_remote_code=True)
    cfg.update({**shape, "max_sequence_length": length})
    torch.manual_seed(0)
    with torch.device(device):
        net = AutoModel.from_config(cfg, trust_remote_code=True, dtype=torch.bfloat16)
    config = HFModelConfig(shape["vocab_size"], shape["mask_token_id"], length, "llada")
    model = HFDenoiser(net, config).to(device).eval()
    model.probe_cache()
    assert model.cache_modes == ("prefix", "dual"), model.cache_modes
    return model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoints", nargs="+", default=["shakespeare", "shakespeare-large"])
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--block-length", type=int, default=32)
    p.add_argument("--steps", type=int, nargs="+", default=[64, 128])
    p.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.8])
    p.add_argument("--samples", type=int, default=3, help="samples per sampled (T > 0) configuration")
    p.add_argument("--repeats", type=int, default=1, help="times each sample is timed in each mode")
    p.add_argument("--judge", default="shakespeare-ar")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hf-standin", action="store_true",
                   help="time a random LLaDA-shaped remote-code model (4 x 256) instead of the checkpoints")
    p.add_argument("--llada-8b-shape", action="store_true",
                   help="the stand-in at LLaDA-8B's shape, random, in bf16 on --device (a GPU)")
    p.add_argument("--device", default="cpu", help="where the checkpoints or the stand-in run")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    judge = None if args.hf_standin or args.llada_8b_shape else load_checkpoint(args.judge, device)
    print(f"# torch {torch.__version__}, {args.threads} thread(s), load average {os.getloadavg()[0]:.1f} at the start; "
          f"{args.length} characters, blocks of {args.block_length}, strategy confidence")
    print("| checkpoint | steps | T | cache | samples | s / sample | speed-up | same tokens | gen-NLL |")
    print("|---|---|---|---|---|---|---|---|---|")
    if args.llada_8b_shape:
        with tempfile.TemporaryDirectory() as tmp:
            model = llada_8b_standin(Path(tmp), args.length, device)
            print(f"# on {describe_device(device)}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters")
            for steps in args.steps:
                for temperature in args.temperatures:
                    got = measure(model, None, steps, temperature, args)
                    for line in rows("LLaDA-8B-shaped stand-in (bf16)", steps, temperature, got):
                        print(line, flush=True)
        return
    if args.hf_standin:
        with tempfile.TemporaryDirectory() as tmp:
            model = hf_standin(Path(tmp), args.length)
            for steps in args.steps:
                for temperature in args.temperatures:
                    got = measure(model, None, steps, temperature, args)
                    for line in rows("LLaDA-style stand-in, 4 x 256", steps, temperature, got):
                        print(line, flush=True)
        print(f"# load average {os.getloadavg()[0]:.1f} at the end")
        return
    for name in args.checkpoints:
        try:
            resolve_checkpoint(name)
        except (ValueError, OSError):
            print(f"# {name}: not found, skipped")
            continue
        model = load_checkpoint(name, device)
        for steps in args.steps:
            for temperature in args.temperatures:
                for line in rows(name, steps, temperature, measure(model, judge, steps, temperature, args)):
                    print(line, flush=True)
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    with torch.no_grad():
        main()
