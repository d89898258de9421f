"""The Inspect tab driven without a browser: the forward process, top-k predictions at t, the
validation curves, the knobs a URL carries, and every bad input as a notice."""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from bokeh.models import Span

from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.inspect.markup import predictions_html, predictions_table
from explorer.dashboard.tabs.inspect.masking import draw_mask, fraction_check, prepare_text
from explorer.dashboard.tabs.inspect.plots import FractionPlot, accuracy_plot, fraction_plot, positions_plot
from explorer.dashboard.ui.palette import FONT
from explorer.dashboard.tabs.inspect.state import ACC_TS
from explorer.data.patterns import pattern_tokenizer
from explorer.metrics import topk_predictions
from tests.support.dashboard import LENGTH, wait_for


@pytest.fixture
def inspect(checkpoints):
    """(Session on tiny, the Inspect state, its view), the tab shown and its results in."""
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Inspect", state)
    state.load(wait=True)
    tab.on_shown()  # what showing the tab does (app.watch_shown): it starts computing
    wait_for(lambda: tab.predictions is not None and tab.positions is not None
             and tab.accuracy is not None and len(tab.accuracy) == len(ACC_TS))
    yield state, tab, view
    state.close()


def test_prepare_text_names_unknown_characters_and_cuts_to_the_context():
    tok = pattern_tokenizer()
    assert prepare_text(tok, "ABAB", 8) == ("ABAB", [])
    text, notes = prepare_text(tok, "AéB!A", 8)
    assert text == "ABA" and len(notes) == 1 and "'é', '!'" in notes[0]
    text, notes = prepare_text(tok, "AB" * 10, 8)
    assert text == "ABABABAB" and "20 characters" in notes[0] and "first 8" in notes[0]


def test_mask_is_the_forward_process_of_metrics_reproducible_and_nested():
    a, b = draw_mask(200, 0.4, seed=7), draw_mask(200, 0.4, seed=7)
    assert a.dtype == bool and (a == b).all()
    assert not (draw_mask(200, 0.4, seed=8) == a).all()
    assert (draw_mask(200, 0.2, 7) <= a).all() and (a <= draw_mask(200, 0.6, 7)).all()  # nested in t
    assert not draw_mask(50, 0.0, 1).any() and draw_mask(50, 1.0, 1).all()
    table = fraction_check(64, 0)
    assert np.allclose(table["masked_fraction"], table["t"], atol=0.03)  # actual ~ expected over many draws


def test_tab_shows_validation_text_predictions_and_curves(inspect):
    state, tab, view = inspect
    assert tab.default_text and len(tab.text) == LENGTH and tab.notice == "" and tab.text_notice == ""
    result, mask = tab.predictions, draw_mask(LENGTH, tab.t, tab.mask_seed)
    assert (result["mask"] == mask).all()  # the mask the forward view draws is the one predicted at
    table = result["table"]
    assert list(table["position"]) == list(np.flatnonzero(mask))
    assert {"top1", "p1", "top3", "p3", "true", "correct"} <= set(table.columns)
    assert (table["p1"] >= table["p2"]).all() and (table["p2"] >= table["p3"]).all()
    expected = topk_predictions(state.model, tab.text, tab.t, mask=mask, k=3)["table"]
    assert np.allclose(table["p1"], expected["p1"])  # metrics.topk_predictions, not a re-implementation
    assert list(tab.accuracy["t"]) == list(ACC_TS) and tab.accuracy["accuracy"].between(0, 1).all()
    assert len(tab.positions) == LENGTH
    # the views drew them
    assert view.forward.object.count("█") == int(mask.sum()) and "masked" in view.forward.object
    assert view.grid.object.count('class="col" title=') == int(mask.sum())
    assert list(view.table.object.columns[:4]) == ["position", "true", "top1", "p1"]


def test_knobs_change_the_mask_and_k_and_a_seed_reproduces_it(inspect):
    state, tab, view = inspect
    first = tab.predictions["mask"].copy()
    tab.t = 0.8
    wait_for(lambda: tab.predictions["t"] == 0.8)
    assert tab.predictions["mask"].sum() >= first.sum()
    tab.k = 5
    wait_for(lambda: view.table.object is not None and "top5" in view.table.object)  # drawn after the result is set
    assert "top5" in tab.predictions["table"]
    seed = tab.mask_seed
    tab.redraw = True  # a new random seed: a new mask
    assert tab.mask_seed != seed
    wait_for(lambda: not (tab.predictions["mask"] == draw_mask(LENGTH, 0.8, seed)).all())
    tab.param.update(mask_seed=seed)  # what a shared link does
    assert (tab.predictions["mask"] == draw_mask(LENGTH, 0.8, seed)).all()  # from the cache, at once
    assert tab.URL_PARAMS == ("t", "mask_seed", "k", "nucleus_p", "nucleus_at", "default_text", "text", "ts", "texts",
                              "first")


