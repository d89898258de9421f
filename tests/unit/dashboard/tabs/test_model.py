"""The Model tab without a browser: the metadata page of a tiny checkpoint, the LR schedules of
"Training with the ELBO", a short live training that saves a loadable checkpoint under a new name (and Stop saving
early), names that are refused, training switched off by the server, and Bokeh changes made only
inside the session's dispatch."""
from __future__ import annotations

import panel as pn
import pytest

from explorer.checkpoint import load_checkpoint
from explorer.dashboard.tabs.explore import open_session
from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.model.meta import curves_frame, ema, schedule_frame
from explorer.dashboard.tabs.model.state import ALLOW_ENV, OFF_TEXT, ModelState, cli_command, name_problem
from explorer.dashboard.tabs.model.view import CheckpointPage, TrainingPanel, curves_csv, summary_html
from explorer.dashboard.ui.palette import FONT
from explorer.names import LR_SCHEDULES
from explorer.train import TrainConfig
from tests.support.dashboard import save_tiny_checkpoints, wait_for


@pytest.fixture
def ckpts(tmp_path, monkeypatch):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(save_tiny_checkpoints(tmp_path)))
    monkeypatch.setenv("MDLM_EXPLORER_CACHE", str(tmp_path / "cache"))  # no Tiny Shakespeare here
    return tmp_path


# The patterns preset's model and held-out set made small, for the trainings whose settings are not the
# point (what a run saves, draws, stops or overlays): each trains in a fraction of the time.
SMALL = dict(n_layer=1, n_embd=16, n_head=2, batch_size=8, eval_sequences=16)


@pytest.fixture
def small_preset(monkeypatch):
    from explorer.dashboard.tabs.model.state import PRESETS

    monkeypatch.setitem(PRESETS, "patterns", {**PRESETS["patterns"], **SMALL})


def session(name: str = "tiny"):
    """A loaded session (auto-run off: these tests are about the Model tab) and its Model tab."""
    state = open_session(checkpoint=name, device="cpu", auto_run=False)
    tab, view = build_tab("Model", state)
    state.load(wait=True)
    return state, tab, view


@pytest.mark.slow
def test_page_shows_architecture_size_corpus_curves_and_nelbo(ckpts):
    state, tab, view = session()
    page = summary_html(tab.meta, "tiny")
    for expected in ("masked diffusion", "14,048 (0.01 M)", "1 × 2", "24 characters", "patterns (patterns)",
                     "NELBO 1.500 nats/char (2.164 bits/char)", "Architecture", "Training"):
        assert expected in page, expected
    curves = curves_frame(tab.meta)
    assert curves.values.tolist() == [[1, "train", 2.7], [1, "val", 2.6]]
    assert curves_csv(tab.meta).splitlines() == ["step,split,loss", "1,train,2.7", "1,val,2.6"]  # the download
    pn.panel(view).get_root()  # the whole tab renders
    state.load("tiny-training", wait=True)  # no final metrics yet: the latest validation figure
    assert "not finished: latest validation estimate 2.600 nats/char at step 1" in summary_html(tab.meta, "x")
    state.load("tiny-ar", wait=True)
    assert "autoregressive baseline (causal)" in summary_html(tab.meta, "tiny-ar")
    state.close()


def test_lr_schedules_of_the_elbo_notebook():
    """Warmup, then cosine and linear decay to 10% of the peak; constant stays at the peak."""
    lr = {s: schedule_frame(TrainConfig(lr_schedule=s, max_steps=1000, warmup_steps=100, lr=1e-3)).lr.to_numpy()
          for s in ("cosine", "linear", "constant")}
    for name, values in lr.items():
        assert values[0] == pytest.approx(1e-5) and values.max() == pytest.approx(1e-3, rel=0.02), name
    assert lr["constant"][-1] == pytest.approx(1e-3)
    assert lr["linear"][-1] == pytest.approx(1e-4, rel=0.02) and lr["cosine"][-1] == pytest.approx(1e-4, rel=0.02)
    middle = len(lr["cosine"]) * 55 // 100  # halfway through the decay: cosine 0.55, linear 0.55 of the peak
    assert lr["cosine"][middle] == pytest.approx(lr["linear"][middle], rel=0.05)
    assert ema([2.0, 1.0, 1.0], alpha=0.5).tolist() == [2.0, 1.5, 1.25]


