"""The lessons (explorer/dashboard/lessons.py) against the real page: every figure's link, and each of its
variants, is applied by UrlState with nothing left over, on a session of the shipped checkpoint it names with
all five tabs (its metadata only: no weights are read); the lesson
and figure a link names come back from figure_url; a lesson link stays one as the URL is rewritten; a
bad lesson or figure is named in the notice and opens no lesson."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from explorer.dashboard import lessons
from explorer.dashboard.lessons import LESSONS, all_figures, figure_url, lesson
from explorer.dashboard.tabs import MAIN_TAB, TAB_NAMES, build_tab
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.urlstate import UrlState

FIGURES = all_figures()
LINKS = [(f"{fig.lesson}-{fig.index}-{label}", fig, query)
         for fig in FIGURES for label, query in ((fig.label, fig.query), *fig.variants)]


def session_for(checkpoint: str):
    """A session as a page opening a link of `checkpoint` builds it: the shipped checkpoint's knobs and bounds
    from its metadata (Session._preview; no weights are read), every tab's state, no model loaded. One per
    link, as each link opens its own page: a link's values must not rest on the link before."""
    session = open_session(checkpoint=checkpoint, device="cpu", auto_run=False, sweep_auto=False)
    for name in TAB_NAMES:
        build_tab(name, session, lazy=True)
    return session


def applied(link: str) -> UrlState:
    args = dict(parse_qsl(urlsplit(link).query, keep_blank_values=True))
    session = session_for(args.get("checkpoint", "shakespeare"))
    url = UrlState(session, list(session.tabs))
    url.apply(args)
    session.close()
    return url


def test_slugs_are_unique_and_figures_numbered_in_order():
    slugs = [item.slug for item in LESSONS]
    assert len(LESSONS) == 5 and len(set(slugs)) == 5
    for item in LESSONS:
        assert [fig.index for fig in item.figures] == list(range(1, len(item.figures) + 1))
        assert {fig.lesson for fig in item.figures} == {item.slug} and lesson(item.slug) is item
        assert item.title and item.summary and item.checkpoint_note and item.document
    assert len(FIGURES) == sum(len(item.figures) for item in LESSONS) >= 45


def test_an_unknown_slug_names_the_lessons():
    with pytest.raises(ValueError, match="forward-process, training-elbo"):
        lesson("nope")


def test_every_figure_says_what_to_notice_on_one_line():
    for fig in FIGURES:
        for text in (fig.section, fig.shows, fig.view, fig.notice, fig.differs):
            assert "\n" not in text and "<" not in text, (fig.lesson, fig.index)
        assert fig.notice.strip() and fig.tab in ("Explore", *TAB_NAMES)
    assert sum(bool(fig.differs) for fig in FIGURES) >= 8  # the model's disagreements are said


@pytest.mark.slow  # a session per link: 0.2 s each
@pytest.mark.parametrize("name, fig, query", LINKS, ids=[name for name, _, _ in LINKS])
def test_every_link_applies_without_a_notice(name, fig, query):
    url = applied("?" + query)
    assert url.notice == "", url.notice
    assert url.tab == dict(parse_qsl(query)).get("tab", MAIN_TAB)


@pytest.mark.parametrize("presentation", [False, True])
def test_figure_url_round_trips(presentation):
    for fig in (FIGURES[0], FIGURES[17], FIGURES[-1]):
        link = figure_url(fig, presentation=presentation)
        assert link.startswith(lessons.BASE + "?" + fig.query + f"&lesson={fig.lesson}&figure={fig.index}")
        url = applied(link)
        assert url.notice == "" and (url.lesson, url.figure, url.tab) == (fig.lesson, fig.index, fig.tab)
        assert url.state.presentation is presentation
        query = url.query()  # the URL the page rewrites keeps the lesson
        assert (query["lesson"], query["figure"]) == (fig.lesson, str(fig.index))


def test_tab_property_reads_the_query():
    fig = lesson("forward-process").figures[0]
    assert fig.tab == "Model" and lesson("generation").figures[0].tab == "Explore"


@pytest.mark.parametrize("args, named", [
    ({"lesson": "<img src=x onerror=alert(1)>"}, "lesson=<img src=x onerror=alert(1)> (not a lesson: forward-process"),
    ({"lesson": "generation", "figure": "99"}, "figure=99 (not a figure of generation: 1 to 11)"),
    ({"lesson": "generation", "figure": "two"}, "figure=two ('two' is not a whole number)"),
    ({"figure": "2"}, "figure=2 (a figure needs a lesson=)")])
def test_a_bad_lesson_or_figure_is_named(args, named):
    url = applied("?" + urlencode(args))
    assert named in url.notice
    assert url.figure == 0 and "figure" not in url.query()
    assert url.lesson in ("", "generation")


def test_a_lesson_alone_opens_the_lesson_before_its_first_figure():
    url = applied("?lesson=sampling-strategies")
    assert (url.notice, url.lesson, url.figure) == ("", "sampling-strategies", 0)
    assert url.query()["lesson"] == "sampling-strategies" and "figure" not in url.query()