def test_edited_text_bad_characters_empty_and_too_long_are_notices(inspect):
    state, tab, view = inspect
    default = tab.text
    tab.text = "ABCABCABC"
    assert not tab.default_text
    wait_for(lambda: tab.predictions["text"] == "ABCABCABC")
    tab.text = "ABé CAB"
    assert "'é', ' '" in tab.text_notice
    wait_for(lambda: tab.predictions["text"] == "ABCAB")
    tab.text = "AB" * 40
    assert f"only the first {LENGTH}" in tab.text_notice
    wait_for(lambda: len(tab.predictions["text"]) == LENGTH)
    assert view.text_notice.visible
    tab.text = ""
    assert "empty" in tab.text_notice and tab.predictions is None and view.forward.object == ""
    tab.use_default = True
    assert tab.default_text and tab.text == default and tab.text_notice == ""


def test_an_ar_model_is_explained_and_nothing_is_computed(inspect):
    state, tab, view = inspect
    state.load("tiny-ar", wait=True)
    assert state.model.config.kind == "ar"
    assert "diffusion" in tab.notice and view.notice.visible
    assert tab.predictions is None and tab.accuracy is None and not tab.refresh_predictions()
    assert view.forward.object == ""
    state.load("tiny", wait=True)
    wait_for(lambda: tab.predictions is not None)
    assert tab.notice == ""


def test_a_uniform_state_model_is_shown_its_own_noise(inspect, checkpoints):
    """A uniform-state model never sees [MASK]: Inspect shows it the text with characters redrawn at
    random (the forward view, the predictions and the validation figures from the same draws as the
    training loss's forward_uniform) and asks what it predicts where the noise changed a character."""
    import torch

    from explorer.diffusion import forward_uniform, uniform_accuracy, uniform_posterior_logits
    from tests.support.dashboard import save_twins

    save_twins(checkpoints, names=("tiny-masked", "tiny-uniform"))
    state, tab, view = inspect
    state.load("tiny-uniform", wait=True)
    wait_for(lambda: tab.predictions is not None and tab.accuracy is not None and len(tab.accuracy) == len(ACC_TS))
    assert tab.notice == ""
    model, result, n = state.model, tab.predictions, state.model.config.mask_id
    ids = torch.tensor(model.tokenizer.encode(result["text"]))[None]
    xt, redrawn = forward_uniform(ids, tab.t, n, generator=torch.Generator().manual_seed(tab.mask_seed))
    changed = (xt != ids)[0]
    assert (result["x_t"] == xt[0].numpy()).all() and (result["mask"] == redrawn[0].numpy()).all()
    assert 0 < changed.sum() < redrawn.sum() + 1 and list(result["table"]["position"]) == changed.nonzero()[:, 0].tolist()
    with torch.no_grad():
        tt = torch.tensor([tab.t])
        post = uniform_posterior_logits(model(xt, tt), xt, tt)[0]  # (L, N)
    assert list(result["table"]["top1"]) == [model.tokenizer.decode([i]) for i in post.argmax(-1)[changed].tolist()]
    assert result["table"]["p1"].to_numpy() == pytest.approx(post.exp().max(-1).values[changed].numpy(), abs=1e-5)
    rewritten = (post.argmax(-1) != ids[0]) & ~changed
    assert result["miscorrected"] == int(rewritten.sum())
    assert list(result["top1"]) == [model.tokenizer.decode([i]) for i in post.argmax(-1).tolist()]
    assert view.grid.object.count("the model would write") == int(rewritten.sum())
    # the forward view: the noise's characters where it changed one, and its count in the caption
    assert view.forward.object.count('class="nz"') == int(changed.sum())
    assert f"changed {int(changed.sum())} (" in view.forward.object and "█" not in view.forward.object
    assert "character the noise changed" in view.said.object and "noise changed" in view.legend.object
    assert f"of {int(changed.sum())} changed characters right" in view.grid.object
    # accuracy vs t: at the changed positions, the held-out figure `run.py evaluate` reports
    for _, row in tab.accuracy.iterrows():
        expected = uniform_accuracy(model, torch.as_tensor(tab.tokens), row["t"])["changed"]
        assert row["accuracy"] == pytest.approx(expected)
    assert view.accuracy_plot.figure.title.text.startswith("Accuracy at changed characters")
    # the fraction check counts changed characters: t (N - 1) / N expected
    table = fraction_check(LENGTH, tab.mask_seed, n)
    assert table["expected"].to_numpy() == pytest.approx(table["t"].to_numpy() * (n - 1) / n)
    assert np.allclose(table["masked_fraction"], table["expected"], atol=0.04)
    assert view.fraction_plot.expected.data["expected"][-1] == pytest.approx((n - 1) / n)
    # the training-ratios figure: the share its noise changed, drawn in the masked figure's renderers
    ratios = view.ratios_plot
    assert list(ratios.sources)[1].startswith("uniform-state") and len(ratios.figure.renderers) == 2
    assert ratios.figure.legend.items[1].label.value == list(ratios.sources)[1]
    assert "uniform-state" in ratios.figure.title.text
    state.load("tiny", wait=True)
    wait_for(lambda: tab.predictions is not None)
    assert tab.notice == "" and "changed" not in tab.predictions and "█" in view.said.object
    assert list(ratios.sources)[1].startswith("diffusion") and len(ratios.figure.renderers) == 2
    assert ratios.figure.legend.items[1].label.value == list(ratios.sources)[1]
    assert ratios.figure.title.text.startswith("Masking ratios")