@pytest.mark.slow
def test_short_training_saves_a_loadable_checkpoint_to_sample_from(ckpts, small_preset):
    state, tab, _ = session()
    assert tab.new_name == "my-patterns" and tab.preset == "patterns"
    tab.param.update(train_steps=12, new_name="mine", lr_schedule="linear")
    assert tab.start_training(wait=True), tab.task.error
    assert not tab.task.running and tab.saved == "mine" and tab.task.error == ""
    assert "saved checkpoints/mine.safetensors at step 12" in tab.task.status and "NELBO" in tab.task.status
    assert tab.task.result == {"name": "mine", "step": 12, "note": tab.task.result["note"]}
    assert [p[0] for p in tab.train_points] == list(range(1, 13)) and tab.val_points
    model = load_checkpoint(ckpts / "mine.safetensors")
    assert model.meta["training_state"]["step"] == 12 and "nelbo_nats_per_char" in model.meta["metrics"]
    assert model.meta["train_config"]["lr_schedule"] == "linear"
    assert "train --out mine --corpus patterns" in model.meta["commands"][0]
    assert "mine" in state.param.checkpoint.objects  # choosable in the sidebar and every tab
    assert tab.new_name == "my-patterns"
    tab.param.trigger("sample_saved")  # "Sample from it"
    assert state.show_tab == "Explore"  # asks the app to bring its samples to the front (no app here)
    wait_for(lambda: state.model_info.get("name") == "mine", message="the new checkpoint was not loaded")
    assert tab.meta["training_state"]["step"] == 12  # the page now describes it
    state.close()


@pytest.mark.slow
def test_earlier_runs_are_overlaid_to_compare_schedules(ckpts, small_preset):
    """As "Training with the ELBO" compares cosine, linear and constant schedules: each new training keeps the
    previous run's curves, labelled by its schedule, beside the live one (at most EARLIER_MAX); Clear removes
    them."""
    from explorer.dashboard.tabs.model.state import EARLIER_MAX

    # Six trainings of the small preset: the overlay is about the curves each run records, not their values
    state, tab, view = session()
    panel = view.train_panel
    for i, schedule in enumerate(("cosine", "constant")):
        tab.param.update(train_steps=10, new_name=f"run{i}", lr_schedule=schedule)
        assert tab.start_training(wait=True), tab.task.error
    first, live = tab.earlier[0], tab.train_points
    assert len(tab.earlier) == 1 and first["label"].startswith("cosine · patterns · 10 steps")
    assert [s for s, _ in first["train"]] == list(range(1, 11)) and first["val"]
    assert [lr for _, lr in first["lr"]] != [lr for _, _, lr in live]  # cosine decays, constant does not
    data = panel.earlier_loss.data
    assert data["label"] == ["earlier: " + first["label"]] and data["xs"] == [list(range(1, 11))]
    assert data["ys"][0][0] == first["train"][0][1]  # smoothed from the run's own first loss
    assert panel.earlier_lr.data["ys"] == [[lr for _, lr in first["lr"]]] and panel.clear.visible
    for i in range(EARLIER_MAX):  # 6 runs in all, 5 earlier: only the newest EARLIER_MAX stay
        tab.param.update(train_steps=10, new_name=f"more{i}", lr_schedule="linear")
        assert tab.start_training(wait=True), tab.task.error
    assert len(tab.earlier) == EARLIER_MAX and len(panel.earlier_loss.data["xs"]) == EARLIER_MAX
    assert tab.earlier[0]["label"].startswith("constant") and len(set(panel.earlier_loss.data["color"])) == EARLIER_MAX
    tab.param.trigger("clear_earlier")
    assert tab.earlier == [] and panel.earlier_loss.data["xs"] == [] and not panel.clear.visible
    assert tab.train_points  # the live run stays
    state.close()


