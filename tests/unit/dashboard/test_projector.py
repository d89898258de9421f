"""The projector layout check's judgement (explorer/dashboard/projector.py) of what a page measured, and the
figure each link opens; tests/browser/test_projector.py measures real pages."""
from __future__ import annotations

from explorer.dashboard import lessons
from explorer.dashboard.projector import SEVERAL, figure_selector, judge, verdict


def seen(top=200.0, bottom=600.0, left=10.0, right=1300.0, main=(1366, 1366), page=(1366, 1366), boxes=(),
         reading=(), cut=()):
    return {"parts": 5, "top": top, "bottom": bottom, "left": left, "right": right, "main": list(main),
            "page": list(page), "boxes": list(boxes), "reading": list(reading), "cut": list(cut),
            "sidebar": ["sidenav collapse", 0]}


def test_a_whole_figure_in_the_first_screen_with_nothing_wider_than_shown_is_ok():
    result = judge(seen(), 1366, 768)
    assert result == {"drawn": True, "first_screen": True, "overflow": False, "problems": []}
    assert verdict(result) == "ok"


def test_a_figure_that_ends_under_the_first_screen_is_off_screen():
    # Compare's fifth column wrapped onto a second row: the figure's parts reached 1,080 px
    result = judge(seen(bottom=1080.0), 1366, 768)
    assert not result["first_screen"] and not result["overflow"]
    assert "200-1080 px" in result["problems"][0] and "0-768" in result["problems"][0]
    assert verdict(result) == "off-screen"
    assert not judge(seen(top=-40.0), 1366, 768)["first_screen"]  # scrolled past its top
    assert not judge(seen(right=1400.0), 1366, 768)["first_screen"]  # past the right edge


def test_sideways_scroll_and_what_reads_badly_are_overflow():
    assert verdict(judge(seen(main=(1500, 1366)), 1366, 768)) == "overflow"
    assert verdict(judge(seen(boxes=[(400, 300)]), 1366, 768)) == "overflow"
    result = judge(seen(bottom=900.0, reading=["table key judged perplexity wraps"]), 1366, 768)
    assert verdict(result) == "off-screen, overflow"
    assert result["problems"][-1] == "table key judged perplexity wraps"
    # a control clipped by its container: no scroll reaches it, so only its own box tells
    result = judge(seen(cut=["button Download CSV is cut off at 1300-1400 px"]), 1366, 768)
    assert verdict(result) == "overflow" and result["problems"] == ["button Download CSV is cut off at 1300-1400 px"]


def test_no_figure_is_a_problem_too():
    result = judge(None, 1024, 768)
    assert result["problems"] == ["the figure is not drawn"] and verdict(result) == "not drawn"
    assert verdict(None) == "-"
    # rehearse marks a page whose request waits for its Run button (over the link's auto-start limit)
    assert verdict({**result, "waiting": True, "problems": []}) == "waits for Run"


def test_each_link_names_its_tabs_figure_and_inspects_several_rows_name_theirs():
    assert figure_selector("checkpoint=patterns&steps=8") == ".heatmap-view"
    assert figure_selector("tab=Compare&compare.preset=strategies") == ".compare-column"
    assert figure_selector("tab=Inspect&inspect.t=0.5") == ".inspect-fraction"
    assert figure_selector("tab=Inspect&inspect.ts=0,0.5") == SEVERAL
    assert figure_selector("tab=Inspect&inspect.t=0.5&inspect.texts=a%7Cb") == SEVERAL
    # the figure a link puts first: the text's predictions or top-p figure, several samples or prompts
    assert figure_selector("tab=Inspect&inspect.t=0.5&inspect.first=predictions") == ".inspect-predictions"
    assert figure_selector("tab=Inspect&inspect.first=top-p") == ".inspect-nucleus"
    assert figure_selector("checkpoint=shakespeare&samples=5") == ".explore-samples"
    assert figure_selector("prompts=A%7CB") == ".explore-samples"
    # a lesson figure that names a view below its tab's main figure: that view
    assert figure_selector("tab=Inspect&inspect.t=0.5&lesson=forward-process&figure=4") == ".inspect-ratios"
    assert figure_selector("checkpoint=patterns&lesson=sampling-strategies&figure=5") == ".quality-plot"
    assert figure_selector("tab=Inspect&lesson=forward-process&figure=99") == ".inspect-fraction"  # no such figure
    for fig in lessons.all_figures():  # every lesson figure's link opens a figure the check knows
        assert figure_selector(fig.query).startswith(".")
