"""`run.py train` never replaces a file it was not asked to: an existing --out is the run being resumed or
is replaced only with --overwrite; a path must end in .safetensors; a resumed run refuses flags that would
change its network or corpus instead of ignoring them; and a resume with nothing left to train says so."""
from __future__ import annotations

import hashlib

import pytest

from explorer.cli import main
from tests.unit.cli.test_flag_checks import TINY_TRAIN, env, one_error_line  # noqa: F401  (env: a fixture)

pytestmark = pytest.mark.slow  # each case builds a corpus and a model, and most train a few steps


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train(*extra) -> list[str]:
    return ["train", "--data", "tiny.txt", *TINY_TRAIN, *extra]


def test_an_existing_checkpoint_is_not_trained_over(env, capsys):
    tiny = env / "checkpoints" / "tiny.safetensors"
    before = digest(tiny)
    assert main(train("--out", "tiny")) == 2
    one_error_line(capsys, f"--out {tiny} exists: --resume tiny continues that run, --overwrite replaces it")
    assert digest(tiny) == before
    assert main(train("--out", "tiny", "--overwrite")) == 0
    assert digest(tiny) != before


def test_a_path_that_is_not_a_checkpoint_is_refused(env, capsys):
    """A typo must not name the training text (or any other file) as the output."""
    before = digest(env / "tiny.txt")
    for out, needle in (("./tiny.txt", "tiny.txt: a checkpoint path ends in .safetensors"),
                        (str(env / "notes"), "notes: a checkpoint path ends in .safetensors"),
                        ("a b", "--out 'a b': give a checkpoint name"),
                        ("x\ny", "--out 'x\\ny': give a checkpoint name")):
        assert main(train("--out", out)) == 2
        one_error_line(capsys, needle)
    assert digest(env / "tiny.txt") == before and not (env / "notes").exists()


def test_a_resumed_run_goes_on_in_its_own_file_and_refuses_what_it_cannot_change(env, capsys):
    assert main(train("--out", "run")) == 0
    run = env / "checkpoints" / "run.safetensors"
    capsys.readouterr()
    assert main(["train", "--out", "run", "--resume", "run", "--n-embd", "32", "--kind", "ar", "--max-steps", "4"]) == 2
    one_error_line(capsys, "a resumed run keeps its architecture and corpus: --kind ar (the run's is diffusion), "
                           "--n-embd 32 (the run's is 16)")
    before = digest(run)
    assert main(["train", "--out", "run", "--resume", "run", "--max-steps", "2"]) == 2
    one_error_line(capsys, "--max-steps 2: the resumed run has trained 2 steps already; ask for more")
    assert digest(run) == before
    # the same values as the run's, and a schedule going further: trained on
    assert main(["train", "--out", "run", "--resume", "run", "--n-embd", "16", "--max-steps", "3"]) == 0
    assert digest(run) != before
    # another run's file as --out of a resume is still another file
    assert main(["train", "--out", "tiny", "--resume", "run", "--max-steps", "4"]) == 2
    one_error_line(capsys, "exists: --resume tiny continues that run")


def test_a_resumed_run_reads_its_text_where_data_says(env, capsys):
    """A checkpoint records its text's path as given (a shipped one: the bare file name); a resume run
    elsewhere, or after the file moved, names the file with --data, which must then be read."""
    assert main(train("--out", "run")) == 0
    moved = env / "elsewhere" / "text.txt"
    moved.parent.mkdir()
    (env / "tiny.txt").rename(moved)
    capsys.readouterr()
    assert main(["train", "--out", "run", "--resume", "run", "--max-steps", "3"]) == 2
    one_error_line(capsys, "data file not found: tiny.txt")
    assert main(["train", "--out", "run", "--resume", "run", "--max-steps", "3", "--data", str(moved)]) == 0
    from explorer.checkpoint import read_metadata

    meta = read_metadata(env / "checkpoints" / "run.safetensors")
    assert meta["training_state"]["step"] == 3 and meta["train_config"]["data"] == str(moved)
