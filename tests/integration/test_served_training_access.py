"""Training from the browser on a served dashboard: off unless the operator allows it (`serve
--allow-training`), and then each user's checkpoints are their own: at most --user-checkpoints of them,
never listed to another user nor opened by their links (runtime/owners.py). The real app, served in this
process with the options and environment `serve` gives it, its sessions made by logged-in HTTP clients."""
from __future__ import annotations

import argparse
import json
import os
import urllib.parse

import pytest

from explorer.dashboard.tabs.model.state import OFF_TEXT
from tests.support.dashboard import wait_for
from tests.support.serving import serve_in_process
from tests.support.serving import Client

USERS = {"alice": "alice-password", "bob": "bob-password"}


@pytest.fixture
def serve_cli_env():
    """What `serve` writes into the environment (its session defaults) is undone afterwards."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def small_preset(monkeypatch):
    """The patterns preset's model and held-out set made small: these trainings are about whose files they
    make, not what they learn (the server trains in this process, so it trains this preset)."""
    from explorer.dashboard.tabs.model.state import PRESETS

    small = dict(n_layer=1, n_embd=16, n_head=2, batch_size=8, eval_sequences=16)
    monkeypatch.setitem(PRESETS, "patterns", {**PRESETS["patterns"], **small})


@pytest.fixture
def served(checkpoints, tmp_path, monkeypatch, serve_cli_env, small_preset):
    """start(*serve flags) -> (port, the sessions' states): the app behind a login of USERS, served as
    `python run.py serve --basic-auth USERS.json FLAGS` serves it."""
    import panel as pn

    from explorer.cli import serve
    from explorer.dashboard.app import create_app

    monkeypatch.setattr(pn.config, "_cookie_secret", pn.config._cookie_secret)  # pn.serve sets it
    monkeypatch.setenv("MDLM_EXPLORER_AUTO_SWEEP", "0")
    users = tmp_path / "users.json"
    users.write_text(json.dumps(USERS))
    servers = []

    def start(*argv):
        parser = argparse.ArgumentParser()
        serve.add_arguments(parser)
        args = parser.parse_args(["--no-show", "--port", "0", "--basic-auth", str(users), *argv])
        serve.check_args(args)
        serve.session_defaults(args)
        # sessions no browser connects to stay for the test (Bokeh drops them after 15 s by default)
        server = serve_in_process(lambda: create_app(checkpoint="tiny", device="cpu"),
                                  **{**serve.server_options(args), "unused_session_lifetime_milliseconds": 600_000})
        servers.append(server)
        url, states = server.__enter__()
        return urllib.parse.urlsplit(url).port, states

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def open_page(port, states, user: str, query: str = ""):
    """A logged-in user's page: its session's state (loaded)."""
    client = Client(port)
    assert client.login(user, USERS[user])[0] == 302
    status, _, _, _ = client.request("GET", "/" + query)
    assert status == 200
    state = states[-1]
    state.load(wait=True)  # as the page's onload would; the session takes the model on its loop
    wait_for(lambda: state.model is not None, message="the page's model did not load")
    return state


def train(state, name: str) -> tuple[str, str]:
    """Start a 10-step training named `name` on the session's loop; (saved name, error) once it ends."""
    tab = state.tabs["Model"]
    state.dispatch(lambda: (tab.param.update(train_steps=10, new_name=name), tab.start_training()))
    wait_for(lambda: (tab.saved == name or tab.task.error) and not tab.task.running, timeout=120,
             message=f"training {name} did not end: {tab.task.status!r}")
    return tab.saved, tab.task.error


def test_a_served_dashboard_trains_nothing_unless_allowed(served, checkpoints):
    from bokeh.document import Document
    from panel.io.state import set_curdoc

    from explorer.dashboard.tabs import new_view

    port, states = served()
    state = open_page(port, states, "alice")
    tab = state.tabs["Model"]
    assert tab.owner == "user alice" and not tab.allowed
    assert train(state, "my-run") == ("", OFF_TEXT)
    assert not (checkpoints / "my-run.safetensors").exists()
    # Built in the test's thread with a document of its own: with none, Panel falls back to Bokeh's
    # process-wide current document, which the server's thread sets and clears meanwhile
    with set_curdoc(Document()):
        shown = new_view(tab).train_panel.__panel__()  # what the tab shows instead of its controls
    assert "--allow-training" in shown.object and shown.visible and "train-disabled" in shown.css_classes


def test_allowed_trainings_are_each_users_own_within_a_quota(served, checkpoints):
    port, states = served("--allow-training", "--user-checkpoints", "1")
    alice = open_page(port, states, "alice")
    assert alice.tabs["Model"].allowed
    assert train(alice, "alice-run") == ("alice-run", "")
    assert "alice-run" in alice.param.checkpoint.objects  # hers to sample from at once
    saved, error = train(alice, "alice-two")  # her quota is one checkpoint
    assert "limit per user is 1" in error and "alice-run" in error
    assert not (checkpoints / "alice-two.safetensors").exists()

    bob = open_page(port, states, "bob")
    assert "alice-run" not in bob.param.checkpoint.objects and "tiny" in bob.param.checkpoint.objects
    assert train(bob, "bob-run") == ("bob-run", "")  # his own quota
    linked = open_page(port, states, "bob", "?checkpoint=alice-run")  # a link to her checkpoint
    assert linked.checkpoint != "alice-run" and linked.model_info["name"] != "alice-run"
    again = open_page(port, states, "alice")  # a new page of hers lists hers, not his
    assert "alice-run" in again.param.checkpoint.objects and "bob-run" not in again.param.checkpoint.objects


def test_a_quota_below_one_is_refused_before_serving(checkpoints, monkeypatch, capsys, serve_cli_env):
    from explorer.cli import main

    monkeypatch.setenv("MDLM_EXPLORER_USER_CHECKPOINTS", "0")  # as a `panel serve` operator sets it
    assert main(["serve", "--no-show", "--port", "0", "--allow-training"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: MDLM_EXPLORER_USER_CHECKPOINTS: expected an integer")
