"""The dispatcher of a page built off its loop's thread (runtime/dispatch.document_dispatcher). Callbacks
handed in while Panel writes a held document, in a served page: tests/browser/test_dispatch.py."""
from __future__ import annotations

import threading

from collections import deque

from explorer.dashboard.runtime.dispatch import at_end, document_dispatcher, run_in_order
from tests.support.dashboard import wait_for


def test_a_page_built_off_its_loops_thread_still_gets_a_working_dispatcher():
    """document_dispatcher wakes the loop it was made on; made on a thread with no running loop (a page
    built in a thread pool) it must not wait on a loop nobody runs: it falls back to Panel's
    add_next_tick_callback path, which runs the callback at once for a document with no session."""
    from bokeh.document import Document

    made, ran = {}, []
    thread = threading.Thread(target=lambda: made.update(dispatch=document_dispatcher(Document())))
    thread.start()
    thread.join()
    made["dispatch"](lambda: ran.append("ran"))
    wait_for(lambda: ran == ["ran"], timeout=5, message="the callback never ran")


def _counted_walks(doc) -> list:
    """A list that grows by one each time Bokeh walks `doc`'s model graph (DocumentModelManager.recompute)."""
    walks, real = [], doc.models.recompute

    def recompute():
        walks.append(1)
        real()
    doc.models.recompute = recompute
    return walks


def _document_with_a_column():
    from bokeh.document import Document
    from bokeh.models import Column

    doc, column = Document(), Column()
    doc.add_root(column)
    return doc, column


def test_a_callback_that_changes_the_model_graph_twice_walks_it_once_at_its_end():
    """Two new children in one callback: one walk, after which both are the document's (so a later
    callback's changes to them reach the page); Bokeh alone walks the graph at each change."""
    from bokeh.models import Div

    from explorer.dashboard.ui.internals import one_graph_walk

    doc, column = _document_with_a_column()
    walks = _counted_walks(doc)
    column.children = [Div(text="a")]
    column.children = [Div(text="b")]
    assert len(walks) == 2  # what the block saves

    first, second = Div(text="c"), Div(text="d")
    with one_graph_walk(doc):
        column.children = [first]
        column.children = [first, second]
        assert len(walks) == 2 and first.document is None  # not yet walked
    assert len(walks) == 3
    assert first.document is doc and second.document is doc and doc.get_model_by_id(second.id) is second
    assert "invalidate" not in vars(doc.models)  # the manager's own method again


def test_a_callback_that_only_changes_values_does_not_walk_the_graph():
    """A live run's step (new text, new data): no model added or removed, so no walk."""
    from bokeh.models import ColumnDataSource, Div

    from explorer.dashboard.ui.internals import one_graph_walk

    doc, column = _document_with_a_column()
    div, source = Div(text="a"), ColumnDataSource(data={"x": [1]})
    column.children = [div]
    doc.add_root(source)
    walks = _counted_walks(doc)
    with one_graph_walk(doc):
        div.text = "b"
        source.data = {"x": [1, 2]}
    assert walks == []


def test_a_callback_that_fails_still_has_the_graph_walked_and_the_method_restored():
    from bokeh.models import Div

    from explorer.dashboard.ui.internals import one_graph_walk

    doc, column = _document_with_a_column()
    walks, div = _counted_walks(doc), Div()
    try:
        with one_graph_walk(doc):
            column.children = [div]
            raise RuntimeError("a failing update")
    except RuntimeError:
        pass
    assert len(walks) == 1 and div.document is doc and "invalidate" not in vars(doc.models)


def test_work_left_for_a_callbacks_end_runs_once_after_it_and_only_there():
    """at_end: asked for twice under one key inside a dispatched callback, it runs once, after the callback
    (so it sees every change the callback made), and what it asks for in turn runs too; a callback that
    fails leaves nothing for the next one; outside a dispatched callback at_end says no (the caller works
    at once)."""
    from bokeh.document import Document

    seen, state = [], {"value": 0}

    def finish():
        seen.append(("end", state["value"]))
        at_end("more", lambda: seen.append(("more", state["value"])))

    def change():
        assert at_end("draw", finish)
        state["value"] = 1
        assert at_end("draw", finish)  # the same key: still once
        state["value"] = 2

    def fails():
        at_end("draw", lambda: seen.append(("never", 0)))
        raise RuntimeError("a dashboard update that fails")

    run_in_order(Document(), deque([change, fails, lambda: seen.append(("next", state["value"]))]))
    assert seen == [("end", 2), ("more", 2), ("next", 2)]
    assert not at_end("draw", finish)
