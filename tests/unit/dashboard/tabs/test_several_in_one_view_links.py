"""Several items in one view, from one link: Inspect's `inspect.ts` / `inspect.texts` and Explore's
`samples` / `prompts` are read from a query like every other tab knob (urlstate.UrlState), written back
as they were given (a text's newline and comma, a prompt's space and █ survive the link's encoding), and
a value over its cap is refused with the link's notice, never applied."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.urlstate import UrlState
from tests.support.dashboard import explore

QUOTES = "First Citizen:\nBefore we proceed any further, hear me speak.|To be, or not to be, that is the question:"
LINK = {"tab": "Inspect", "inspect.ts": "0,0.2,0.4,0.6,0.8,1", "inspect.texts": QUOTES,
        "samples": "5", "prompts": "ROMEO:|To be,|First C|A█B"}


@pytest.fixture
def session(checkpoints):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    build_tab("Inspect", s)
    yield s
    s.close()


def test_one_link_carries_every_list_and_round_trips(session):
    url = UrlState(session, list(session.tabs))
    url.apply(LINK)
    inspect, ex = session.tabs["Inspect"], explore(session)
    assert url.notice == ""
    assert (inspect.ts, inspect.texts, ex.samples, ex.prompts) == (LINK["inspect.ts"], QUOTES, 5, LINK["prompts"])
    back = dict(parse_qsl(urlsplit(url.search()).query))  # through the address bar's percent-encoding
    assert {k: back[k] for k in LINK} == LINK
    fresh = open_session(device="cpu", auto_run=False)
    build_tab("Inspect", fresh)
    again = UrlState(fresh, list(fresh.tabs))
    again.apply(back)
    without = lambda query: {k: v for k, v in query.items() if k != "checkpoint"}  # noqa: E731 (app.py opens it)
    assert again.notice == "" and without(again.query()) == without(url.query())
    fresh.close()


@pytest.mark.parametrize("key, value, reason", [
    ("inspect.ts", ",".join(str(i / 20) for i in range(12)), "at most 11"),
    ("inspect.ts", "0.2,7", "from 0 to 1"),
    ("inspect.texts", "|".join(f"text {i}" for i in range(6)), "at most 5"),
    ("samples", "9", "outside the range 1 to 8"),
    ("samples", "100000", "outside"),
    ("prompts", "|".join(f"P{i}" for i in range(6)), "at most 5"),
])
def test_a_hostile_link_asks_for_bounded_work_only(session, key, value, reason):
    url = UrlState(session, list(session.tabs))
    inspect, ex = session.tabs["Inspect"], explore(session)
    url.apply({key: value})
    assert reason in url.notice and key in url.notice
    assert (inspect.ts, inspect.texts, ex.samples, ex.prompts) == ("", "", 1, "")  # nothing applied
