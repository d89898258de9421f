"""conftest.py's promises: module fixtures already run on one torch thread with denormals flushed, and the
session's one Chromium leaves nothing behind a browser test: its pages are closed and asyncio works again."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from tests.dashboard_support import CHROMIUM


@pytest.fixture(scope="module")
def seen_by_a_module_fixture():
    # set up before any function fixture of this module: the autouse one cannot have prepared it
    return torch.get_num_threads(), bool(torch.tensor(1e-42) * 1 == 0)


def test_module_fixtures_run_on_one_thread_with_denormals_flushed(seen_by_a_module_fixture):
    assert seen_by_a_module_fixture == (1, True)


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")
@pytest.mark.parametrize("visit", [1, 2])
def test_each_browser_test_starts_without_pages_of_the_last(browser, visit):
    assert browser.contexts == []  # the previous visit's page was closed when it ended
    page = browser.new_page()
    page.set_content(f"<b>visit {visit}</b>")
    assert page.inner_text("b") == f"visit {visit}"


def test_asyncio_runs_after_a_browser_test():
    """Playwright's sync API marks its event loop as running in this thread between its calls; after a
    browser test that mark is gone, so asyncio.run (as test_downloads uses it) works."""
    async def three():
        return 3

    assert asyncio.run(three()) == 3