def test_a_uniform_state_models_rewrites_of_untouched_characters_are_drawn_as_wrong_guesses():
    """Not told which characters the noise changed, a uniform-state model may rewrite one it left alone:
    the grid and the several-rows figure show that guess (vermillion, dashed) under the character."""
    from explorer.dashboard.tabs.inspect.markup import several_html

    table = pd.DataFrame([{"position": 1, "true": "b", "true_id": 1, "p_true": 0.6, "correct": True,
                           "top1": "b", "p1": 0.6}])
    result = {"text": "abc", "t": 0.5, "k": 1, "table": table, "mask": np.array([False, True, False]),
              "changed": np.array([False, True, False]), "seen": np.array(["a", "x", "c"], dtype=object),
              "top1": np.array(["a", "b", "q"], dtype=object), "top1_p": np.array([0.9, 0.6, 0.7]),
              "miscorrected": 1}
    import html

    grid = predictions_html("abc", result, 1)
    assert grid.count("the model would write") == 1
    assert "unchanged 'c'; the model would write 'q' 0.70" in html.unescape(grid)
    assert grid.count('class="cd no') == 1 and grid.count('class="cd ok') == 1 and 'class="nz">x<' in grid
    rows = several_html({"texts": ["abc"], "ts": [0.5], "rows": [result]}, list)
    predicts = rows.split("predicts")[1]
    assert predicts.count('class="cd no') == 1 and ">q<" in predicts and predicts.count('class="cd ok') == 1


def test_a_draw_with_nothing_masked_says_so_rather_than_nan():
    """At t = 0 the caption averaged nothing: "mean top-1 probability nan"."""
    from explorer.dashboard.tabs.inspect.markup import predictions_caption
    from explorer.dashboard.tabs.inspect.plots import NucleusPlot

    empty = pd.DataFrame(columns=["position", "true", "true_id", "p_true", "correct"])
    masked = {"t": 0.0, "table": empty}
    noised = {**masked, "changed": np.zeros(5, dtype=bool), "miscorrected": 1}
    assert "no characters masked at this t, so nothing to predict" in predictions_caption(masked)
    caption = predictions_caption(noised)
    assert "no characters changed at this t" in caption and "left alone its top-1 would change 1" in caption
    assert "nan" not in predictions_caption(masked) + caption
    assert NucleusPlot().draw(noised, None, 0.9).figure.title.text == "Top-p: no changed position yet"


def test_nothing_runs_before_the_tab_is_shown(checkpoints):
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Inspect", state)
    state.load(wait=True)
    view.__panel__()  # the page builds every tab's layout at once (app.build_tabs: dynamic=False)
    assert not tab.active and tab.predictions is None and tab.text == ""
    state.close()


def test_figures_and_downloads(inspect):
    state, tab, view = inspect
    from explorer.dashboard.downloads import table_csv

    table = fraction_check(LENGTH, 0)
    fraction = FractionPlot().draw(table, 0.5, 0.4)
    assert list(fraction.actual.data["fraction"]) == [0.4] and fraction.t_mark.location == 0.5  # this text at t
    np.testing.assert_allclose(fraction.draws.data["high"] - fraction.draws.data["low"], 2 * table["std"])
    assert np.isnan(FractionPlot().draw(table, 0.5, None).actual.data["fraction"]).all()  # no text: no point drawn
    assert fraction_plot(table, 0.5, 0.4).title.text == "Forward process: fraction masked vs t"
    full = accuracy_plot(tab.accuracy, 0.3, presentation=True)
    assert list(full.renderers[0].data_source.data["t"]) == list(tab.accuracy["t"]) and len(tab.accuracy) == 9
    assert full.title.text_font_size == FONT[True]["title"] and full.select_one({"type": Span}).location == 0.3
    assert np.isnan(accuracy_plot(None, 0.5).renderers[0].data_source.data["accuracy"]).all()  # none drawn
    assert len(positions_plot(tab.positions, 0.5).renderers[0].data_source.data["confidence"]) == LENGTH
    csv = table_csv(predictions_table(tab.predictions, 3))
    assert csv.splitlines()[0] == "position,true,top1,p1,top2,p2,top3,p3,p_true,correct"
    assert len(csv.splitlines()) == len(tab.predictions["table"]) + 1
    html = predictions_html("A B", {"table": tab.predictions["table"].iloc[:0]}, 3)
    assert html.count('class="col"') == 3 and "&nbsp;" in html
    row = view._downloads()  # the buttons make their files when clicked
    data, reason = row[0].handler.produce()
    assert reason == "" and data.decode().startswith("position,true,top1")
    data, reason = row[3].handler.produce()
    assert reason == "" and b"Accuracy vs masking ratio" in data
    state.presentation = True  # projector type: larger text in the views
    assert "calc(1.3 * 24px)" in view.forward.object


