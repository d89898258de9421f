"""Share and export: trajectory JSON / CSV round trips against a real tiny run, tables as
CSV, figures as standalone HTML (PNG: tests/browser/test_png_export.py), and the lazy download button (made on click, failures shown)."""
from __future__ import annotations

import asyncio
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explorer.dashboard import downloads
from explorer.data.patterns import pattern_tokenizer
from explorer.sampling import SamplerConfig, sample
from tests.support.dashboard import explore
from tests.support.models import make_model

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tok():
    return pattern_tokenizer()


@pytest.fixture(scope="module")
def traj(tok):
    """A real recorded run: 2 rows, a template (fixed positions), revision on (re-masked cells)."""
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=12, n_layer=1, seed=1)
    model.tokenizer = tok
    config = SamplerConfig(steps=6, temperature=1.0, remask=0.3, seed=3)
    return sample(model, config, batch_size=2, length=12, template="AB" + "█" * 10)


def test_json_round_trip(traj, tok):
    text = downloads.trajectory_json(traj, tok)
    assert "NaN" not in text  # strict JSON: undefined scores are null
    d = json.loads(text)
    assert SamplerConfig.from_dict(d["config"]) == traj.config
    assert (d["seed"], d["nfe"], d["n_steps"]) == (traj.seed, traj.nfe, traj.n_steps)
    assert d["texts"] == traj.texts(tok)
    np.testing.assert_array_equal(np.array(d["final"]), traj.final)
    np.testing.assert_array_equal(np.array(d["tokens"]), traj.tokens)
    np.testing.assert_array_equal(np.array(d["committed_at"]), traj.committed_at)
    scores = np.array([[[math.nan if v is None else v for v in r] for r in s] for s in d["scores"]])
    np.testing.assert_allclose(scores, traj.scores, rtol=1e-6, equal_nan=True)
    assert d["vocabulary"] == "".join(tok.chars)


def test_json_of_an_unrecorded_run(tok):
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=12, n_layer=1, seed=1)
    traj = sample(model, SamplerConfig(steps=4), length=12, record=False)
    d = json.loads(downloads.trajectory_json(traj, tok))
    assert not d["recorded"] and "tokens" not in d and d["texts"] == traj.texts(tok)


def test_csv_round_trip(traj, tok):
    df = pd.read_csv(io.StringIO(downloads.trajectory_csv(traj, tok)), keep_default_na=False, na_values=[""])
    S, B, L = traj.n_steps, traj.batch_size, traj.length
    assert list(df.columns) == list(downloads.CSV_COLUMNS)
    assert len(df) == (S + 1) * B * L
    for b in range(B):
        last = df[(df.step == S) & (df.row == b)].sort_values("position")
        np.testing.assert_array_equal(last.token.to_numpy(), traj.final[b])
        assert "".join(last.char) == traj.texts(tok)[b]
        first = df[(df.step == 0) & (df.row == b)]
        assert set(first.state) == {"fixed", "masked"}
    assert (df[df.state == "fixed"].char.isin(["A", "B"])).all()
    assert df.remasked.sum() == traj.remasked.sum()
    step1 = df[df.step == 1].sort_values(["row", "position"])
    np.testing.assert_allclose(step1.score.to_numpy(), traj.scores[0].reshape(-1), rtol=1e-5, equal_nan=True)


def test_table_csv():
    df = pd.DataFrame({"steps": [1, 2], "quality": [0.5, math.nan], "strategy": ["a, b", "c"]})
    back = pd.read_csv(io.StringIO(downloads.table_csv(df)))
    pd.testing.assert_frame_equal(back, df)


def _curve():
    from explorer.plots import _hv

    return _hv().Curve(([1, 2, 3], [3, 1, 2]), "steps", "quality").opts(title="a test curve")


def test_plot_html_is_standalone(tmp_path):
    """Every script inlined: Panel, once imported, adds its ES-module shim to bokeh's pages by a path
    relative to a server (static/extensions/...), which a downloaded file opened from disk reported missing."""
    import re

    from explorer.plots import save_plot

    html = downloads.plot_html(_curve())
    assert "<html" in html.lower() and "a test curve" in html
    assert "cdn.bokeh.org" not in html and "Bokeh.embed" in html  # inline: opens offline
    saved = save_plot(_curve(), tmp_path / "curve.html").read_text()  # the CLI's --plot
    for page in (html, saved):
        assert re.findall(r"<script[^>]*\ssrc=", page) == [] and "es-module-shims.min.js" not in page


