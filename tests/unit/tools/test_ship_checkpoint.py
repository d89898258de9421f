"""tools/ship_checkpoint.py: a shipped checkpoint's recorded commands name its data file by name and the
checkpoint itself as --out / --resume, so a reader can rerun them from a fresh clone; the weights are untouched."""
from __future__ import annotations

import importlib.util
import shlex
import sys

import torch
from safetensors.torch import load_file

from explorer.checkpoint import read_metadata, update_metadata
from tests.support import ROOT
from tests.support.dashboard import save_tiny_checkpoints

_spec = importlib.util.spec_from_file_location("tools_ship_checkpoint", ROOT / "tools" / "ship_checkpoint.py")
tool = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # tools/ holds scripts, not a package
_spec.loader.exec_module(tool)


def test_a_command_keeps_its_flags_and_names_its_data_file_and_checkpoint():
    typed = ("python run.py train --out /scratch/run-7.safetensors --data '/home/me/my data/input.txt' "
             "--init-from shakespeare-ar --lr 5e-4 --max-minutes 70")
    assert shlex.split(tool.portable_command(typed, "bard")) == [
        "python", "run.py", "train", "--out", "bard", "--data", "input.txt", "--init-from", "shakespeare-ar",
        "--lr", "5e-4", "--max-minutes", "70"]
    resumed = "python run.py train --out wip/bard.safetensors --resume wip/bard.safetensors --threads 1"
    assert tool.portable_command(resumed, "bard") == "python run.py train --out bard --resume bard --threads 1"


def test_shipping_rewrites_the_commands_and_data_and_leaves_the_weights(tmp_path):
    folder = save_tiny_checkpoints(tmp_path)
    path = folder / "tiny.safetensors"
    update_metadata(path, {"commands": ["python run.py train --out /tmp/x.safetensors --data ../d/tiny.txt"],
                           "train_config": {"data": "../d/tiny.txt", "batch_size": 4}})
    before, meta_before = load_file(path), read_metadata(path)
    assert tool.main([str(path)]) == 0
    meta = read_metadata(path)
    assert meta["commands"] == [f"python run.py train --out {path} --data tiny.txt"]
    assert meta["train_config"] == {**meta_before["train_config"], "data": "tiny.txt"}  # the rest kept
    assert {k: v for k, v in meta.items() if k not in ("commands", "train_config")} == {
        k: v for k, v in meta_before.items() if k not in ("commands", "train_config")}
    after = load_file(path)
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