@pytest.mark.slow
def test_stop_saves_what_it_has(ckpts, small_preset):
    state, tab, _ = session()
    tab.param.update(train_steps=5000, new_name="stopped")
    assert tab.start_training()
    wait_for(lambda: len(tab.train_points) >= 3, message="no training records arrived")
    assert not tab.start_training() and "stop it before" in tab.task.error  # one training per session
    tab.param.trigger("stop_training")
    # `saved` is set by the task's result watcher, just after `running` drops: wait for the name itself
    wait_for(lambda: tab.saved == "stopped", message=f"stop did not save the run: {tab.task.status!r}")
    assert not tab.task.running
    assert tab.task.status.startswith("saved checkpoints/stopped.safetensors at step")
    step = load_checkpoint(ckpts / "stopped.safetensors").meta["training_state"]["step"]
    assert 3 <= step < 5000
    state.close()


@pytest.mark.slow
def test_session_close_stops_and_saves(ckpts, small_preset):
    state, tab, _ = session()
    tab.param.update(train_steps=5000, new_name="closed")
    assert tab.start_training()
    wait_for(lambda: len(tab.train_points) >= 2)
    state.close()
    wait_for(lambda: (ckpts / "closed.safetensors").exists(), message="closing did not save")
    assert load_checkpoint(ckpts / "closed.safetensors").meta["training_state"]["step"] < 5000


BAD_NAMES = [("", "give the new checkpoint a name"), ("../x", "not a plain name"), ("a b", "not a plain name"),
             ("x.safetensors", "not a plain name"), ("/tmp/evil", "not a plain name"), ("é", "not a plain name"),
             ("tiny", "already exists"), ("a" * 65, "not a plain name")]


def test_bad_names_are_refused(ckpts):
    """Each refused in turn by one session (a refusal starts nothing, so each try meets the same tab)."""
    before = (ckpts / "tiny.safetensors").stat().st_mtime_ns
    state, tab, _ = session()
    for name, says in BAD_NAMES:
        tab.task.error = ""  # the last name's refusal: each name must say its own
        tab.param.update(train_steps=10, new_name=name)
        assert not tab.start_training(wait=True), name
        assert says in tab.task.error and not tab.task.running, (name, tab.task.error)
        assert (ckpts / "tiny.safetensors").stat().st_mtime_ns == before
    assert name_problem("patterns", ["patterns", "shakespeare"])  # the shipped ones: never overwritten
    state.close()


def test_shakespeare_without_its_corpus_says_so(ckpts):
    state, tab, _ = session()
    tab.preset = "shakespeare"
    assert tab.train_steps == 2000 and tab.new_name == "my-shakespeare"
    assert not tab.start_training()
    assert "Tiny Shakespeare is not on this server" in tab.task.error
    state.close()


def test_training_can_be_switched_off(ckpts, monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "0")
    state, tab, view = session()
    assert not tab.start_training() and tab.task.error == OFF_TEXT
    root = pn.panel(view)
    assert any("serve --allow-training" in str(getattr(p, "object", "")) for p in root.select(pn.pane.Alert))
    assert not (ckpts / "my-patterns.safetensors").exists()
    state.close()


def test_url_params_and_command():
    assert ModelState.URL_PARAMS == ("preset", "lr_schedule")
    assert tuple(ModelState.param.lr_schedule.objects) == LR_SCHEDULES  # explorer/names.py, no list of its own
    command = cli_command(TrainConfig(corpus="patterns", max_steps=50, lr_schedule="constant"), "x")
    assert command.startswith("python run.py train --out x --corpus patterns --max-steps 50 --lr-schedule constant")


