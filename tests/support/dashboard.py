"""Tiny checkpoints for the dashboard tests, written into a temporary checkpoints/ directory.

They use the pattern alphabet (A..O), so sweeps score them by pattern quality without an AR judge,
and validation data for the mean-confidence view is generated rather than read from a file.
`write_bad_checkpoints` adds the broken files of the bad-input tests (issue 7). `CHROMIUM` and `CHROMIUM_ARGS`:
the browser the browser tests drive (conftest.py starts one per session).
"""
from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from explorer.checkpoint import save_checkpoint
from explorer.data.patterns import pattern_tokenizer
from tests.conftest import make_model

LENGTH = 24
CHROMIUM = "/usr/bin/chromium"  # Debian's package; `playwright install` cannot download browsers here
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


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
}


# In a page: how many Bokeh views it holds, which is what Bokeh lays out after each change (its JS
# document keeps removed models listed, so the model count does not tell).
BOKEH_VIEWS_JS = """(() => { let n = 0; const walk = v => { n++; for (const c of (v.child_views || [])) walk(c); };
                           for (const v of Bokeh.index.roots) walk(v); return n; })()"""


def wait_for(condition, timeout: float = 30.0, interval: float = 0.05,
             message: str = "timed out") -> None:
    """Poll `condition` until it holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(interval)


@contextlib.contextmanager
def serving(app, **options):
    """Serve `app` (a function building one session's page) with a threaded pn.serve on a free port of this
    process (`options`: more pn.serve keywords); yields its URL once it listens, and stops it afterwards."""
    import panel as pn

    from tests.test_dashboard_served import free_port

    port = free_port()
    server = pn.serve({"/": app}, port=port, address="localhost", show=False, threaded=True, start=True, **options)
    try:
        # wait until it listens; not a GET of the page, which would build (and leave) a whole
        # session's app: 0.5 s of every browser test's set-up
        wait_for(lambda: _listening(port), timeout=60, message=f"nothing listens on port {port}")
        yield f"http://localhost:{port}/"
    finally:
        stop_server(server)


@contextlib.contextmanager
def serve_in_process(build, **options):
    """Serve `build()` (a template from create_app, made per session) on a free port in this process.
    Yields (url, the sessions' ExplorerStates); afterwards closes the sessions (their background work
    would slow the tests that follow) and stops the server."""
    states = []

    def app():
        template = build()
        states.append(template.explorer_state)
        return template

    with serving(app, **options) as url:
        try:
            yield url, states
        finally:
            for state in states:
                state.close()


def stop_server(server) -> None:
    """Stop a threaded pn.serve and wait for its thread: stop() only schedules the shutdown, and a loop still
    running ran an ended test's session callbacks under Bokeh's process-wide patched curdoc while the next
    test read it (seen as test_tabs_shown's flake)."""
    server.stop()
    server.join(timeout=15)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("localhost", port)) == 0


def explore(session):
    """The Explore tab's state of a session (tabs.explore.open_session registers it)."""
    return session.tabs["Explore"]
