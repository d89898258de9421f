"""Bad input to a served dashboard (the app as `python run.py serve` serves it, in this process): a bad
query string or a bad value in a session is a readable notice, the bad value is never applied, the
session keeps working and the server keeps serving the next visitor. The session alone:
tests/unit/dashboard/test_input_notices.py."""
from __future__ import annotations

import urllib.parse

import pytest
import torch

from tests.support.dashboard import explore, save_tiny_checkpoints, wait_for, write_bad_checkpoints
from tests.support.serving import check_page, get, serve_in_process


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The app as `python run.py serve --checkpoint tiny --no-auto-sweep` serves it (URL arguments
    included), in this process, on checkpoints/ with the tiny checkpoints and every kind of broken file
    (write_bad_checkpoints); yields its URL and the states of the sessions it has made. One server for
    the module: each visitor is a session of its own, as on a class's server (the quality sweep after
    each run, not what these tests are about, is off)."""
    from explorer.dashboard.app import create_app, served_args

    directory = write_bad_checkpoints(save_tiny_checkpoints(tmp_path_factory.mktemp("checkpoints")))
    torch.set_num_threads(1)  # tiny models; and the machine's cores are shared
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDLM_EXPLORER_CHECKPOINTS", str(directory))
        mp.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
        with serve_in_process(lambda: create_app(**served_args("tiny", device="cpu")), liveness=True) as served_app:
            yield served_app


BAD_QUERIES = [
    ("../../etc/passwd", "'../../etc/passwd' is not one of the checkpoints"),
    ("%FF%FE", "'\ufffd\ufffd' is not one of the checkpoints"),  # not UTF-8
    ("<script>alert(1)</script>", "'<script>alert(1)</script>' is not one of the checkpoints"),
    ("notes", "could not load notes: "),  # in the list, but not a checkpoint
]


def test_bad_query_string_is_a_notice_and_the_server_keeps_serving(served):
    """Visitors one after another, each with a bad query: each gets the app and a notice, and the next
    visitor (the next bad query's, then a plain one) still gets the app."""
    url, states = served
    for query, shown in BAD_QUERIES:
        q = query if "%" in query else urllib.parse.quote(query)
        check_page(*get(f"{url}?checkpoint={q}"))  # after the query before: the server keeps serving
        state = states[-1]
        state.load(wait=True)  # what the browser's onload would start; results come back on the server loop
        wait_for(lambda: shown in state.error, message=f"{query}: no notice saying {shown!r}")
        assert state.model_info.get("name", "tiny") == "tiny", query  # the bad name was never applied
        assert get(url + "liveness")[0] == 200
    check_page(*get(url))  # and the next visitor gets the app


def test_a_link_with_a_question_mark_in_a_value_opens(served):
    """Browsers leave a '?' in a query unencoded, so a shared link with a question in its text carries a
    second '?': Panel's reading of the address made that page a 500 error (ui.internals.mend_location_query)."""
    url, states = served
    status, body = get(f"{url}?checkpoint=tiny&template=AB?A&inspect.texts=ABBA?&tab=Inspect")
    check_page(status, body)
    state = states[-1]
    assert state.template == "AB?A" and state.tabs["Inspect"].texts == "ABBA?"
    assert get(url + "liveness")[0] == 200


def test_bad_input_in_a_served_session_is_a_notice_and_it_keeps_working(served):
    url, states = served
    check_page(*get(url))
    state = states[-1]
    state.load(wait=True)
    wait_for(lambda: explore(state).trajectory is not None)  # loaded, then the auto-run finished
    for change, shown in ((dict(template="ABé"), "does not know: 'é'"),
                          (dict(checkpoint="truncated"), "could not load truncated"),
                          (dict(template="AB█C", steps=3), "")):
        state.dispatch(lambda change=change: state.param.update(**change))  # as a widget edit: on the session's loop
        wait_for(lambda: shown in state.error if shown else state.error == "" and not explore(state).running
                 and explore(state).trajectory is not None and explore(state).trajectory.n_steps == 3)
    assert explore(state).frames.text().startswith("AB") and state.checkpoint == "tiny"
    check_page(*get(url))
