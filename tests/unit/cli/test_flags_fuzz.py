"""Generated values at every flag of every command (sample, evaluate, sweep, train), read from the argparse
parsers themselves so a new flag is covered without touching this file. Each run, on tiny models and a tiny
corpus, must end in exit 0 with a correct run or exit 2 with exactly one `error:` line (the last) and no
traceback. Runs go through the CLI's main() in this process: a subprocess per example is too slow."""
from __future__ import annotations

import argparse
import contextlib
import io

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import load_checkpoint
from explorer.cli import build_parser, main
from tests.support.dashboard import save_tiny_checkpoints
from tests.support.models import TINY_TEXT

pytestmark = pytest.mark.slow

# Each command's base: tiny and quick, so that the flags drawn on top decide the outcome.
BASE = {
    "sample": ["--checkpoint", "tiny", "--steps", "2"],
    "evaluate": ["--checkpoint", "tiny", "-n", "2", "--judge", "none", "--val-sequences", "4", "--steps", "2"],
    "sweep": ["--checkpoint", "tiny", "--steps", "1,2", "--strategy", "confidence", "-n", "2", "--judge", "none",
              "--scheduler-timeout", "1"],
    "train": ["--out", "fuzzed", "--data", "tiny.txt", "--block-size", "16", "--n-layer", "1", "--n-embd", "16",
              "--n-head", "2", "--batch-size", "2", "--max-steps", "2", "--eval-every", "1", "--eval-sequences", "2",
              "--precision", "fp32", "--device", "cpu"],
}
# --workers N starts a local Dask cluster of N processes: only values it must refuse are drawn for it.
REFUSED_ONLY = {"--workers": st.sampled_from(["0", "-1", "x", "1.5", ""])}
# A traceback's first line. Not the bare word: a drawn value may be "Traceback" (hypothesis also draws
# string literals it finds in the code), and the one error line quotes the value it refuses.
TRACEBACK = "Traceback (most recent call last)"
EXAMPLES = {"sample": 120, "evaluate": 50, "sweep": 50, "train": 60}  # about 60 s in all on 2 busy cores

# No path separators or "~": every file a run writes stays in the test's folder. No leading "-": argparse
# would read the value as an option (and "-h" prints the help).
TEXT = st.text(st.characters(blacklist_characters="/\\~\x00", blacklist_categories=("Cs",)), max_size=10).filter(
    lambda s: not s.startswith("-"))
NUMBERS = st.one_of(st.integers(-3, 9), st.sampled_from([10**10, 2**63, 10**30, -10**12]),
                    # subnormals as text below: the tests flush them to zero (conftest), which hypothesis refuses
                    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False))
PLAUSIBLE = st.one_of(st.integers(0, 8).map(str), st.sampled_from(["0.1", "0.5", "0.9", "1.0", "2.5"]))
# one_of draws its branches alike: PLAUSIBLE twice, so that about half the values could be accepted and
# many runs get past the parser to load, sample or train
VALUES = st.one_of(PLAUSIBLE, PLAUSIBLE, NUMBERS.map(str), TEXT,
                   st.sampled_from(["", "nan", "inf", "-inf", "1e9", "1e-320", "5e-324", "true", "none", "1,2", " 3 "]))


def options(command: str) -> list[argparse.Action]:
    """The optional arguments of `command`, as its parser declares them (help aside)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub.choices[command]._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def flag_args(draw, action: argparse.Action) -> list[str]:
    """The flag with a drawn value: a switch alone, a choice or anything at all for the others."""
    flag = action.option_strings[-1]
    if action.nargs == 0:
        return [flag]
    if flag in REFUSED_ONLY:
        return [flag, draw(REFUSED_ONLY[flag])]
    choices = st.sampled_from(list(action.choices)) if action.choices else None
    values = st.one_of(choices, choices, VALUES) if choices is not None else VALUES
    if action.nargs == "?" and draw(st.booleans()):
        return [flag]
    return [flag, draw(values)]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Tiny checkpoints in checkpoints/, a tiny text, the cwd there; no network for Hugging Face names."""
    d = tmp_path_factory.mktemp("fuzz")
    (d / "checkpoints").mkdir()
    save_tiny_checkpoints(d / "checkpoints")
    (d / "tiny.txt").write_text(TINY_TEXT * 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDLM_EXPLORER_CHECKPOINTS", str(d / "checkpoints"))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.chdir(d)
        yield d


def check(command: str, argv: list[str], workdir) -> None:
    out_file = workdir / "checkpoints" / "fuzzed.safetensors"
    out_file.unlink(missing_ok=True)
    try:
        code, out, err = run([command, *argv])
    finally:
        torch.set_num_threads(1)  # --threads changes them for the process; the next example starts alike
    shown = f"{command} {argv}: exit {code}\n{err[-2000:]}"
    assert code in (0, 2) and TRACEBACK not in err, shown
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        # (the last line compared without trailing spaces on either side: a refused value may end in one)
        assert len(errors) == 1 and err.rstrip().splitlines()[-1] == errors[0].rstrip(), shown
        return
    assert out.strip(), shown  # a correct run prints its result
    if command == "train" and "--out" not in argv[len(BASE["train"]):]:
        assert load_checkpoint(out_file).meta["training_state"]["step"] >= 1, shown


@pytest.mark.parametrize("command", list(BASE))
def test_every_flag_takes_any_value_without_a_traceback(workdir, command):
    actions = options(command)

    @settings(max_examples=EXAMPLES[command], deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def one_run(data):
        chosen = data.draw(st.lists(st.sampled_from(actions), min_size=1, max_size=2, unique_by=id), label="flags")
        argv = list(BASE[command])
        for action in chosen:
            argv += flag_args(data.draw, action)
        check(command, argv, workdir)

    one_run()


def test_the_flags_are_read_from_the_parsers():
    """A flag added to a command is fuzzed without this file changing: the actions come from its parser."""
    flags = {a.option_strings[-1] for a in options("train")}
    assert {"--lr", "--n-layer", "--out", "--resume", "--ema"} <= flags
    assert {"--plot", "--workers", "--from-csv", "--x"} <= {a.option_strings[-1] for a in options("sweep")}
