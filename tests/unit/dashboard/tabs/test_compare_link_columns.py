"""A link's `compare.columns` that the Compare tab cannot read (urlstate.UrlState with the tab's
check_link_value): named in the link's notice with the reason, and never applied, as any other bad
value of a link is. It used to be dropped without a word: the page showed the default comparison
as if it were the one the link asked for."""
from __future__ import annotations

import pytest

from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.compare.state import PRESETS, SEP
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.urlstate import UrlState

DEFAULT = SEP.join(PRESETS["strategies"][1])


@pytest.fixture
def session(checkpoints):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    build_tab("Compare", s)
    yield s
    s.close()


@pytest.mark.slow
@pytest.mark.parametrize("columns, reason", [
    ("bogus=1 | steps=4", "column 1: unknown knob 'bogus'"),
    ("steps=4 | steps", "column 2: 'steps' is not knob=value"),
    ("steps=4", "compare 2 to 5 columns, got 1"),
    (" | ".join(["steps=4"] * 6), "compare 2 to 5 columns, got 6"),
    ("steps=4 | model=gpt", "column 2: model must be one of session, ar"),
    ("steps=4 | temperature=hot", "column 2: temperature=hot:"),
])
def test_a_bad_compare_columns_is_named_in_the_link_notice(session, columns, reason):
    url = UrlState(session, list(session.tabs))
    url.apply({"tab": "Compare", "compare.columns": columns, "seed": "3"})
    shown = columns if len(columns) <= 40 else columns[:40] + "…"  # as the notice quotes a value
    assert url.notice.startswith("Not applied from the link: ") and f"compare.columns={shown} (" in url.notice
    assert reason in url.notice
    compare = session.tabs["Compare"]
    assert compare.columns == DEFAULT and compare.preset == "strategies"  # never applied
    assert url.tab == "Compare" and session.seed == 3  # the rest of the link still is


@pytest.mark.slow
def test_good_compare_columns_from_a_link_are_applied_without_a_notice(session):
    url = UrlState(session, list(session.tabs))
    url.apply({"compare.columns": "steps=4 | steps=8, strategy=random"})
    compare = session.tabs["Compare"]
    assert url.notice == "" and compare.columns == "steps=4 | steps=8, strategy=random"
    assert compare.preset == "custom" and url.query()["compare.columns"] == compare.columns
