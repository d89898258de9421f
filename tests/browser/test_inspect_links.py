"""A shared Inspect link opened again and again on one server, in a real headless Chromium: every page
gets its predictions, also when all its results come from the server's caches (a repeat visit) and when
several pages open it at once; the page never gets a patch for a model it was not sent ("reference ...
isn't known", after which it ignores the whole patch and stays at "the validation text is loading");
and a link to Inspect runs no Explore sample."""
from __future__ import annotations

import pytest

from explorer.dashboard.tabs.inspect.masking import draw_mask
from tests.support.browser import open_page, wait_until
from tests.support.dashboard import LENGTH, explore

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LINK = "?tab=Inspect&inspect.t=0.5&inspect.mask_seed=3"  # the validation text: the model supplies it
MASKED = int(draw_mask(LENGTH, 0.5, 3).sum())
CANDIDATES = ".inspect-predictions .col[title]"  # one column per masked position, with its candidates


@pytest.fixture(autouse=True)
def only_inspect(monkeypatch):
    """Explore and Inspect only: the other tabs have their own browser tests."""
    monkeypatch.setattr("explorer.dashboard.app.TAB_NAMES", ("Inspect",))


def shown(page) -> bool:
    return page.locator(CANDIDATES).count() == MASKED


def check_finished(page, problems, state) -> None:
    """The page shows the predictions of the link's mask, no console error, and no Explore run."""
    try:
        wait_until(lambda: shown(page), timeout=90)
    except AssertionError:
        inspect = state.tabs["Inspect"]
        raise AssertionError(f"no predictions in the page (server: predictions "
                             f"{inspect.predictions is not None}, notice {inspect.text_notice!r}); "
                             f"console: {problems}") from None
    assert not [p for p in problems if "isn't known" in p], problems
    assert problems == [], problems
    ex = explore(state)
    assert ex.run_id == 0 and ex.trajectory is None and not ex.running  # Inspect's link ran no sample


def test_the_same_inspect_link_again_and_at_once(browser, served):
    url, states = served
    for visit in range(2):  # the second visit's validation text and predictions come from the caches
        page, problems = open_page(browser, url + LINK)
        wait_until(lambda: len(states) == visit + 1)
        check_finished(page, problems, states[visit])
        page.close()
    pages = [open_page(browser, url + LINK) for _ in range(3)]  # three pages at once
    wait_until(lambda: len(states) == 5)
    for (page, problems), state in zip(pages, states[2:]):
        check_finished(page, problems, state)
    assert [s.tabs["Inspect"].t for s in states] == [0.5] * 5
