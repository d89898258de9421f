"""Our sampler on a Hugging Face model vs the model's own reference decoding loop, one run.

    python benchmarks/bench_hf.py [--model hf:ORG/NAME | DIR] [--device auto|cpu|cuda] [--length 256]
                                  [--steps 64] [--block-length 32] [--rounds 3] [--threads N]
                                  [--temperature 0 [1 ...]] [--trust-remote-code] [--llada-8b-shape]
                                  [--no-graphs]

Without --model it times a randomly initialised BERT-family masked LM built by the benchmark (BERT's 30,522-token
vocabulary: the per-step softmax over V is part of what is measured); --llada-8b-shape builds LLaDA-8B's
published shape (4,096 wide, 32 layers, 126,464 tokens) as a Llama body, in bf16, for a GPU. Speed does
not depend on the weights.

Both decoders do the same work: greedy (temperature 0) unless --temperature, low-confidence (confidence
order), LLaDA's linear schedule, semi-AR blocks, one model call per step. The reference is LLaDA's
published `generate` rule written out plainly (argmax, softmax, top-k per block; at a temperature, Gumbel
noise over the whole (L, V) logits drawn on the model's device, as LLaDA does); ours is
explorer.sampling.sample (its random numbers come from a CPU generator, the same on every device), recording
the whole trajectory as the dashboard does. Printed per configuration: ms per step, generated tokens
per second, and three ratios measured in the same run (medians over --rounds): ours / model forwards
alone, reference / model forwards alone, and ours / reference. Goal: ours <= 1.10x the model forwards.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer import graphs  # noqa: E402
from explorer.devices import describe_device, resolve_device  # noqa: E402
from explorer.sampling import SamplerConfig, sample  # noqa: E402


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def random_bert(device, dtype):
    """A BERT-base-vocabulary masked LM, small body: what a CPU can time in seconds."""
    from transformers import BertConfig, BertForMaskedLM

    from explorer.hf.model import HFDenoiser, HFModelConfig

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=1024, max_position_embeddings=1024)
    net = BertForMaskedLM(cfg).to(device, dtype).eval()
    return HFDenoiser(net, HFModelConfig(30522, 103, 1024, "mlm")), "random BERT-family (30,522 tokens, 4x256)"


def random_llada(device, dtype):
    """LLaDA-8B's published shape (config.json of GSAI-ML/LLaDA-8B-Base) as a Llama body, bidirectional
    in effect for timing (attention cost is the same), random weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from explorer.hf.model import HFDenoiser, HFModelConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=126464, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096)
    with torch.device(device):
        net = LlamaForCausalLM(cfg).to(dtype).eval()
    return HFDenoiser(net, HFModelConfig(126464, 126336, 4096, "llada")), "LLaDA-8B shape, random (bf16)"


def load_model(args, device):
    if args.model:
        from explorer import load_checkpoint
        from explorer.hf import HFOptions

        model = load_checkpoint(args.model, device, hf=HFOptions(trust_remote_code=args.trust_remote_code))
        return model, args.model
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model, what = (random_llada if args.llada_8b_shape else random_bert)(device, dtype)
    return model.eval(), what  # the wrapper too: a graph replays only in eval mode (sample() sets it itself)


def reference_generate(model, length: int, steps: int, block_length: int, temperature: float = 0.0) -> torch.Tensor:
    """LLaDA's generate, low-confidence remasking, no prompt (the canvas all [MASK]); at a temperature,
    Gumbel-max in float64 with the noise drawn on the model's device."""
    mask_id = model.config.mask_id
    x = torch.full((1, length), mask_id, dtype=torch.long, device=model.device)
    n_blocks = length // block_length
    for b in range(n_blocks):
        end = (b + 1) * block_length
        per_block = steps // n_blocks
        base, rem = divmod(block_length, per_block)
        for i in range(per_block):
            mask_index = x == mask_id
            logits = model(x).float()
            logits[..., mask_id] = -torch.inf
            if temperature > 0:
                noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device)
                x0 = (logits.double() / temperature - (-noise.log()).log()).argmax(-1)
            else:
                x0 = logits.argmax(-1)
            x0_p = F.softmax(logits, dim=-1).gather(-1, x0[..., None]).squeeze(-1)
            x0_p[:, end:] = -torch.inf
            confidence = torch.where(mask_index, x0_p, torch.tensor(-torch.inf, device=x.device))
            chosen = confidence[0].topk(base + (i < rem)).indices
            x[0, chosen] = x0[0, chosen]
    return x


