"""tools/choose_pattern_defaults.py: a patterns checkpoint's recommended sampler, measured by period-2 pattern
quality and stored in its metadata (weights untouched), where the CLI, the dashboard and the Model page read it."""
from __future__ import annotations

import importlib.util
import sys

import pandas as pd
import pytest
from safetensors import safe_open

from tests.support import ROOT
from tests.support.dashboard import save_tiny_checkpoints

_spec = importlib.util.spec_from_file_location("tools_choose_pattern_defaults",
                                               ROOT / "tools" / "choose_pattern_defaults.py")
tool = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # tools/ holds scripts, not a package
_spec.loader.exec_module(tool)


def summary(rows) -> pd.DataFrame:
    return pd.DataFrame([dict(strategy=s, schedule="linear", temperature=1.0, steps=n, pattern_quality_p2_mean=q,
                              pattern_quality_mean=q) for s, n, q in rows])


def test_the_best_period_2_quality_wins_and_fewer_steps_break_a_near_tie():
    top = tool.best_setting(summary([("confidence", 32, 0.10), ("margin", 16, 0.930), ("random", 8, 0.80)]))
    assert (top["strategy"], top["steps"]) == ("margin", 16)
    near = tool.best_setting(summary([("margin", 16, 0.930), ("confidence", 8, 0.927), ("random", 4, 0.90)]))
    assert (near["strategy"], near["steps"]) == ("confidence", 8)  # within TIE of the best, and cheaper


def _tensors(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


@pytest.mark.slow
def test_write_stores_the_measured_setting_and_keeps_the_weights(tmp_path, capsys):
    from explorer.checkpoint import load_checkpoint, read_metadata
    from explorer.dashboard.tabs.model.meta import summary_sections
    from explorer.sampling.config import recommended

    path = save_tiny_checkpoints(tmp_path) / "tiny.safetensors"
    before = _tensors(path)
    code = tool.main(["--checkpoint", str(path), "--n", "4", "--strategies", "confidence,random",
                      "--schedules", "linear", "--temperatures", "1.0", "--steps", "2,4", "--write", str(path)])
    assert code == 0
    out = capsys.readouterr().out
    assert out.count("\n") >= 5 and "recommended: {'strategy':" in out  # a row per setting, then the pick
    meta = read_metadata(path)
    chosen = meta["sampler_defaults"]
    assert chosen["strategy"] in ("confidence", "random") and chosen["steps"] in (2, 4)
    bars = meta["metrics"]["pattern_bars"]
    assert 0 <= bars["pattern_quality_p2"] <= 1 and bars["samples"] == 4
    assert f"recommended: {chosen}" in out
    after = _tensors(path)
    assert before.keys() == after.keys() and all((before[k] == after[k]).all() for k in before)
    assert recommended(load_checkpoint(str(path), "cpu")) == chosen  # what the CLI and the dashboard start from
    rows = dict(summary_sections(meta, "tiny")["Recommended sampler"])
    assert rows["pattern quality"].startswith(f"period-2 {bars['pattern_quality_p2']:.3f}")


@pytest.mark.parametrize("argv, says", [(["--strategies", "confidence,best"], "--strategies: unknown best"),
                                        (["--steps", "4,x"], "--steps"), (["--n", "0"], "at least 1")])
def test_bad_arguments_are_refused_with_a_message(argv, says, tmp_path, capsys):
    path = save_tiny_checkpoints(tmp_path) / "tiny.safetensors"
    assert tool.main(["--checkpoint", str(path), *argv]) == 2
    assert says in capsys.readouterr().err


def test_a_text_model_is_sent_to_the_text_tool(tmp_path, capsys, tiny_corpus):
    from explorer.checkpoint import save_checkpoint
    from tests.support.models import make_model

    tok = tiny_corpus.tokenizer
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=16)
    path = tmp_path / "text.safetensors"
    save_checkpoint(model, path, {"tokenizer": tok.to_dict(), "corpus": {"name": "tiny", "kind": "text"}})
    assert tool.main(["--checkpoint", str(path), "--n", "2", "--steps", "2"]) == 2
    assert "tools/choose_defaults.py" in capsys.readouterr().err
