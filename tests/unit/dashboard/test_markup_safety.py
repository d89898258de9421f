"""No text from outside renders as markup, without a browser: what each pane sends the page (its Bokeh
model's HTML) is parsed, and outside text must come out of it as text, character for character, with
no tag, link or entity of its own. Covers the link's notice, every notice, the views that quote task
statuses and errors, and the rule that keeps it so (one escaping helper; Markdown only for the
dashboard's own words). The same in a real browser: tests/browser/test_markup_safety.py."""
from __future__ import annotations

import ast

import pytest

from explorer.dashboard.app import url_notice
from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs.explore.quality import QualityView
from explorer.dashboard.ui.base import notice, show_notice
from explorer.dashboard.ui.safe import literal
from explorer.dashboard.urlstate import UrlState, _shown
from tests.support import ROOT
from tests.support.dashboard import explore
from tests.support.markup import PAYLOADS, parsed, plain, shown

DASHBOARD = ROOT / "explorer" / "dashboard"


@pytest.fixture
def session(checkpoints):
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    yield s
    s.close()


def test_literal_escapes_for_text_and_attributes():
    assert literal('<a href="x" title=\'y\'>&amp;</a>') == "&lt;a href=&quot;x&quot; title=&#x27;y&#x27;&gt;&amp;amp;&lt;/a&gt;"
    assert literal(3) == "3"
    for text in PAYLOADS:
        assert parsed(f'<span title="{literal(text)}">{literal(text)}</span>') == ([("span", {"title": text})], text)


@pytest.mark.parametrize("text", [*PAYLOADS, "two\nlines  and spaces", "\n".join(PAYLOADS)])
def test_a_notice_shows_any_text_as_typed(text):
    """However it is filled (made with a text, show_notice, or its object set), a notice is plain text:
    no HTML, no Markdown (links, emphasis), no entities decoded, no TeX."""
    made = notice("warning", text=text)
    assert made.visible and plain(made) == text and made.get_root().disable_math
    filled = notice("danger")
    show_notice(filled, text)
    assert filled.visible and plain(filled) == text
    filled.object = text  # a future caller that forgets show_notice
    assert plain(filled) == text
    show_notice(filled, "")
    assert not filled.visible


def test_a_hostile_link_is_named_in_the_notice_as_text(session):
    """Every rejected key and value of a link is quoted in the notice, as text (the notice was a
    Markdown alert given the raw link: `?steps=<img src=x onerror=...>` ran in the page)."""
    url = UrlState(session, list(session.tabs))
    session.load_hooks.append(url.hook)
    args = {p: p for p in PAYLOADS}
    args.update(steps=PAYLOADS[1], strategy=PAYLOADS[0], tab=PAYLOADS[2], template="<b>" + PAYLOADS[3])
    url.apply(args)
    pane = url_notice(url)
    text = plain(pane)
    assert pane.visible and text == url.notice
    for key in PAYLOADS:
        assert f"{_shown(key)}={_shown(key)}" in text
    for key in ("steps", "strategy", "tab"):
        assert f"{key}={_shown(args[key])}" in text
    session.load(wait=True)  # the template is checked against the model's alphabet, and refused
    text = plain(pane)
    assert text == url.notice and f"template={_shown(args['template'])}" in text


def test_a_training_error_quoting_the_typed_name_is_text(checkpoints, monkeypatch):
    """The Model tab's training error quotes the name typed for the new checkpoint (it was set as
    Markdown; the saved notice said **name** in Markdown too)."""
    monkeypatch.setenv("MDLM_EXPLORER_CACHE", str(checkpoints / "cache"))
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Model", state)
    try:
        state.load(wait=True)
        tab.param.update(train_steps=10, new_name=PAYLOADS[1])
        assert not tab.start_training(wait=True)
        error = view.train_panel.error
        assert error.visible and PAYLOADS[1] in plain(error) and plain(error) == tab.task.error
    finally:
        state.close()


def test_task_statuses_are_text(session):
    """A task's status line is HTML put together by the view: the status goes in escaped."""
    view = QualityView(state=explore(session))
    explore(session).quality.status = PAYLOADS[1]
    tags, text = shown(view.status)
    assert tags == [] and text == f"Quality vs steps: {PAYLOADS[1]}"


def test_a_failed_download_says_why_as_text():
    """A failed download's reason (it may quote names) is the button's hover help, which Panel renders
    as Markdown from a str: the download button makes it a Tooltip of text instead."""
    from explorer.dashboard.downloads import download_button

    def make():
        raise ValueError(PAYLOADS[1] + " " + PAYLOADS[4])

    button = download_button("CSV", "run.csv", make)
    button.handler.show(button.handler.produce()[1])
    tooltip = button.get_root().description
    assert isinstance(tooltip.content, str) and PAYLOADS[1] in tooltip.content  # a str: a text node in the page
    assert PAYLOADS[1] in button.label  # a Bokeh button's label is text too
    button.handler.show("")
    assert button.description is None


# ---------------------------------------------------------------------------------- the rule, in the source


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            yield node, ast.unparse(f)


def _constant_text(node: ast.AST) -> bool:
    """A str literal, or literals joined by +: the dashboard's own words."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, ast.BinOp) and _constant_text(node.left) and _constant_text(node.right)


@pytest.mark.slow
def test_outside_text_meets_markup_only_through_the_one_helper():
    """One escaping helper (ui.safe.literal; Panel's transport escape in ui.internals aside); notices
    only through ui.base.notice (plain text); Markdown panes only through ui.base.section, and only
    with literal text (Markdown makes links of escaped text)."""
    offenders = []
    for path in sorted(DASHBOARD.rglob("*.py")):
        rel = path.relative_to(DASHBOARD).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, name in _calls(tree):
            where = f"{rel}:{node.lineno} {name}"
            if name == "html.escape" and rel not in ("ui/safe.py", "ui/internals.py"):
                offenders.append(f"{where}: escape with ui.safe.literal")
            if name.split(".")[-1] in ("Alert", "Markdown", "Str") and rel not in ("ui/base.py", "ui/internals.py"):
                offenders.append(f"{where}: a notice is ui.base.notice, Markdown is ui.base.section")
            if name == "section" and not (node.args and _constant_text(node.args[0])):
                offenders.append(f"{where}: section() takes the dashboard's own words only")
    # Bokeh escapes a tooltip's @field values (the plots' hover texts: sweet spots, candidates) unless
    # the field is marked {safe}
    for path in [*sorted(DASHBOARD.rglob("*.py")), DASHBOARD.parent / "plots.py"]:
        if "{safe}" in path.read_text():
            offenders.append(f"{path.name}: a {{safe}} tooltip field renders its value as HTML")
    assert not offenders, "\n".join(offenders)


def test_the_source_rule_sees_what_it_looks_for():
    tree = ast.parse("import html\nhtml.escape(x)\npn.pane.Alert(t)\nsection(f'{name}')\nsection('# a' + 'b')\n")
    names = [name for _, name in _calls(tree)]
    assert names == ["html.escape", "pn.pane.Alert", "section", "section"]
    sections = [n for n, name in _calls(tree) if name == "section"]
    assert [_constant_text(n.args[0]) for n in sections] == [False, True]
