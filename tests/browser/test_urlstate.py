"""Shareable links and downloads in a real headless Chromium: a link's knobs and tab are
shown and reproduce the Python API's text; a bad value is named in the notice and not applied;
changing a knob or the tab rewrites the URL; a download button gives a parseable file. One server
for the module (each page is its own session). Screenshots go to pytest's tmp directory."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import param
import pytest
import torch

from tests.support.browser import POLL_MS, open_page, wait_finished, wait_until
from tests.support.dashboard import LENGTH, explore, save_tiny_checkpoints
from tests.support.serving import serve_in_process


def dummy_tab_module():
    """A tab module by the tabs/ contract with one knob, so these tests do not depend on the real tabs."""
    import panel as pn

    from explorer.dashboard.tabs.base import TabState

    class DummyState(TabState):
        URL_PARAMS = ("level",)
        level = param.Integer(3, bounds=(1, 10), label="Level")

    def new_view(tab):
        return pn.Column(pn.widgets.IntInput.from_param(tab.param.level, css_classes=["dummy-level"]))

    from explorer.dashboard.tabs import TabSpec

    # a tab package and its view module, as tabs/<name>/__init__.py and view.py are
    module = types.ModuleType("explorer.dashboard.tabs.dummy")
    module.SPEC = TabSpec("Dummy", DummyState, view="view:new_view", view_arg=None)
    view = types.ModuleType("explorer.dashboard.tabs.dummy.view")
    view.new_view = new_view
    return module, view


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The app as `panel serve` builds it (served_args: ?checkpoint= honoured), over tiny checkpoints,
    with Explore and a dummy tab: one server for the module's pages."""
    from explorer.dashboard import create_app
    from explorer.dashboard.app import served_args

    module, view = dummy_tab_module()
    ckpts = save_tiny_checkpoints(tmp_path_factory.mktemp("ckpt"))
    torch.set_num_threads(1)

    def build():
        template = create_app(**served_args())
        explore(template.explorer_state).sweep_auto = False  # sweeps are not what these tests are about
        return template

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setitem(sys.modules, "explorer.dashboard.tabs.dummy", module)
        monkeypatch.setitem(sys.modules, "explorer.dashboard.tabs.dummy.view", view)
        monkeypatch.setattr("explorer.dashboard.app.TAB_NAMES", ("Dummy",))
        monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(ckpts))
        monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINT", "tiny")
        monkeypatch.setenv("MDLM_EXPLORER_DEVICE", "cpu")
        with serve_in_process(build) as served_app:
            yield served_app


def python_text(steps: int, seed: int, strategy: str, template: str) -> str:
    """The same knobs through the Python API (no dashboard involved)."""
    from explorer.dashboard import checkpoints
    from explorer.sampling import SamplerConfig, sample

    model = checkpoints.load("tiny", torch.device("cpu"))
    config = SamplerConfig(steps=steps, seed=seed, strategy=strategy)
    return sample(model, config, length=LENGTH, template=template).texts()[0]


def shot(page, tmp_path, name: str) -> None:
    """A screenshot to look at (pytest's tmp directory: not one more file in the repository)."""
    page.screenshot(path=str(tmp_path / name))


def active_tab(page) -> str:
    return page.locator(".bk-tab.bk-active").first.inner_text().strip()


