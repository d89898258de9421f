"""Shared fixtures: tiny corpora and tiny models built in the test, never the network or ../shared."""
from __future__ import annotations

import pytest
import torch

from explorer.data.corpus import TextCorpus
from explorer.model import ModelConfig, Transformer

TINY_TEXT = ("To be, or not to be, that is the question:\n"
             "Whether 'tis nobler in the mind to suffer\n"
             "The slings and arrows of outrageous fortune,\n"
             "Or to take arms against a sea of troubles\n") * 8


@pytest.fixture
def tiny_corpus() -> TextCorpus:
    return TextCorpus(TINY_TEXT, name="tiny")


def make_model(vocab_size=12, mask_id=11, block_size=16, kind="diffusion", time_conditioning="none",
               n_layer=2, n_embd=32, n_head=4, seed=0) -> Transformer:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=vocab_size, mask_id=mask_id, block_size=block_size, n_layer=n_layer,
                      n_head=n_head, n_embd=n_embd, kind=kind, time_conditioning=time_conditioning)
    return Transformer(cfg).eval()


@pytest.fixture(autouse=True)
def _fast_cpu():
    """Denormals flushed, and one torch thread: tiny models gain nothing from threads, and on a
    busy 2-core machine extra threads spin and crawl (model calls measured 10-60x slower)."""
    torch.set_flush_denormal(True)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# Tests whose process state would leak into later served-app tests: an in-process Bokeh *client*
# (the load test's) deserialises every Panel model, which registers extension models such as Vizzu,
# whose JS lives on a CDN; every app served later in this process would then link it (offline: an
# error). They run after everything else.
RUN_LAST = ("tests/test_load_test.py",)


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: any(item.nodeid.startswith(p) for p in RUN_LAST))  # stable: order kept otherwise


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    """A checkpoints/ directory of tiny models (tests/dashboard_support.py) that the dashboard reads
    through MDLM_EXPLORER_CHECKPOINTS. A test file that needs other files there defines its own."""
    from tests.dashboard_support import save_tiny_checkpoints

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    torch.set_num_threads(1)  # tiny models: threads only add overhead (and the machine's cores are shared)
    return save_tiny_checkpoints(tmp_path)
