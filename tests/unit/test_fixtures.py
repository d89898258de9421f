"""conftest.py's promise to module fixtures: they already run on one torch thread with denormals flushed.
(The test session's one Chromium is checked in tests/browser/test_chromium_fixture.py.)"""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def seen_by_a_module_fixture():
    # set up before any function fixture of this module: the autouse one cannot have prepared it
    return torch.get_num_threads(), bool(torch.tensor(1e-42) * 1 == 0)


def test_module_fixtures_run_on_one_thread_with_denormals_flushed(seen_by_a_module_fixture):
    assert seen_by_a_module_fixture == (1, True)