def forward_floor(model, length: int, steps: int, device, calls: int = 10) -> float:
    """Seconds of `steps` model forwards at this length: the median of `calls` single forwards, each on a
    changed canvas and synchronised alone, times steps: what any decoder's step must pay. A loop of
    forwards queued back to back bounded nothing on a GPU: on an H200 it measured slower than the
    reference decoding loop (0.82x), which does the same forwards and more. With CUDA graphs installed
    and on, the forwards are replays: the launch floor."""
    x = torch.full((1, length), model.config.mask_id, dtype=torch.long, device=model.device)
    times = []
    with torch.no_grad():
        for i in range(calls + 2):  # a graph is captured at a shape's second call
            x[0, 0] = i % model.config.mask_id  # a changed canvas each call, as in decoding
            times.append(timed(lambda: model(x), device))
    return steps * statistics.median(times[2:])


@contextlib.contextmanager
def graphs_on(model, on: bool):
    """explorer.graphs' replays on or off for the calls inside (plain forwards where none are installed)."""
    forward = graphs.installed(model)
    if forward is None:
        yield
        return
    forward.enabled = on
    try:
        yield
    finally:
        forward.enabled = False


def timed(fn, device) -> float:
    sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        fn()
    sync(device)
    return time.perf_counter() - start


def bench(model, device, length: int, steps: int, block_length: int, rounds: int, temperature: float = 0.0) -> dict:
    """Median seconds of the reference loop, ours, and ours with CUDA graphs (where installed) over `rounds`
    interleaved rounds, and the floors: the plain forward and the replayed one."""
    cfg = SamplerConfig(steps=steps, temperature=temperature, strategy="confidence", schedule="linear",
                        block_length=block_length)
    runs = {"reference": (False, lambda: reference_generate(model, length, steps, block_length, temperature)),
            "ours": (False, lambda: sample(model, cfg, length=length, record=True))}
    if graphs.installed(model) is not None:
        runs["ours graphs"] = (True, lambda: sample(model, cfg, length=length, record=True))
    for on, fn in runs.values():  # warm-up (allocator, kernels, the graphs' captures)
        with graphs_on(model, on):
            timed(fn, device)
    times = {k: [] for k in runs}
    for _ in range(rounds):  # interleaved: a noisy machine slows them alike
        for name, (on, fn) in runs.items():
            with graphs_on(model, on):
                times[name].append(timed(fn, device))
    result = {k: statistics.median(v) for k, v in times.items()}
    result["forwards"] = forward_floor(model, length, steps, device)
    if "ours graphs" in runs:
        with graphs_on(model, True):
            result["replays"] = forward_floor(model, length, steps, device)
    return result


def report(t: dict, length: int, steps: int) -> str:
    """One table row: ms per step of each, ours' tokens/s, and the ratios."""
    per = {k: 1e3 * v / steps for k, v in t.items()}
    g = "ours graphs" in t
    cells = [f"{length:>6}", f"{per['forwards']:>8.2f}", f"{per['replays']:>8.2f}" if g else f"{'-':>8}",
             f"{per['reference']:>8.2f}", f"{per['ours']:>8.2f}", f"{per['ours graphs']:>8.2f}" if g else f"{'-':>8}",
             f"{length / t['ours graphs' if g else 'ours']:>9.1f}", f"{t['ours'] / t['forwards']:>9.3f}",
             f"{t['reference'] / t['forwards']:>8.3f}", f"{t['ours'] / t['reference']:>9.3f}"]
    if g:
        cells += [f"{t['ours graphs'] / t['reference']:>11.3f}", f"{t['ours graphs'] / t['replays']:>11.3f}"]
    return " ".join(cells)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--length", type=int, nargs="+", default=[256])
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--block-length", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--temperature", type=float, nargs="+", default=[0.0],
                   help="0: greedy; above: sampled (random numbers timed); several: a table each")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--llada-8b-shape", action="store_true")
    p.add_argument("--no-graphs", action="store_true", help="on CUDA, skip the runs with explorer.graphs")
    args = p.parse_args(argv)
    if min(args.temperature) < 0:
        p.error(f"--temperature must be 0 or more, got {min(args.temperature)}")
    torch.set_flush_denormal(True)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    model, what = load_model(args, device)
    if device.type == "cuda" and not args.no_graphs:
        graphs.install(model, max_graphs=graphs.HF_GRAPHS)
        graphs.installed(model).enabled = False
    for temperature in args.temperature:
        print(f"{what} on {describe_device(device)}, {args.steps} steps, blocks of {args.block_length}, "
              f"{'greedy' if temperature == 0 else f'temperature {temperature:g}'} low-confidence; "
              f"medians of {args.rounds} rounds; ms per step; fwd: one forward timed alone, replay: from a "
              f"CUDA graph; 'graphs': ours with explorer.graphs")
        print(f"{'length':>6} {'fwd':>8} {'replay':>8} {'ref':>8} {'ours':>8} {'graphs':>8} {'tok/s':>9} "
              f"{'ours/fwd':>9} {'ref/fwd':>8} {'ours/ref':>9} {'graphs/ref':>11} {'graphs/rpl':>11}")
        for length in args.length:
            t = bench(model, device, length, args.steps, args.block_length, args.rounds, temperature)
            print(report(t, length, args.steps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