def test_presentation_mode_enlarges_the_model_tab(ckpts):
    state, _, view = session()
    page, panel = view.page, view.train_panel
    assert isinstance(page, CheckpointPage) and isinstance(panel, TrainingPanel)
    figures = (page.curves_fig, page.lr_fig, panel.loss_pane.object, panel.lr_pane.object)
    assert all(f.title.text_font_size == FONT[False]["title"] for f in figures)
    state.presentation = True
    assert all(f.title.text_font_size == FONT[True]["title"] for f in figures)
    assert all(f.yaxis[0].axis_label_text_font_size == FONT[True]["plot"] for f in figures)
    assert page.summary.styles["font-size"] == FONT[True]["base"] == panel.status.styles["font-size"]
    # the download and the time embedding too: the embedding's long title ran past it at projector type
    assert any(FONT[True]["base"] in str(css) for css in page.csv.stylesheets)
    title = page.time_figure.figure.title
    assert title.text_font_size == FONT[True]["title"] and title.text.endswith("dims (unused)")
    state.presentation = False
    assert title.text_font_size == FONT[False]["title"] and title.text.endswith("not used by this model")
    assert page.time_emb[0].object is page.time_figure.figure and page.time_emb.visible  # one figure, drawn in place
    state.close()


def run_queued(queued: list) -> None:
    """Run what was handed to the session's dispatch, as a served session's event loop would (callbacks
    queued meanwhile included)."""
    while queued:
        queued.pop(0)()


@pytest.mark.slow
def test_bokeh_models_change_only_in_the_sessions_dispatch(ckpts, small_preset):
    """A click reaches the state's watchers wherever Panel processed it: in a served session possibly
    without the document lock (CI: "_pending_writes should be non-None" from the live curve's reset when
    Train was clicked). The tab's figures change only in callbacks handed to the session's dispatch,
    which a served session runs holding the lock; here they wait in a queue until run."""
    queued: list = []
    state = open_session(checkpoint="tiny", device="cpu", auto_run=False, dispatch=queued.append)
    tab, view = build_tab("Model", state)
    page, panel = view.page, view.train_panel
    state.load(wait=True)
    assert len(page.train_src.data["step"]) == 0
    run_queued(queued)
    assert len(page.train_src.data["step"]) == 1  # the stored curve, drawn in the dispatch
    stale = {"step": [7], "loss": [2.0], "smooth": [2.0]}  # a previous run's curve, to be cleared
    panel.train_src.data = dict(stale)
    plan = list(panel.plan_src.data["step"])
    tab.param.update(train_steps=12, new_name="queued")
    state.presentation = True
    tab.param.trigger("train")  # the click
    wait_for(lambda: not tab.task.running or queued, message="the training reported nothing")
    assert list(panel.plan_src.data["step"]) == plan and panel.train_src.data == stale  # nothing drawn yet
    assert panel.loss_pane.object.title.text_font_size == FONT[False]["title"]
    wait_for(lambda: (run_queued(queued), not tab.task.running)[1], message="the training did not finish")
    run_queued(queued)
    assert tab.saved == "queued", tab.task.error
    assert list(panel.train_src.data["step"]) == list(range(1, 13)) == list(panel.used_src.data["step"])
    assert len(panel.val_src.data["step"]) == len(tab.val_points) > 0
    assert panel.plan_src.data["step"][-1] == 12 and panel.loss_pane.object.title.text_font_size == FONT[True]["title"]
    state.close()


def test_the_page_shows_figures_by_length_and_the_recommended_sampler_when_stored():
    """The checkpoint page says how the model does at each canvas length and which sampler
    settings it recommends, with their figures against held-out text; sections absent when not stored."""
    from explorer.dashboard.tabs.model.meta import summary_sections

    meta = {"model_config": {"block_size": 256, "kind": "diffusion"},
            "metrics": {"nelbo_nats_per_char": 1.97, "nelbo_nats_per_char_L64": 2.01, "accuracy_t0.3_L64": 0.56,
                        "accuracy_t0.3_L256": 0.58,
                        "text_bars": {"64 characters": {"gen_ppl": 13.1, "ref_gen_ppl": 4.6, "entropy": 2.86,
                                                        "ref_entropy": 2.95, "passes": True, "samples": 20}}},
            "sampler_defaults": {"strategy": "random", "temperature": 0.8}}
    sections = summary_sections(meta, "m")
    assert sections["Held-out figures by canvas length"] == [
        ("64 characters", "NELBO 2.010 nats/char · accuracy at t = 0.3: 0.560"),
        ("256 characters", "NELBO 1.970 nats/char · accuracy at t = 0.3: 0.580")]
    rows = dict(sections["Recommended sampler"])
    assert rows["settings"] == "strategy random, temperature 0.8"
    assert "gen-PPL 13.1 (held-out 4.6)" in rows["64 characters"] and "passes the bars" in rows["64 characters"]
    bare = summary_sections({"model_config": {"block_size": 24}}, "m")
    assert "Held-out figures by canvas length" not in bare and "Recommended sampler" not in bare


