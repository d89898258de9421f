"""A Hugging Face model in the dashboard: a tiny BERT written to a temp dir, listed by the
operator (serve --models), opened by a session and run through Explore, Compare and Sweep."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from explorer.dashboard import checkpoints as dashboard_checkpoints  # noqa: E402
from explorer.dashboard.runtime.cache import LISTED_MODELS  # noqa: E402
from explorer.dashboard.tabs import build_tab  # noqa: E402
from explorer.dashboard.tabs.explore import open_session  # noqa: E402
from explorer.dashboard.ui.header import header_html  # noqa: E402
from explorer.sampling import sample  # noqa: E402

from tests.support.hf import bert_dir  # noqa: E402

pytestmark = pytest.mark.slow  # the module's tiny BERT (a tokenizer trained, a model saved) costs seconds


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return str(bert_dir(tmp_path_factory.mktemp("bert")))


@pytest.fixture
def listed(checkpoints, bert, monkeypatch):
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([bert])
    return bert


def _session(name, **knobs):
    s = open_session(checkpoint=name, device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    s.param.update(**knobs)
    return s


def test_a_listed_model_runs_in_explore_with_token_strings(listed):
    s = _session(listed, length=12, steps=4, seed=2)
    assert s.error == "" and s.model.config.family == "mlm"
    assert listed in s.param.checkpoint.objects
    explore = s.tabs["Explore"]
    assert explore.start_run(wait=True)
    traj, frames = explore.trajectory, explore.frames
    assert traj.final.shape == (1, 12) and traj.nfe == 4
    assert (traj.final == sample(s.model, s.sampler_config(), length=12).final).all()  # the real sampler
    shown = [frames.glyphs[i] for i in frames.tokens[-1]]
    assert shown == s.model.tokenizer.token_strings(traj.final[0])  # tokens, not characters
    info = s.model_info
    assert info["family"] == "mlm" and info["dtype"] == "fp32" and info["memory_gb"] > 0
    assert "fp32 weights" in header_html(info, s.device_name, "")


def test_a_long_context_opens_at_the_default_length_not_the_whole_context(checkpoints, tmp_path, monkeypatch):
    """A real dLLM's context is 4k-131k tokens: a session that set its length to the context made every
    first run that long. It opens at the model's default length, and the length can still go up to the
    context."""
    long = str(bert_dir(tmp_path / "long", context=1024))
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([long])
    s = _session(long)
    assert s.error == "" and s.model.config.block_size == 1024
    assert s.length == 256 and s.param.length.bounds == (1, 1024)


def test_a_link_is_judged_by_the_models_own_bounds(checkpoints, tmp_path, monkeypatch):
    """A listed model has no preview: before its load the length and top-k bounds were the defaults', so a
    link's length of 1,000 on a 1,024-token model was refused (a shared link did not reopen), and top-k was
    capped at the mask's id (4 here, 103 on BERT) instead of the vocabulary."""
    from explorer.dashboard.urlstate import UrlState

    long = str(bert_dir(tmp_path / "long", context=1024))
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    dashboard_checkpoints.list_models([long])

    def opened(link):
        s = open_session(checkpoint=long, device="cpu", auto_run=False, sweep_auto=False)
        url = UrlState(s, list(s.tabs))
        s.load_hooks.append(url.hook)
        url.apply(link)
        s.load(wait=True)
        return s, url.notice

    s, notice = opened({"length": "1000", "top_k": "50"})
    assert notice == "" and (s.length, s.top_k) == (1000, 50)
    assert s.param.top_k.bounds == (0, s.model.config.vocab_size - 1) and s.model.config.mask_id == 4
    s, notice = opened({"length": "5000", "top_k": "500"})
    assert (s.length, s.top_k) == (256, 0)
    assert "length=5000 (not for" in notice and "outside the range 1 to 1024" in notice
    assert "top_k=500 (not for" in notice and f"outside the range 0 to {s.model.config.vocab_size - 1}" in notice


