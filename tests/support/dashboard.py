"""Tiny checkpoints for the dashboard tests, written into a temporary checkpoints/ directory, and
what the tests read a session with (`explore`, `wait_for`).

They use the pattern alphabet (A..O), so sweeps score them by pattern quality without an AR judge,
and validation data for the mean-confidence view is generated rather than read from a file.
`write_bad_checkpoints` adds the broken files of the bad-input tests: every way a file in checkpoints/
can be wrong.
"""
from __future__ import annotations

import json
import queue
import sys
import threading
import time
import traceback
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from explorer.checkpoint import save_checkpoint
from explorer.data.patterns import pattern_tokenizer
from tests.support.models import make_model

LENGTH = 24


def _meta(tok, model, finished: bool) -> dict:
    meta = {"tokenizer": tok.to_dict(), "n_params": sum(p.numel() for p in model.parameters()),
            "corpus": {"name": "patterns", "kind": "patterns", "sha256": None},
            "train_config": {"corpus": "patterns", "data": None}, "words": [],
            "curves": {"train": [[1, 2.7]], "val": [[1, 2.6]]}, "training_state": {"step": 1}}
    if finished:
        meta["metrics"] = {"nelbo_nats_per_char": 1.5, "nelbo_bits_per_char": 1.5 / 0.6931471805599453}
    return meta


def save_tiny_checkpoints(directory: Path) -> Path:
    """tiny (finished: has NELBO), tiny-training (no final metrics yet) and tiny-ar (causal)."""
    tok = pattern_tokenizer()
    for name, kind, finished in (("tiny", "diffusion", True), ("tiny-training", "diffusion", False),
                                 ("tiny-ar", "ar", True)):
        model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=LENGTH, kind=kind,
                           n_layer=1, n_embd=32, n_head=2, seed=1)
        save_checkpoint(model, directory / f"{name}.safetensors", _meta(tok, model, finished), dtype=torch.float32)
    return directory


def save_twins(directory: Path, names=("tiny", "tiny-uniform"), tok=None, block_size: int = LENGTH) -> Path:
    """A masked diffusion checkpoint and a uniform-state one (metadata process=uniform) of one alphabet
    (default the patterns'), random weights: the two forward processes side by side."""
    tok = tok or pattern_tokenizer()
    for name, extra in zip(names, ({}, {"process": "uniform"})):
        model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=block_size, n_layer=1,
                           n_embd=32, n_head=2, seed=1)
        meta = {**_meta(tok, model, True), **extra}
        save_checkpoint(model, directory / f"{name}.safetensors", meta, dtype=torch.float32)
    return directory


def write_bad_checkpoints(d):
    """Next to the good tiny ones: every way a file in checkpoints/ can be wrong."""
    good = d / "tiny.safetensors"
    raw = good.read_bytes()
    (d / "truncated.safetensors").write_bytes(raw[: len(raw) // 2])  # a copy cut short
    (d / "notes.safetensors").write_text("these are my lecture notes, not weights\n")
    (d / "empty.safetensors").write_bytes(b"")
    save_file({"w": torch.zeros(3)}, str(d / "foreign.safetensors"))  # safetensors, but not ours
    with safe_open(str(good), framework="pt") as f:
        header, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(d / "future.safetensors"), metadata={**header, "format_version": "2"})
    meta = json.loads(header["meta"])
    meta["model_config"]["rotary_base"] = 10000  # a knob from another version of the model
    save_file(tensors, str(d / "other-version.safetensors"), metadata={**header, "meta": json.dumps(meta)})
    meta = json.loads(header["meta"])
    meta["model_config"]["n_layer"] = 2  # the config says 2 layers, the weights hold 1
    save_file(tensors, str(d / "mismatch.safetensors"), metadata={**header, "meta": json.dumps(meta)})
    meta = json.loads(header["meta"])
    meta["process"] = "absorbing-gaussian"  # a forward process no sampler or loss here knows
    save_file(tensors, str(d / "other-process.safetensors"), metadata={**header, "meta": json.dumps(meta)})
    return d


# name in checkpoints/ -> what its CheckpointError says
BAD_FILES = {
    "truncated": "is not a readable safetensors checkpoint",
    "notes": "is not a readable safetensors checkpoint",
    "empty": "is not a readable safetensors checkpoint",
    "foreign": "has no mdlm-explorer metadata",
    "future": "has format version '2'; this version of mdlm-explorer reads version 1",
    "other-version": "unknown model config keys: ['rotary_base']",
    "mismatch": "weights do not fit the stored config (missing: blocks.1.",
    "other-process": "was trained on the diffusion process 'absorbing-gaussian', which this version of "
                     "mdlm-explorer does not know (it knows masked, uniform)",
}


def wait_for(condition, timeout: float = 30.0, interval: float = 0.05,
             message="timed out") -> None:
    """Poll `condition` until it holds; fail the test after `timeout` seconds.
    message: the failure's text, or a function returning it, called only on failure (to describe the
    state the wait ended in)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(message() if callable(message) else message)
        time.sleep(interval)


def threads_now() -> str:
    """Every thread's name and innermost frames, for the message of a wait that timed out: what the
    process was doing, or waiting on, when it gave up."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame, limit=6))
        parts.append(f"--- {names.get(ident, ident)}\n{stack}")
    return "\n".join(parts)


def explore(session):
    """The Explore tab's state of a session (tabs.explore.open_session registers it)."""
    return session.tabs["Explore"]


class SlowModel(torch.nn.Module):
    """The loaded model, a little slow per call, so that changes arrive while a run is in flight."""

    def __init__(self, inner, seconds: float):
        super().__init__()
        self.inner, self.seconds = inner, seconds
        self.config, self.tokenizer, self.meta = inner.config, inner.tokenizer, getattr(inner, "meta", {})
        self.device = torch.device("cpu")

    def forward(self, x, t=None):
        time.sleep(self.seconds)
        return self.inner(x, t)


class UiThread:
    """A served session's dispatch: callbacks run one after another, in order, on one thread of their own."""

    def __init__(self):
        self.callbacks: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def __call__(self, callback) -> None:
        self.callbacks.put(callback)

    def _loop(self) -> None:
        while (callback := self.callbacks.get()) is not None:
            callback()

    def idle(self) -> bool:
        return self.callbacks.empty()

    def stop(self) -> None:
        self.callbacks.put(None)
