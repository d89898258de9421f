"""Data-parallel training across processes: `torchrun --nproc-per-node N run.py train ...`.

torchrun starts N copies of the command with RANK / WORLD_SIZE / LOCAL_RANK in their environment;
`from_env()` reads them, and a plain `python run.py train` is simply rank 0 of 1. Every rank draws
the same global batch, t and masks from the same generator (so the random stream is the one a
single process draws) and trains on its own contiguous slice of the rows; DistributedDataParallel
averages the gradients (gloo on CPU, NCCL on CUDA). Only rank 0 logs, validates and saves.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class Ranks:
    """Where this process stands among the training processes (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    def __post_init__(self):
        if self.world_size < 1 or not 0 <= self.rank < self.world_size or self.local_rank < 0:
            raise ValueError(f"bad torchrun environment: RANK={self.rank}, WORLD_SIZE={self.world_size}, "
                             f"LOCAL_RANK={self.local_rank}")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        """True when there are other ranks to talk to (a process group is needed)."""
        return self.world_size > 1

    def rows(self, n: int) -> slice:
        """This rank's contiguous share of n rows (sizes differ by at most one when N does not divide n)."""
        return slice(n * self.rank // self.world_size, n * (self.rank + 1) // self.world_size)


def from_env(environ=None) -> Ranks:
    """The ranks torchrun set, or a single process when it did not."""
    environ = os.environ if environ is None else environ
    if "WORLD_SIZE" not in environ:
        return Ranks()
    try:
        values = {k.lower(): int(environ.get(k, "0")) for k in ENV}
    except ValueError as e:
        raise ValueError(f"bad torchrun environment: {e}") from e
    return Ranks(**values)


def rank_device(ranks: Ranks, device: torch.device) -> torch.device:
    """One GPU per process on a multi-GPU node: cuda:LOCAL_RANK. CPU ranks share the CPU."""
    if device.type != "cuda" or not ranks.active:
        return device
    if ranks.local_rank >= torch.cuda.device_count():
        raise ValueError(f"LOCAL_RANK {ranks.local_rank} but only {torch.cuda.device_count()} GPU(s): "
                         "use --nproc-per-node at most the number of GPUs")
    torch.cuda.set_device(ranks.local_rank)
    return torch.device("cuda", ranks.local_rank)


def init(ranks: Ranks, device: torch.device) -> None:
    """Join the process group (torchrun's MASTER_ADDR / MASTER_PORT rendezvous)."""
    import torch.distributed as dist

    if ranks.active and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, rank=ranks.rank, world_size=ranks.world_size)


def initialized() -> bool:
    """Whether this process has joined a process group (init ran with several ranks)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def shutdown() -> None:
    if initialized():
        import torch.distributed as dist

        dist.destroy_process_group()


def barrier(ranks: Ranks) -> None:
    if ranks.active:
        import torch.distributed as dist

        dist.barrier()


@contextlib.contextmanager
def main_first(ranks: Ranks):
    """Rank 0 runs the block first (e.g. downloads the corpus into the shared cache), then the others."""
    if not ranks.is_main:
        barrier(ranks)
    try:
        yield
    finally:  # on an error too: the others then meet it themselves instead of waiting for ever
        if ranks.is_main:
            barrier(ranks)


def sum_over_ranks(values: torch.Tensor, ranks: Ranks) -> torch.Tensor:
    """Element-wise sum of a small tensor over every rank (a copy; the input is left alone)."""
    values = values.detach().clone()
    if ranks.active:
        import torch.distributed as dist

        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def wrap(model: torch.nn.Module, ranks: Ranks, device: torch.device) -> torch.nn.Module:
    """The module the training step calls: DDP (gradients averaged over ranks in backward) or the model."""
    if not ranks.active:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