def test_the_model_tab_describes_a_hugging_face_model_without_training_figures(listed):
    """Its page once read the shipped checkpoints' fields: 'None × None' layers, a context in characters,
    a corpus '? (?)', 0 training steps and empty loss and learning-rate plots. It shows where the model came
    from and what the sampler reads of it; the training figures come back for a checkpoint trained here."""
    from explorer.dashboard.tabs.model.view import summary_html

    s = open_session(checkpoint=listed, device="cpu", auto_run=False, sweep_auto=False)
    tab, view = build_tab("Model", s)
    s.load(wait=True)
    page, html = view.page, summary_html(tab.meta, listed)
    n_params = sum(p.numel() for p in s.model.parameters())
    for expected in ("source", listed, "masked diffusion (bidirectional)", "mlm (model_type bert)",
                     f"{n_params:,} ({n_params / 1e6:.2f} M), fp32 weights", "layers × heads, width", "2 × 2, 32", "64 tokens", "80 ids", "mask id", "trained elsewhere"):
        assert expected in html, expected
    for absent in ("None", "characters", "Training", "Data", "tokens seen"):
        assert absent not in html, absent
    assert not page.trained.visible and not page.time_emb.visible
    s.load("tiny", wait=True)
    assert page.trained.visible and page.time_emb.visible and "Training" in summary_html(tab.meta, "tiny")
    s.close()


def test_the_new_knobs_reach_the_sampler_from_the_session(listed):
    s = _session(listed, length=12, steps=4, cfg_scale=1.5, suppress_eos="both", alg_temp=0.3)
    cfg = s.sampler_config()
    assert (cfg.cfg_scale, cfg.suppress_eos, cfg.alg_temp, cfg.factor) == (1.5, "both", 0.3, None)
    s.param.update(alg_temp=0.0, factor=2.0)
    assert s.sampler_config().factor == 2.0 and s.sampler_config().adaptive


def test_compare_and_sweep_run_on_it(listed):
    s = _session(listed, length=12, steps=4, seed=1)
    tab, view = build_tab("Compare", s)
    assert tab.apply_preset("strategies") is True
    tab.task.worker.current.done.wait(60)
    assert tab.error == "" and len(tab.results) == 2
    assert all(r["error"] == "" and r["traj"].final.shape == (1, 12) for r in tab.results)
    sweep, _ = build_tab("Sweep", s)
    sweep.param.update(steps_grid="1,4", samples=2)
    assert sweep.start_sweep(wait=True)
    assert sweep.main.error == "", sweep.main.error
    table, summary = sweep.main.result
    assert len(table) == 2 * 2 * 2 and set(summary["steps"]) == {1, 4}  # 2 strategies x 2 steps x 2 samples
    assert {"entropy_mean", "distinct_2_mean", "tokens_per_s_mean"} <= set(summary), list(summary)


def test_an_unlisted_model_is_never_opened(checkpoints, bert, monkeypatch):
    monkeypatch.setitem(LISTED_MODELS, "options", None)
    s = open_session(checkpoint=bert, device="cpu", auto_run=False, sweep_auto=False)
    s.load(wait=True)
    assert s.model is not None and s.model.config.kind == "diffusion" and not hasattr(s.model.config, "family")
    assert "is not one of the checkpoints" in s.error


def test_a_chat_prompt_runs_from_the_sidebar(listed):
    s = _session(listed, length=16, steps=2, template="to be or not", chat=True)
    explore = s.tabs["Explore"]
    assert explore.start_run(wait=True) and s.error == ""
    rendered = s.model.tokenizer.encode("[CLS] to be or not [SEP] answer")
    assert explore.trajectory.final[0, : len(rendered)].tolist() == rendered
    assert explore.trajectory.fixed[0].sum() == len(rendered)


def test_a_chat_prompt_on_a_character_model_is_a_notice(checkpoints):
    s = _session("tiny", template="ABC", chat=True)
    assert not s.tabs["Explore"].start_run(wait=True)
    assert "chat template" in s.error


def test_inspect_shows_a_token_models_view_of_masked_text(listed):
    from tests.support.dashboard import wait_for

    s = _session(listed)
    tab, view = build_tab("Inspect", s)
    tab.param.update(text="to be or not to be that is the question", t=0.5, k=3)
    tab.on_shown()
    wait_for(lambda: tab.predictions is not None)
    ids = s.model.tokenizer.encode("to be or not to be that is the question")
    result = tab.predictions
    assert len(result["mask"]) == len(ids)  # one position per token
    table = result["table"]
    strings = s.model.tokenizer.token_strings(ids)
    assert all(row["true"] == strings[row["position"]] for row in table.to_dict("records"))
    assert view.forward.object.count("█") == int(result["mask"].sum()) and "tokens masked" in view.forward.object