def test_the_ends_of_the_slider(inspect):
    state, tab, view = inspect
    tab.t = 0.0  # nothing masked: no candidates, no error
    wait_for(lambda: tab.predictions["t"] == 0.0 and view.grid.object.count("nothing to predict") == 1)
    assert len(tab.predictions["table"]) == 0 and view.forward.object.count("█") == 0
    tab.t = 1.0  # everything masked
    wait_for(lambda: tab.predictions["t"] == 1.0)
    assert len(tab.predictions["table"]) == LENGTH and tab.notice == "" and tab.validation_error == ""


def test_an_edited_text_travels_in_the_link_and_the_validation_text_does_not(inspect, checkpoints):
    from explorer.dashboard.urlstate import UrlState

    state, tab, view = inspect
    titles = ["Explore", "Inspect"]
    assert "inspect.text" not in UrlState(state, titles).query()  # the excerpt: the model supplies it
    tab.text = "ABCABCAB"
    query = UrlState(state, titles).query()
    assert query["inspect.text"] == "ABCABCAB" and query["inspect.default_text"] == "false"
    # A fresh session opened from that link shows the same text, not the validation excerpt.
    fresh = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    other, _ = build_tab("Inspect", fresh)
    url = UrlState(fresh, titles)
    url.apply(query)
    fresh.load(wait=True)
    other.on_shown()
    wait_for(lambda: other.predictions is not None and other._default is not None)
    assert url.notice == "" and other.text == "ABCABCAB" and not other.default_text
    assert other.predictions["text"] == "ABCABCAB"
    fresh.close()


def test_mean_confidence_is_one_computation_and_one_cache(inspect):
    """Inspect's per-position confidence is mean_confidence.py's table: metrics.per_position_confidence
    on confidence.ROWS validation rows, cached once per (model, t, length) for every view of it."""
    from explorer.dashboard import checkpoints
    from explorer.dashboard import mean_confidence as confidence
    from explorer.metrics import per_position_confidence

    state, tab, view = inspect
    table = confidence.mean_confidence_table(state.model, tab.t, LENGTH)
    assert table is tab.positions  # the cached table, not a second computation
    assert confidence.cached_mean_confidence(state.model, tab.t, LENGTH) is table
    tokens = checkpoints.validation_tokens(state.model, LENGTH, confidence.ROWS)
    expected = per_position_confidence(state.model, tokens, t=tab.t, seed=confidence.SEED)
    assert np.allclose(table["confidence"], expected["confidence"], equal_nan=True)
    assert table.attrs["t"] == tab.t and len(tokens) == confidence.ROWS
    assert confidence.mean_confidence_table(state.model, 0.0, LENGTH).attrs["t"] == 0.01  # t = 0 masks nothing
    tab.t = 0.3
    wait_for(lambda: tab.positions is not None and tab.positions.attrs["t"] == 0.3)
    assert tab.positions is confidence.cached_mean_confidence(state.model, 0.3, LENGTH)
    wait_for(lambda: "t = 0.30" in view.positions_plot.figure.title.text)  # drawn after it is set
    assert view.positions.object is view.positions_plot.figure  # in place: the page keeps its plot