def test_a_link_reproduces_the_view(browser, served, tmp_path):
    url, states = served
    page, problems = open_page(browser, url + "?checkpoint=tiny&steps=5&seed=11&strategy=margin&template=AB%E2%96%88"
                                              "&tab=Dummy&dummy.level=7")
    wait_until(lambda: states and states[-1].loaded)  # load done: model knobs, then the link
    state = states[-1]
    assert (state.steps, state.seed, state.strategy, state.template) == (5, 11, "margin", "AB█")
    assert state.tabs["Dummy"].level == 7
    wait_until(lambda: active_tab(page) == "Dummy")
    assert explore(state).trajectory is None  # a link to another tab samples nothing until Explore is shown
    assert page.locator(".dummy-level input").first.input_value() == "7"
    assert page.locator(".knob-strategy select").input_value() == "margin"
    assert page.locator(".knob-seed input").first.input_value() == "11"
    shot(page, tmp_path, "share-link-tab.png")
    page.locator(".bk-tab").get_by_text("Explore", exact=True).click()
    text = wait_finished(page, states)
    assert explore(state).trajectory.n_steps == 5  # the first run used the link
    assert text == python_text(5, 11, "margin", "AB█")
    assert not page.locator(".url-notice").is_visible()
    assert problems == []


def test_a_bad_value_is_named_and_not_applied_and_changes_rewrite_the_url(browser, served, tmp_path):
    """A link's bad values are named in its notice and not applied, and the URL, once loaded, drops them;
    from there a knob's change and a tab's rewrite the URL, and the run's download buttons give files
    that parse."""
    url, states = served
    page, problems = open_page(browser, url + "?steps=999&strategy=magic&seed=3&length=500&bogus=1&tab=Nowhere")
    notice = page.locator(".url-notice").get_by_text("Not applied from the link")
    notice.wait_for(state="visible", timeout=60_000)
    message = notice.inner_text()
    for bad in ("steps=999", "strategy=magic", "length=500", "bogus=1", "tab=Nowhere"):
        assert bad in message, bad
    wait_until(lambda: explore(states[-1]).trajectory is not None)
    state = states[-1]
    assert (state.steps, state.strategy, state.seed, state.length) == (32, "confidence", 3, LENGTH)
    assert active_tab(page) == "Explore"
    shot(page, tmp_path, "share-bad-link.png")
    # once loaded (and the knobs have rested app.URL_QUIET), the URL says what is really shown: the
    # bad values are gone, and the checkpoint, which the link did not name, is in it
    page.wait_for_function("() => location.search.includes('seed=3') && !location.search.includes('bogus')",
                           timeout=30_000, polling=POLL_MS)
    query = parse_qs(urlparse(page.evaluate("() => location.href")).query)
    assert "steps" not in query and "bogus" not in query and query["seed"] == ["3"]
    page.wait_for_function("() => location.search.includes('checkpoint=tiny')", timeout=30_000, polling=POLL_MS)
    assert problems == []

    page.locator(".knob-strategy select").select_option("random")
    page.wait_for_function("() => location.search.includes('strategy=random')", timeout=30_000, polling=POLL_MS)
    wait_until(lambda: explore(state).trajectory is not None and explore(state).trajectory.config.strategy == "random")
    text = wait_finished(page, states)
    with page.expect_download(timeout=60_000) as info:
        page.locator(".downloads-run").get_by_text("Trajectory JSON").click()
    download = info.value
    assert download.suggested_filename == "tiny-seed3-trajectory.json"
    data = json.loads(Path(download.path()).read_text())
    assert data["texts"] == [text] and data["config"]["strategy"] == "random"
    with page.expect_download(timeout=60_000) as info:
        page.locator(".downloads-run").get_by_text("Trajectory CSV").click()
    lines = Path(info.value.path()).read_text().splitlines()
    assert lines[0].startswith("step,row,position,token,char,state") and len(lines) > LENGTH
    with page.expect_download(timeout=90_000) as info:  # made by a second Chromium, off the UI thread
        page.locator(".downloads-run").get_by_text("Heatmap PNG").click()
    assert Path(info.value.path()).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    shot(page, tmp_path, "share-downloads.png")
    page.locator(".bk-tab").get_by_text("Dummy", exact=True).click()
    page.wait_for_function("() => location.search.includes('tab=Dummy')", timeout=30_000, polling=POLL_MS)
    query = parse_qs(urlparse(page.url).query)
    assert query["strategy"] == ["random"] and query["checkpoint"] == ["tiny"] and query["seed"] == ["3"]
    assert problems == []
