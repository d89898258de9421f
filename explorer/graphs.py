"""A model's forward replayed from CUDA graphs: the same model(x, t), launched as one graph.

On a GPU a small model's forward is a few hundred kernels, each too short to hide the host's time to
launch it: the `shakespeare` model's forward measured 2.5 ms launched op by op and 0.58 ms replayed
from a graph on an H200, so a 64-step run spent most of its time launching. `install(model)` makes
`model(x, t)` replay a graph captured for that call's shapes, dtypes and autocast dtype the second time
they are seen (a shape met once, as a packed sweep makes many, never pays a capture; at most MAX_GRAPHS
kept, the least recently used dropped), with the same kernels on the same inputs as the forward it
replaces.

It applies only where a graph computes exactly what the forward would: tensors on a CUDA device, no
gradient, the model in eval mode and no keyword arguments (a cache call reads and writes state outside
its inputs); and only to calls of at most MAX_GRAPH_TOKENS rows x positions. Anything else, and any shape
whose capture failed, runs the plain forward.
"""
from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import Callable

import torch

MAX_GRAPHS = 16  # shapes kept: a served class's batched runs take a handful of batch sizes at a time
# Calls of more rows x positions run plain: a graph keeps its forward's activations in GPU memory for as long
# as it is kept, and such calls are bound by their arithmetic, not their launches (nothing to gain)
MAX_GRAPH_TOKENS = 16_384
WARMUP_CALLS = 2  # eager calls on a side stream before a capture, as torch.cuda.graphs' docs ask
FAILED = object()  # a key whose capture raised: always the plain forward


def active_autocast_dtype(kind: str) -> torch.dtype | None:
    """The dtype the caller's autocast computes in on a device type ('cuda', 'cpu'), or None when it is off."""
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None


def capture_cuda(forward: Callable, x: torch.Tensor, t: torch.Tensor | None, autocast: torch.dtype | None):
    """Capture forward(x, t) into a CUDA graph; returns replay(x, t) -> a fresh copy of the output.

    The graph reads its own copies of x and t, and its output lives in the graph's memory, which the next
    replay overwrites: replay copies the call's inputs in and returns a copy of the output. Under autocast
    the capture runs with autocast's weight cache off, as torch.cuda.graphs' docs require (a cached cast
    freed after the capture would leave the graph reading freed memory)."""
    static_x, static_t = x.clone(), (None if t is None else t.clone())

    def precision():
        if autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(x.device.type, dtype=autocast, cache_enabled=False)

    side = torch.cuda.Stream(device=x.device)
    side.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(side), precision():  # lazily built state (cuBLAS handles, workspaces) first
        for _ in range(WARMUP_CALLS):
            forward(static_x, static_t)
    torch.cuda.current_stream(x.device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: another thread's CUDA work (a session loading its model) does not void this capture
    with torch.cuda.graph(graph, capture_error_mode="thread_local"), precision():
        static_out = forward(static_x, static_t)

    def replay(x: torch.Tensor, t: torch.Tensor | None) -> torch.Tensor:
        static_x.copy_(x)
        if t is not None:
            static_t.copy_(t)
        graph.replay()
        return static_out.clone()

    return replay


class GraphedForward:
    """forward(x, t) replayed from a graph per call signature; see the module docstring.

    Args:
        model: the nn.Module whose forward this replaces (its `training` flag is read at each call).
        eager: the plain forward, called as eager(x, t, **kwargs).
        capture: builds replay(x, t) from (eager, x, t, autocast dtype); capture_cuda by default (tests
            pass a stand-in that runs on the CPU).
        max_graphs: how many call signatures keep a graph.
        devices: the device types whose calls are captured (CUDA; tests add the CPU for their stand-in).
    """

    def __init__(self, model: torch.nn.Module, eager: Callable, capture: Callable = capture_cuda,
                 max_graphs: int = MAX_GRAPHS, devices: tuple[str, ...] = ("cuda",)):
        self.model, self.eager, self.capture, self.max_graphs = model, eager, capture, max_graphs
        self.devices = devices
        self.graphs: OrderedDict = OrderedDict()  # key -> replay, least recently used first
        self.seen: OrderedDict = OrderedDict()  # keys called once, not yet captured (as many as graphs)
        self.lock = threading.Lock()  # one capture or replay at a time: a graph's buffers are shared
        self.captured = self.replayed = self.failed = 0
        self.enabled = True  # False: every call plain (a benchmark times both on one model)

    def applies(self, x, t, kwargs) -> bool:
        """Whether a graph computes exactly this call (see the module docstring)."""
        return (self.enabled and not kwargs and isinstance(x, torch.Tensor) and x.device.type in self.devices
                and x.numel() <= MAX_GRAPH_TOKENS
                and (t is None or isinstance(t, torch.Tensor) and t.device == x.device)
                and not torch.is_grad_enabled() and not self.model.training)

    def __call__(self, x, t=None, **kwargs):
        if not self.applies(x, t, kwargs):
            return self.eager(x, t, **kwargs)
        autocast = active_autocast_dtype(x.device.type)
        key = (tuple(x.shape), x.dtype, None if t is None else (tuple(t.shape), t.dtype), autocast, x.device)
        with self.lock:
            replay = self.graphs.pop(key, None)
            if replay is None and self._first_sight(key):
                return self.eager(x, t)
            if replay is None:
                replay = self._capture(x, t, autocast)
            self.graphs[key] = replay  # now the most recently used
            while len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
            if replay is FAILED:
                return self.eager(x, t)
            self.replayed += 1
            return replay(x, t)

    def _first_sight(self, key) -> bool:
        """True the first time `key` is called (remembered among the last max_graphs such keys)."""
        if self.seen.pop(key, None) is not None:
            return False
        self.seen[key] = True
        while len(self.seen) > self.max_graphs:
            self.seen.popitem(last=False)
        return True

    def _capture(self, x, t, autocast):
        try:
            replay = self.capture(self.eager, x, t, autocast)
        except Exception:  # a forward a graph cannot hold (a host read, a dynamic shape): stay eager
            self.failed += 1
            return FAILED
        self.captured += 1
        return replay


HF_GRAPHS = 4  # a Hugging Face dLLM's graph holds a forward's activations (GBs at LLaDA-8B's size)


def install(model: torch.nn.Module, capture: Callable = capture_cuda, max_graphs: int = MAX_GRAPHS,
            devices: tuple[str, ...] = ("cuda",)):
    """Make model(x, t) replay CUDA graphs where they apply; returns the model (the same object, so its
    config, parameters and type are untouched). Installing twice keeps the first."""
    if not isinstance(model.__dict__.get("forward"), GraphedForward):
        model.forward = GraphedForward(model, type(model).forward.__get__(model), capture, max_graphs,
                                       devices)
    return model


def installed(model) -> GraphedForward | None:
    """The model's GraphedForward, or None when its forward is the plain one."""
    forward = getattr(model, "__dict__", {}).get("forward")
    return forward if isinstance(forward, GraphedForward) else None