def test_sessions_opening_inspect_at_once_measure_each_point_of_the_accuracy_curve_once(checkpoints, monkeypatch):
    """A class opening one Inspect link: every session starts the curve before any has finished it, and
    still each t of ACC_TS is measured once for them all, each session drawing the same curve."""
    from explorer.dashboard.tabs.inspect.state import accuracy

    calls, all_shown = [], threading.Event()
    real = accuracy.accuracy_vs_t

    def counted(model, tokens, ts, seed):
        calls.append(tuple(ts))
        all_shown.wait(30)  # the first point holds the device until every session has asked for the curve
        return real(model, tokens, ts=ts, seed=seed)

    monkeypatch.setattr(accuracy, "accuracy_vs_t", counted)
    sessions = [open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False) for _ in range(3)]
    tabs = [build_tab("Inspect", state)[0] for state in sessions]
    for state in sessions:
        state.load(wait=True)
    assert len({id(state.model) for state in sessions}) == 1  # one loaded model, so one cache key
    for tab in tabs:
        tab.on_shown()
    wait_for(lambda: calls)
    all_shown.set()
    wait_for(lambda: all(tab.accuracy is not None and len(tab.accuracy) == len(ACC_TS) for tab in tabs))
    assert sorted(calls) == [(t,) for t in ACC_TS]  # each point once, not once per session
    for tab in tabs[1:]:
        assert tab.accuracy.equals(tabs[0].accuracy)
    for state in sessions:
        state.close()


def test_no_validation_data_is_a_notice_and_a_typed_text_still_works(checkpoints, monkeypatch):
    from explorer.dashboard import checkpoints as lookup

    def missing(*args, **kwargs):
        raise ValueError("no validation data for this checkpoint: corpus file missing")

    monkeypatch.setattr(lookup, "validation_tokens", missing)
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Inspect", state)
    # Outside a server the tab's callbacks run on the worker's thread (call_now). A watcher added after the
    # tab's own runs after it has handled the failure (which clears the predictions of the empty text):
    # typing before that raced with it, and the clear could cancel the typed text's predictions.
    handled = threading.Event()
    tab.validation_task.param.watch(lambda event: handled.set() if event.new else None, "error")
    state.load(wait=True)
    tab.on_shown()
    wait_for(lambda: view.notice.visible and view.busy.object == "")  # drawn after the error is set
    wait_for(handled.is_set)
    assert "corpus file missing" in tab.validation_error and "type a text to inspect" in tab.validation_error
    assert tab.accuracy is None and tab.positions is None
    tab.text = "ABCABC"
    wait_for(lambda: tab.predictions is not None and tab.predictions["text"] == "ABCABC")
    state.close()


