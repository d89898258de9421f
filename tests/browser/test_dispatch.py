"""The served dispatcher (runtime/dispatch.document_dispatcher): callbacks handed in from any thread run on
the document's loop in the order they were handed in, whatever Panel is doing with the document then.

Handing in through doc.add_next_tick_callback (the dispatcher's old way) registered a callback with a
document event; while the loop's thread held the document (pn.io.unlocked), Panel re-queued such an event
behind those other threads added as it wrote the held patches, so a later callback ran first: Compare's
"done: 2 of 2" was overwritten by its own "1 done", on 2 of 5 page loads."""
from __future__ import annotations

import threading

import panel as pn
from panel.io import document as panel_document

from explorer.dashboard.runtime.dispatch import document_dispatcher
from tests.support.browser import open_page
from tests.support.dashboard import wait_for
from tests.support.serving import serving


def test_callbacks_handed_in_while_panel_writes_a_held_document_run_in_the_order_handed_in(browser, monkeypatch):
    made, ran = {}, []

    def app():
        made["doc"] = pn.state.curdoc
        made["dispatch"] = document_dispatcher(made["doc"])
        made["text"] = pn.pane.Str("start")
        made["column"] = pn.Column(made["text"])
        return made["column"]

    with serving(app) as url:
        page, problems = open_page(browser, url)  # a page: Panel holds only a loaded doc
        wait_for(lambda: "doc" in made and pn.state._loaded.get(made["doc"]), timeout=60, message="never loaded")
        dispatch = made["dispatch"]
        handed_in = threading.Event()

        def hand_in_while_writing(real):
            def write(*args, **kwargs):  # Panel writes the held patches: a worker thread hands in now
                if not handed_in.is_set():
                    handed_in.set()
                    dispatch(lambda: ran.append(3))
                return real(*args, **kwargs)
            return write

        for name in ("write_events", "schedule_write_events"):  # whichever Panel takes for these patches
            monkeypatch.setattr(panel_document, name, hand_in_while_writing(getattr(panel_document, name)))

        def first():  # on the loop, the document held: a patch to write, and a worker hands in
            made["text"].object = "changed"
            worker = threading.Thread(target=dispatch, args=(lambda: ran.append(2),))
            worker.start()
            worker.join()
            ran.append(1)

        dispatch(first)
        wait_for(lambda: len(ran) == 3 or not handed_in.is_set() and len(ran) == 2, timeout=20,
                 message="the callbacks did not all run")
        assert handed_in.is_set(), "Panel wrote no held patches: the window this test is about never came"
        assert ran == [1, 2, 3]
        wait_for(lambda: page.get_by_text("changed").count() == 1, timeout=20)  # and the page got the patch
        dispatch(lambda: 1 / 0)  # a failing update is logged; the ones after it still run
        dispatch(lambda: ran.append(4))
        wait_for(lambda: ran[-1] == 4, timeout=20, message="an update after a failing one never ran")

        # A pane added by one callback and changed by the next: the graph walk at the end of the first
        # (one_graph_walk) makes the new model the document's, so the second's change is sent too
        # (both in one drain: handed in while the loop waits in a callback before them)
        added, gate = pn.pane.Str("added"), threading.Event()
        dispatch(lambda: gate.wait(10))
        dispatch(lambda: made["column"].append(added))
        dispatch(lambda: setattr(added, "object", "changed by the next callback"))
        gate.set()
        wait_for(lambda: page.get_by_text("changed by the next callback").count() == 1, timeout=20)
        assert not problems
