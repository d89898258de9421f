"""Links as anyone could write them, generated (hypothesis): whatever keys and values a link carries,
applying it (UrlState.apply, on a session with every tab's state) raises nothing, names every key
and value it did not apply in the notice, and the notice the page shows holds the link's text only as
text: no '<' of it reaches the page unescaped. A knob's own rules are test_urlstate.py's."""
from __future__ import annotations

import pytest
from bokeh.document import Document
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from explorer.dashboard.app import url_notice
from explorer.dashboard.tabs import TAB_NAMES, build_tab
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.urlstate import HANDLED_ELSEWHERE, UrlState, _shown, parse_value
from tests.support.dashboard import save_tiny_checkpoints
from tests.support.markup import PAYLOADS, page_html, parsed

WRAPPER = ('<p style="white-space: pre-wrap; margin: 0">', "</p>")  # the notice's own markup (ui.internals)


@pytest.fixture(scope="module")
def link(tmp_path_factory):
    """(session with all five tabs' states, its UrlState, the notice pane the page would show, the pane's
    Bokeh model: what the page gets). One for the module: hypothesis runs many links through the same
    session, as a long-lived page would."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path_factory.mktemp("ckpt"))))
        session = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
        for name in TAB_NAMES:
            build_tab(name, session, lazy=True)  # their states: the keys a link may carry
        url = UrlState(session, list(session.tabs))
        pane = url_notice(url)
        # A document of its own: a model made in bokeh's current document could land in a served
        # session's (bokeh's curdoc is process-wide, and a session callback of an earlier test's server
        # may still hold it patched), and Panel then defers the model's updates to that session's next
        # tick, which never comes here: the notice would keep its first text.
        yield session, url, pane, pane.get_root(Document())
        session.close()


# Text from anyone: markup, entities, Markdown, control characters, the mask glyph, any script, numbers
# (no subnormal floats: conftest flushes denormals, and hypothesis refuses to draw them then)
NASTY = st.sampled_from(["<", ">", "&", "&lt;", "&#60;", '"', "'", "`", "[", "](", "javascript:", "\n", "\r",
                         "\x00", "█", "$$", "**", "<img src=x onerror=alert(1)>", "</p>", "<!--", ",", "=", " "])
TEXT = st.one_of(st.text(max_size=30), st.lists(st.one_of(NASTY, st.text(max_size=4)), max_size=12).map("".join),
                 st.sampled_from(PAYLOADS), st.integers(-10**6, 10**6).map(str),
                 st.floats(allow_subnormal=False).map(str),
                 st.text(min_size=1, max_size=5).map(lambda t: t * (2001 // len(t) + 1)))  # over MAX_CHARS


def links(known: list[str]):
    """{key: value} links: some of the `known` keys with any value, and made-up keys."""
    keys = st.tuples(st.lists(st.sampled_from(known), max_size=8, unique=True), st.lists(TEXT, max_size=4, unique=True))
    return keys.flatmap(lambda k: st.fixed_dictionaries({key: TEXT for key in [*k[0], *k[1]]}))


def parses(url: UrlState, key: str, text: str) -> bool:
    """Whether the link parser takes `text` for `key` (an unknown key: never)."""
    targets = url.targets()
    try:
        if key == "tab":
            url._title(text)
        elif key in targets:
            obj, name = targets[key]
            parse_value(obj.param[name], text)
        else:
            return False
    except ValueError:
        return False
    return True


def check(url: UrlState, pane, model, args: dict) -> None:
    """Apply `args`; every key is applied or named, and the notice reaches the page as text."""
    url.apply(args)  # must not raise, whatever the link
    notice = url.notice
    for key, text in args.items():
        if key not in HANDLED_ELSEWHERE:
            named = f"{_shown(key)}={_shown(text)}" in notice
            assert named or parses(url, key, text), f"{key!r}={text!r} was neither applied nor named in the notice"
    # what the page gets: the notice's own <p>, inside it the link's text escaped, shown as typed
    assert pane.visible == bool(notice)
    if notice:
        markup = page_html(model)  # the model the watcher updated, as a page's would be
        assert markup.startswith(WRAPPER[0]) and markup.endswith(WRAPPER[1]), markup[:80]
        inner = markup[len(WRAPPER[0]):-len(WRAPPER[1])]
        assert "<" not in inner and ">" not in inner
        tags, text = parsed(markup)
        assert [t for t, _ in tags] == ["p"] and text == notice


@pytest.mark.slow
def test_any_link_is_applied_or_named_and_its_text_stays_text(link):
    session, url, pane, model = link
    known = sorted([*url.targets(), "tab", *HANDLED_ELSEWHERE])
    assert {"steps", "template", "tab", "compare.columns", "inspect.text", "sweep.metric", "model.preset"} <= set(known)

    @settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(args=links(known))
    @example(args={"steps": "<img src=x onerror=alert(1)>", "strategy": "<script>alert(2)</script>",
                   "<svg onload=alert(4)>": "1", "tab": "[x](javascript:alert(5))", "template": "&lt;b&gt;"})
    def links_are_safe(args):
        check(url, pane, model, args)

    links_are_safe()