def test_a_failed_prediction_is_a_notice_and_the_next_one_clears_it(inspect, monkeypatch):
    from explorer.dashboard.tabs.inspect import predict as predictions  # where Inspect calls the model

    state, tab, view = inspect
    real = predictions.topk_predictions
    monkeypatch.setattr(predictions, "topk_predictions", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    tab.k = 4
    wait_for(lambda: "predictions failed: boom" in view.notice.object)  # drawn after the error is set
    assert tab.validation_error == "predictions failed: boom" and view.notice.visible
    monkeypatch.setattr(predictions, "topk_predictions", real)
    tab.k = 5
    wait_for(lambda: tab.predictions is not None and tab.predictions["k"] == 5 and not view.notice.visible)
    assert tab.validation_error == ""


@pytest.mark.slow
def test_the_loss_of_this_example_is_in_the_caption(inspect):
    """The first exercise of "The Forward Process": the loss of a single example, cross-entropy at its masked
    positions."""
    from explorer.dashboard.tabs.inspect.markup import predictions_caption

    _, tab, _ = inspect
    table = tab.predictions["table"]
    nll = -np.log(table["p_true"].to_numpy(dtype=float))
    caption = predictions_caption(tab.predictions)
    assert f"<b>{nll.mean():.3f}</b> nats on average, {nll.sum():.2f} summed" in caption


def test_top_p_figure_keeps_what_the_sampler_keeps(inspect):
    """The top-p exercise of "Generation: Iterative Unmasking": the kept candidates at a masked position are
    exactly those the sampler's own filter (proposals.filter_logits) leaves finite."""
    import torch

    from explorer.sampling.proposals import filter_logits

    state, tab, view = inspect
    result = tab.predictions
    position = int(result["table"]["position"].iloc[1])
    tab.param.update(nucleus_p=0.6, nucleus_at=position)
    assert tab.nucleus_position() == position
    x_t = torch.as_tensor(result["x_t"])[None]
    with torch.no_grad():
        logits = state.model(x_t, torch.tensor([float(tab.t)]))[0, position].float()
    logits[state.model.config.mask_id] = float("-inf")
    survivors = set(torch.isfinite(filter_logits(logits, top_p=0.6)).nonzero().flatten().tolist())
    bars = pd.DataFrame(view.nucleus_plot.source.data)
    kept = bars[bars["fate"] == "kept"]
    assert len(kept) == len(survivors) and f"{len(survivors)} token(s) kept" in view.nucleus_plot.figure.title.text
    assert list(view.nucleus_plot.figure.x_range.factors) == list(bars["token"])
    assert set(result["head_ids"][1][: len(survivors)].tolist()) == survivors
    assert kept["renormalised"].sum() == pytest.approx(1.0)
    assert "is not masked" not in view.nucleus_plot.figure.title.text
    tab.nucleus_at = 10_000  # not a masked position: the first masked one instead, and the title says so
    first = int(result["table"]["position"].iloc[0])
    assert tab.nucleus_position() == first
    assert f"at position {first} (10000 is not masked here):" in view.nucleus_plot.figure.title.text


def test_bert_masks_15_percent_diffusion_every_ratio(inspect):
    """"The Forward Process" §4.4 from real draws: BERT's rows sit at 15%, diffusion's spread over [0, 1]."""
    from explorer.metrics import training_ratios

    table = training_ratios(length=128, n=1000)
    bert = table[table["scheme"].str.startswith("BERT")]["fraction"]
    diffusion = table[table["scheme"].str.startswith("diffusion")]["fraction"]
    assert abs(bert.mean() - 0.15) < 0.01 and bert.std() < 0.05
    assert abs(diffusion.mean() - 0.5) < 0.03 and diffusion.std() > 0.25
    assert diffusion.min() < 0.05 and diffusion.max() > 0.95
    _, _, view = inspect
    assert sorted(view.ratios_plot.sources) == sorted(table["scheme"].unique())  # the two histograms drawn
    # a uniform-state model's noise: the share changed, t (N - 1) / N, from draw_uniform_noise's draws
    noised = training_ratios(length=128, n=1000, n_tokens=4)["fraction"].to_numpy()
    assert (noised[:1000] == bert.to_numpy()).all()  # BERT's rows drawn first, the same
    assert abs(noised[1000:].mean() - 0.5 * 3 / 4) < 0.03 and noised[1000:].max() < 0.9  # never all: a quarter of redraws land on the original


def test_the_ratios_figure_draws_once_per_server_what_training_ratios_draws(monkeypatch):
    """Every session's ratios figure at one length is the same seeded draw: made once, then shared
    (lengths no other test asks for: the cache is the process's)."""
    from explorer.dashboard.tabs.inspect import state as inspect_state
    from explorer.metrics import training_ratios

    calls = []
    monkeypatch.setattr("explorer.metrics.training_ratios",
                        lambda length, n_tokens=None: calls.append(length) or training_ratios(length, n_tokens=n_tokens))
    first = inspect_state.ratios_table(37)
    assert inspect_state.ratios_table(37) is first and calls == [37]
    assert first.equals(training_ratios(37))
    assert inspect_state.ratios_table(38) is not first and calls == [37, 38]


def test_the_ratios_figure_is_drawn_again_only_for_another_context(inspect):
    """A model change that keeps the context (another checkpoint's info, the same length) sends the page
    nothing new; the projector's type size changes the figure's type, not its draws. Every figure of the
    tab stays the one the page has (drawn in place)."""
    state, tab, view = inspect
    figures = [pane.object for pane in (*view.plots, view.positions, view.nucleus, view.ratios)]
    draws = {scheme: source.data for scheme, source in view.ratios_plot.sources.items()}
    state.model_info = {**state.model_info, "loaded_at": "again"}  # what a reload of the same model sends
    assert {scheme: source.data for scheme, source in view.ratios_plot.sources.items()} == draws
    assert all(view.ratios_plot.sources[s].data is d for s, d in draws.items())
    state.presentation = True
    assert view.ratios_plot.figure.title.text_font_size == FONT[True]["title"]
    assert view.fraction_plot.figure.legend[0].label_text_font_size == FONT[True]["plot"]
    assert [pane.object for pane in (*view.plots, view.positions, view.nucleus, view.ratios)] == figures


def test_predictions_for_an_edited_text_are_marked_until_replaced(inspect, monkeypatch):
    """After an edit, the previous text's predictions stay on screen, dimmed and
    labelled, until the new ones arrive; then the label goes."""
    import threading

    from explorer.dashboard.tabs.inspect.state import predictions

    _, tab, view = inspect
    assert "Updating" not in view.grid.object
    gate, real = threading.Event(), predictions._predict
    monkeypatch.setattr(predictions, "_predict", lambda *a: (gate.wait(30), real(*a))[1])
    tab.param.update(default_text=False, text="ABCABCABCABC")
    assert "Updating" in view.grid.object and tab.stale(tab.predictions)
    gate.set()
    # the view redraws from the predictions' watcher: wait for both, not the state alone
    wait_for(lambda: tab.predictions["text"] == "ABCABCABCABC" and "Updating" not in view.grid.object)
    assert not tab.stale(tab.predictions)


def test_the_same_text_at_several_t_in_one_figure(inspect):
    """"The Forward Process" at t = 0, 0.2, ..., 1 in one figure: one row per t of the same text and mask
    seed (nested masks), each row exactly the tab's predictions for that t alone."""
    from explorer.dashboard.tabs.inspect.predict import predict

    state, tab, view = inspect
    assert not view.several_box.visible and tab.several is None  # not asked: not computed, not shown
    tab.ts = "0, 0.2,0.4,0.6,0.8,1"
    wait_for(lambda: tab.several is not None)
    rows = tab.several["rows"]
    assert [r["t"] for r in rows] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0] and view.several_box.visible
    for row in rows:  # each row is the solo computation: the same mask, the same numbers
        alone = topk_predictions(state.model, tab.text, row["t"], mask=draw_mask(LENGTH, row["t"], tab.mask_seed), k=3)
        assert (row["mask"] == alone["mask"]).all() and row["predicted_text"] == alone["predicted_text"]
        assert row["table"].equals(alone["table"])
    counts = [int(r["mask"].sum()) for r in rows]
    assert counts[0] == 0 and counts[-1] == LENGTH and counts == sorted(counts)
    html = view.several.object
    assert html.count("<th>t = ") == 6 and html.count(">sees<") == 6 and html.count(">predicts<") == 6
    seen = html.split(">sees<")[1:]
    assert [block.split("</tr>")[0].count("█") for block in seen] == counts  # each row drawn at its own mask
    tab.t = 0.5  # the slider moves the single-t view, and the solo predictions at a listed t are the row's
    tab.t = 0.4
    wait_for(lambda: tab.predictions["t"] == 0.4)
    assert tab.predictions is predict(state.model, tab.text, 0.4, tab.mask_seed, 3) is rows[2]


