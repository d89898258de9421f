"""Device and precision choice shared by training, sampling and the dashboard."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from .names import DEVICES as DEVICE_CHOICES
from .names import PRECISIONS


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def cuda_available() -> bool:
    """torch.cuda.is_available() without initialising CUDA in this process. PyTorch's plain check asks the
    CUDA runtime, and a process forked after that cannot use the GPU: `serve --num-procs` checks --device
    before it forks, and on an H200 every forked process then found no GPU and built no page. With
    PYTORCH_NVML_BASED_CUDA_CHECK=1 PyTorch counts the devices through NVML instead (the runtime where NVML
    is missing), which leaves fork safe."""
    before = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        return torch.cuda.is_available()
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before


def resolve_device(name: str = "auto") -> torch.device:
    """The torch.device of "cpu", "cuda" or "auto" (CUDA when a GPU is there); checking leaves fork safe
    (cuda_available). Raises ValueError for another name, or "cuda" without a GPU."""
    if name not in DEVICE_CHOICES:
        raise ValueError(f"device must be one of {DEVICE_CHOICES}, got {name!r}")
    if name == "cuda" and not cuda_available():
        raise ValueError("--device cuda was asked for but no CUDA GPU is available; use --device cpu or auto")
    if name == "auto":
        name = "cuda" if cuda_available() else "cpu"
    return torch.device(name)


def to_device(t: torch.Tensor, device) -> torch.Tensor:
    """`t`, a CPU tensor (random numbers drawn from a CPU generator), on `device` without making the host
    wait. A plain copy from pageable memory to a GPU synchronises the stream first (CUDA stages it through
    a buffer of its own), so each step's uniforms made the host wait for every kernel queued before them;
    from page-locked memory the copy is queued like a kernel, and PyTorch's pinned-memory allocator keeps
    the source block until the copy has run. Elsewhere (the CPU) it is `t.to(device)`."""
    device = torch.device(device)
    if device.type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def serving_threads(cores: int | None = None) -> int:
    """Torch threads for a dashboard server when none are asked for: one fewer than the cores this
    process may use, so its browser (on a laptop, the same machine) and the server's own work keep a
    core. On a 2-core CPU, with one core held by another job, a 256-character 32-step run took
    1.48 s in the page with 1 thread and 1.74 s with 2 (benchmarks/bench_dashboard.py)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores - 1)


def describe_device(device: torch.device | str) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return "cpu"


def model_device(model) -> torch.device:
    """Where a model's weights live (a `.device` attribute, else its first parameter; CPU for mocks)."""
    dev = getattr(model, "device", None)
    if isinstance(dev, torch.device):
        return dev
    p = next(model.parameters(), None) if hasattr(model, "parameters") else None
    return p.device if p is not None else torch.device("cpu")


def cpu_has_bf16_matmul() -> bool:
    """True on CPUs with AMX/AVX512-BF16, where bf16 autocast measured 1.5-2.4x faster than fp32 (on a
    2-core AVX512-BF16 CPU)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype for training on `device` (None means plain fp32)."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if device.type == "cuda":
        return torch.bfloat16
    return torch.bfloat16 if cpu_has_bf16_matmul() else None
