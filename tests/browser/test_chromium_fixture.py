"""conftest.py's promises about the test session's one Chromium: it leaves nothing behind a browser test, its
pages are closed and asyncio works again."""
from __future__ import annotations

import asyncio

import pytest


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