def test_several_texts_each_at_t_as_alone(inspect):
    """"Training with the ELBO"'s three quotes at t = 0.4 in one figure: each text's row is the tab's
    predictions for that text alone; the slider's t when no list of t is given."""
    state, tab, view = inspect
    tab.t = 0.4
    quotes = ["ABCABCABCABCABCABC", "AAAABBBBAAAABBBB", "ABABABABAB"]
    tab.texts = " | ".join(quotes)
    wait_for(lambda: tab.several is not None and tab.several["texts"] == tuple(quotes))
    rows = tab.several["rows"]
    assert [(r["text"], r["t"]) for r in rows] == [(q, 0.4) for q in quotes]
    for q, row in zip(quotes, rows):
        alone = topk_predictions(state.model, q, 0.4, mask=draw_mask(len(q), 0.4, tab.mask_seed), k=3)
        assert row["predicted_text"] == alone["predicted_text"] and row["table"].equals(alone["table"])
    # the view draws the result once the task has ended (until then it shows the task's progress)
    wait_for(lambda: ">original<" in view.several.object)
    html = view.several.object
    assert html.count(">original<") == 3 and all(q in html for q in quotes) and html.count("right (") >= 1
    tab.ts = "0.2,0.8"  # texts x t
    wait_for(lambda: tab.several["ts"] == (0.2, 0.8))
    assert [(r["text"], r["t"]) for r in tab.several["rows"]] == [(q, t) for q in quotes for t in (0.2, 0.8)]


def test_several_texts_and_t_are_bounded_and_explained(inspect):
    """A hostile or mistyped list never starts unbounded work: over the caps it is refused and said."""
    from explorer.dashboard.tabs.inspect.state import MAX_TEXTS, MAX_TS
    from explorer.dashboard.tabs.inspect.state.several import parse_texts, parse_ts

    assert parse_ts("0, 0.5,0.5 , 1") == (0.0, 0.5, 1.0) and parse_texts(" a |b| |") == ("a", "b")
    for bad in ("0.2,x", "1.5", "nan", ",".join(str(i / 20) for i in range(MAX_TS + 1))):
        with pytest.raises(ValueError):
            parse_ts(bad)
    with pytest.raises(ValueError, match="at most"):
        parse_texts("|".join("AB" * (i + 1) for i in range(MAX_TEXTS + 1)))
    state, tab, view = inspect
    tab.ts = ",".join(str(i / 20) for i in range(20))
    assert "at most 11" in tab.several_notice and "at most 11" in view.several_notice.object
    wait_for(lambda: tab.several is not None and len(tab.several["rows"]) == 1)  # the slider's t instead
    tab.texts = "AB!C"
    wait_for(lambda: tab.several["texts"] == ("ABC",))
    assert "'!'" in tab.several_notice


def test_projector_type_reaches_the_tabs_inputs_and_buttons(inspect):
    """The mask seed, the text box and the buttons draw in a shadow DOM the tab's type size does not reach:
    at projector type they had stayed small."""
    from explorer.dashboard.ui.palette import FONT

    state, tab, view = inspect
    widgets = (view.text, view.seed, view.redraw, view.reset, view.nucleus_at)
    big = lambda w: any(FONT[True]["base"] in str(css) for css in w.stylesheets)  # noqa: E731
    assert not any(big(w) for w in widgets)
    state.presentation = True
    assert all(big(w) for w in widgets)
    state.presentation = False
    assert not any(big(w) for w in widgets)