def test_the_architecture_names_the_models_process():
    """A uniform-state model (metadata process=uniform) is not called a masked one."""
    from explorer.dashboard.tabs.model.meta import summary_sections

    def kind(meta):
        return dict(summary_sections(meta, "m")["Architecture"])["kind"]

    assert kind({"model_config": {"kind": "diffusion"}}) == "masked diffusion (bidirectional)"
    assert kind({"model_config": {"kind": "diffusion"}, "process": "uniform"}) == "uniform-state diffusion (bidirectional)"
    assert kind({"model_config": {"kind": "ar"}}) == "autoregressive baseline (causal)"


@pytest.mark.slow
def test_time_embedding_heatmap_of_the_guide(ckpts):
    """The sinusoidal embedding of t at the model's width, saying whether the model uses it."""
    import numpy as np
    import torch

    from explorer.dashboard.tabs.model.meta import time_embedding
    from explorer.model import sinusoidal_embedding

    state, tab, view = session()
    ts, emb, dim, used = time_embedding(tab.meta)
    assert dim == tab.meta["model_config"]["n_embd"] == 32 and emb.shape == (101, 32) and not used
    assert np.allclose(emb[50], sinusoidal_embedding(torch.tensor([0.5]), 32)[0].numpy())  # the model's own
    assert np.abs(emb).max() <= 1.0 and not np.allclose(emb[0], emb[-1])  # t = 0 and t = 1 differ
    assert "not used by this model" in view.page.time_figure.figure.title.text
    image = view.page.time_figure.source.data["image"][0]
    assert image.shape == (101, 32) and np.allclose(image, emb)  # t down, dimension across
    adaln = dict(tab.meta, model_config={**tab.meta["model_config"], "time_conditioning": "adaln"})
    assert time_embedding(adaln)[3]
    state.close()


def test_the_lr_drawn_is_the_lr_used_resumes_included():
    """The schedule a checkpoint really had, not one clean cosine: re-warm-ups at
    each resume (train.lr_at), or the stored per-step LR where the checkpoint has it."""
    from explorer.dashboard.tabs.model.meta import schedule_columns
    from explorer.train import lr_at

    cfg = TrainConfig(max_steps=1000, warmup_steps=100, lr=1e-3, lr_schedule="cosine")
    meta = {"training_state": {"step": 800, "resumed_at": [500]}}
    plan, used = schedule_columns(cfg, 800, meta)
    lr = dict(zip(used["step"].tolist(), used["lr"].tolist()))
    after = min(s for s in lr if s > 500)  # the first drawn step after the resume
    assert max(lr) <= 800 and lr[after] == pytest.approx(lr_at(after - 1, cfg, 500))
    assert lr[after] < lr_at(after - 1, cfg) / 20  # the re-warm-up's dip is drawn
    before = max(s for s in lr if s <= 500)
    assert lr[before] == pytest.approx(lr_at(before - 1, cfg))  # before the resume: the plan
    stored = {"curves": {"lr": [[1, 1e-5], [2, 2e-5]]}, "training_state": {"step": 2}}
    assert schedule_columns(cfg, 2, stored)[1]["lr"].tolist() == [1e-5, 2e-5]