def test_figures_never_land_in_the_document_another_thread_is_serving(tmp_path):
    """bokeh's curdoc() is process-wide: while a served session runs a callback (bokeh's patch_curdoc,
    one global stack), it is that session's document for every thread. A download or a saved plot made
    meanwhile re-themed it outside its lock ("_pending_writes should be non-None": the flaky failure of
    the test above under pytest -n 2). Rendered under such a patch, neither touches the served document."""
    from bokeh.document import Document
    from bokeh.io.doc import patch_curdoc
    from bokeh.models import Div

    from explorer.plots import save_plot

    served = Document()
    served.add_root(Div(text="a served page"))
    theme, changes = served.theme, []
    served.on_change(changes.append)
    with patch_curdoc(served):
        assert "a test curve" in downloads.plot_html(_curve())
        assert "a test curve" in save_plot(_curve(), tmp_path / "curve.html").read_text()
    assert served.theme is theme and changes == []


def test_plot_html_of_a_bokeh_figure():
    from bokeh.plotting import figure

    p = figure(title="bokeh figure")
    p.line([1, 2], [1, 2])
    assert "bokeh figure" in downloads.plot_html(p)


def _click(button):
    """What a click runs: the widget's async callback (make() on a worker thread)."""
    return asyncio.run(button.callback())


def test_download_button_is_lazy(traj, tok):
    calls = []

    def make():
        calls.append(1)
        return downloads.trajectory_json(traj, tok)

    button = downloads.download_button("Trajectory JSON", "run.json", make)
    assert not calls  # nothing is made until a click
    first = json.loads(_click(button).read())
    assert first["seed"] == traj.seed and calls == [1] and button.label == "Trajectory JSON"
    assert json.loads(_click(button).read()) == first and calls == [1, 1]  # every click makes a fresh file


def test_download_failure_is_a_notice(tok):
    def make():
        raise ValueError("no run yet")

    button = downloads.download_button("Trajectory CSV", "run.csv", make)
    assert _click(button) is None
    assert "no run yet" in button.label and button.color == "danger"
    button._sync_data(None)  # what the widget does with the None: nothing (no traceback)
    button.handler.make = lambda: b"ok"
    assert _click(button).read() == b"ok" and button.label == "Trajectory CSV"


def test_download_bytes_reach_the_widget(tmp_path: Path):
    button = downloads.download_button("PNG", "plot.png", lambda: PNG + b"rest")
    button._sync_data(_click(button))
    assert button.data.startswith("data:image/png;base64,")


# ---------------------------------------------------------------- the Explore tab's buttons


@pytest.fixture
def session(tmp_path, monkeypatch):
    from explorer.dashboard.tabs.explore import open_session
    from tests.support.dashboard import save_tiny_checkpoints

    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path)))
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    yield s
    s.close()


def _by_label(view, label):
    return next(b for b in view.buttons if b.label == label)


def test_run_buttons_wait_for_a_run_then_export_it(session):
    from explorer.dashboard.tabs.explore.downloads import DownloadsView

    view = DownloadsView(state=explore(session), part="run")
    assert all(b.disabled for b in view.buttons)  # nothing to download before a run
    session.param.update(steps=5, seed=7)
    assert explore(session).start_run(wait=True)
    assert not any(b.disabled for b in view.buttons)
    button = _by_label(view, "Trajectory JSON")
    assert button.filename == "tiny-seed7-trajectory.json"
    d = json.loads(_click(button).read())
    assert d["texts"] == explore(session).trajectory.texts() and d["config"]["steps"] == 5
    df = pd.read_csv(_click(_by_label(view, "Trajectory CSV")))
    assert df.step.max() == explore(session).trajectory.n_steps
    html = _click(_by_label(view, "Heatmap HTML")).read().decode()
    assert "Trajectory: step" in html and "committed this step" in html  # the figure and its colour key


@pytest.mark.slow
def test_sweep_buttons_export_the_sweep(session):
    from explorer.dashboard.tabs.explore.downloads import DownloadsView

    view = DownloadsView(state=explore(session), part="sweep")
    assert all(b.disabled for b in view.buttons)
    explore(session).param.update(sweep_samples=1, sweep_strategies=["confidence"])
    assert explore(session).start_sweep(wait=True), explore(session).quality.error
    df = pd.read_csv(_click(_by_label(view, "Sweep CSV")))
    assert set(df.columns) >= {"steps", "pattern_quality_mean"}
    assert "pattern quality" in _click(_by_label(view, "Quality HTML")).read().decode()