def test_on_a_projector_a_links_several_texts_come_above_the_tabs_notice(inspect):
    """A notice about the held-out text (missing on a server without the training file) concerns the
    validation figures: above a link's several texts and t it pushed them off a 1024x768 first screen."""
    state, tab, view = inspect
    view.__panel__()  # the tab's page: figure_first places its parts
    order = lambda item: int(item.styles.get("order", 0))  # noqa: E731  CSS order: lower comes higher
    assert order(view.several_box) == order(view.notice) == 0
    state.presentation = True
    assert order(view.several_box) < order(view.notice) < 0
    state.presentation = False
    assert order(view.several_box) == order(view.notice) == 0


def test_predictions_arriving_after_the_session_let_go_of_its_model_draw_nothing(inspect):
    """A result handed in while the session closes (its model already None) clears the view instead of
    raising on the model's tokenizer (a thread exception in a loaded full run)."""
    state, tab, view = inspect
    assert view.grid.object and tab.predictions is not None
    state.model = None
    view._predictions()
    assert view.grid.object == "" and view.table.object is None


def test_a_repeat_visit_shows_its_cached_predictions_once(inspect):
    """A second session of the same link finds the validation text and the predictions in the caches:
    they arrive in one UI callback, and the predictions are announced (and the top-p figure drawn) once.
    Twice, the page got a patch changing a figure it was never sent, and rejected all of it."""
    first = inspect[1].predictions
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Inspect", state)
    state.load(wait=True)
    announced, figures = [], []
    tab.predictions_task.param.watch(lambda event: announced.append(event.new), "result")
    draw = view.nucleus_plot.draw
    view.nucleus_plot.draw = lambda *args: figures.append(args) or draw(*args)
    tab.on_shown()
    wait_for(lambda: tab.validation_task.result is not None and not tab.validation_task.running)
    wait_for(lambda: tab.positions is not None and tab.accuracy is not None)
    assert announced == [first]  # the cached result, once (not computed again)
    assert len(figures) == 1 and view.grid.object.count('class="col" title=') == int(first["mask"].sum())
    tab.predictions_task.show(first, "from cache")  # the result on screen again: nothing to redraw
    assert len(announced) == 1 and len(figures) == 1
    state.close()


def test_several_rows_wrap_between_words_at_the_same_places_and_say_the_accuracy_under_t():
    """Each row of one text in the same word blocks (a row wraps between words only, never mid-word, and
    its rows wrap alike, column under column); the masked share right under the t label, whole in its tooltip."""

    from explorer.dashboard.tabs.inspect.markup import several_html

    text = "to be\nor not"
    table = pd.DataFrame({"position": [1, 3, 7], "top1": ["o", "x", " "], "p1": [0.9, 0.2, 0.5],
                          "correct": [True, False, False]})
    mask = np.array([c in (1, 3, 7) for c in range(len(text))])
    markup = several_html({"ts": (0.5,), "texts": (text,), "rows": [{"text": text, "t": 0.5, "mask": mask,
                                                                     "table": table}]}, list)
    rows = [row.split('class="txt">')[1].split("</td>")[0] for row in markup.split("<tr")[1:]]
    assert len(rows) == 3  # original, sees, predicts
    blocks = [row.split('<span class="w">')[1:] for row in rows]
    assert [len(b) for b in blocks] == [4, 4, 4]  # "to ", "be↵", "or ", "not"
    assert "".join(blocks[0]).replace("</span>", "") == "to be↵or not"
    assert [b.count("█") for b in blocks[1]] == [1, 1, 1, 0]  # the mask kept within each word's block
    assert '<th class="acc" title="1 of 3 right (33%)">1 of 3 right</th>' in markup


def test_a_page_built_before_its_model_loads_draws_the_masking_ratios_once(checkpoints):
    """A link to Inspect builds the tab before the model has loaded: the BERT-vs-diffusion ratios figure is
    drawn at the checkpoint's context from its metadata, so the load does not draw it again (new draws are
    a repaint for the page)."""
    s = open_session(checkpoint="tiny", device="cpu", auto_run=False, sweep_auto=False)
    assert s.model is None  # not loaded yet
    tab, view = build_tab("Inspect", s)
    drawn = {scheme: source.data for scheme, source in view.ratios_plot.sources.items()}
    assert len(drawn) == 2
    s.load(wait=True)
    assert s.model is not None and s.model.config.block_size == LENGTH
    assert all(view.ratios_plot.sources[scheme].data is data for scheme, data in drawn.items())  # not sent again