def test_corpus_facts_vocabulary_size_and_first_characters(tmp_path):
    """The dataset prints of "Training with the ELBO" and the guide: the vocabulary as characters, the corpus
    size and its start, when the text it was trained on is on this server (hash-checked); nothing when it is
    not."""
    from types import SimpleNamespace

    from explorer.dashboard.checkpoints import corpus_preview
    from explorer.dashboard.tabs.model.meta import summary_sections
    from explorer.data.corpus import sha256_bytes
    from explorer.data.tokenizer import CharTokenizer
    from tests.support.models import TINY_TEXT

    path = tmp_path / "corpus.txt"
    path.write_text(TINY_TEXT)
    tok = CharTokenizer.from_text(TINY_TEXT)
    meta = {"corpus": {"name": "tiny", "kind": "text", "sha256": sha256_bytes(TINY_TEXT.encode())},
            "train_config": {"data": str(path)}, "tokenizer": tok.to_dict()}
    model = SimpleNamespace(meta=meta, tokenizer=tok, config=SimpleNamespace(block_size=16), path=tmp_path / "m")
    n_val = len(TINY_TEXT) - int(len(TINY_TEXT) * 0.9)  # the last 10% (TextCorpus)
    assert corpus_preview(model) == (len(TINY_TEXT), TINY_TEXT[:200], len(TINY_TEXT) - n_val, n_val)
    vocab = dict(summary_sections(meta, "m")["Data"])["vocabulary"]
    assert vocab.startswith(f"{tok.vocab_size - 1} characters: ↵␣") and "T" in vocab
    page = summary_html(meta, "m", corpus_preview(model))
    assert f"last {n_val:,} held out for validation" in page and "training sequences" not in page
    other = dict(meta, corpus=dict(meta["corpus"], sha256="0" * 64))
    assert corpus_preview(SimpleNamespace(**{**model.__dict__, "meta": other, "path": tmp_path / "o"})) is None


def test_a_patterns_model_page_shows_five_training_sequences():
    """"The Forward Process" §4.1 prints five example sequences: each a pattern of period 2-6 repeated to the
    context."""

    from explorer.dashboard.tabs.model.meta import pattern_examples

    meta = {"corpus": {"name": "patterns", "kind": "patterns"}, "tokenizer": {"type": "char", "chars": "ABCDEFGHIJKLMNO"},
            "model_config": {"block_size": 24}}
    examples = pattern_examples(meta)
    assert len(examples) == 5 and examples == pattern_examples(meta)  # seeded: the same page every time
    for row in examples:
        assert len(row) == 24 and set(row) <= set("ABCDEFGHIJKLMNO")
        assert any(row == (row[:p] * 24)[:24] for p in range(2, 7)), row
    assert len(set(examples)) > 1
    page = summary_html(meta, "patterns")
    assert "Five training sequences" in page and all(row in page for row in examples)
    assert pattern_examples({**meta, "corpus": {"kind": "text"}}) == []


def test_each_training_sequence_shows_its_own_period():
    """A caption of "period 2-6" sat above a row of one symbol (its pattern drew the same symbol at every
    place): each row now shows the period it has."""
    from explorer.dashboard.tabs.model.meta import pattern_examples, smallest_period

    assert [smallest_period(r) for r in ("ABABAB", "AAAAAA", "ABCABCAB", "ABCD")] == [2, 1, 3, 4]
    meta = {"corpus": {"name": "patterns", "kind": "patterns"}, "tokenizer": {"type": "char", "chars": "ABCDEFGHIJKLMNO"},
            "model_config": {"block_size": 24}}
    page = summary_html(meta, "patterns")
    assert "period 2–6" not in page
    for row in pattern_examples(meta):
        assert f"{row}  period {smallest_period(row)}" in page


def test_a_training_command_wraps_between_its_arguments_and_reads_as_typed():
    """The browser broke '--max-minutes' after its hyphens: each argument is kept whole, but one longer than
    a line; the text is the command as run, escaped (a recorded path is outside text)."""
    import re

    from explorer.dashboard.tabs.model.view import command_html

    command = "python run.py train --max-minutes 201 --data <b>x</b>.txt " + "a" * 50
    html = command_html(command)
    assert html.count('<span class="arg">') == 7 and "a" * 50 + "</span>" not in html
    assert "<b>" not in html and "&lt;b&gt;x&lt;/b&gt;.txt" in html
    text = re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">")
    assert text == command
