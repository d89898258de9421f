"""`python run.py sweep` and `python run.py evaluate` on tiny checkpoints (the `ckpt_dir` fixture): tables,
summaries and plots written, a saved sweep re-plotted, text sweeps with a judge, errors as one line."""
from __future__ import annotations

import io

import pandas as pd
import pytest

from explorer.cli import main as cli_main

TIMING = ["seconds", "solo_seconds", "tokens_per_s", "ms_per_sample"]


@pytest.mark.slow
def test_cli_sweep_writes_csv_summary_and_plot(ckpt_dir, capsys):
    out = ckpt_dir / "res.csv"
    rc = cli_main(["sweep", "--checkpoint", "pat", "--steps", "1,2", "--strategy", "confidence,random",
                   "--n", "2", "--out", str(out), "--plot", str(ckpt_dir / "res.html"), "--plot-resources", "cdn"])
    assert rc == 0
    table = pd.read_csv(out)
    assert len(table) == 2 * 2 * 2 + 2 and set(table["sampler"]) == {"diffusion", "reference"}
    assert (ckpt_dir / "res.summary.csv").is_file() and (ckpt_dir / "res.html").is_file()
    assert "sweet spot" in capsys.readouterr().out
    # several metrics / axes: one file each
    assert cli_main(["sweep", "--checkpoint", "pat", "--steps", "1,2", "--n", "2", "--no-reference",
                     "--plot", str(ckpt_dir / "f.html"), "--metric", "pattern_quality,tokens_per_s",
                     "--x", "steps,nfe", "--plot-resources", "cdn"]) == 0
    assert sorted(p.name for p in ckpt_dir.glob("f.*.html")) == [
        f"f.{m}.{x}.html" for m in ("pattern_quality", "tokens_per_s") for x in ("nfe", "steps")]


def test_cli_sweep_no_pack_times_each_batch_alone_with_the_same_samples(ckpt_dir, monkeypatch):
    """--no-pack: no shared model calls (sample_many is never called), the same samples row for row."""
    import explorer.experiments as ex

    args = ["sweep", "--checkpoint", "pat", "--steps", "1,3", "--strategy", "confidence,random", "--n", "3",
            "--no-reference"]
    assert cli_main([*args, "--out", str(ckpt_dir / "packed.csv")]) == 0

    def refused(*a, **k):
        raise AssertionError("--no-pack packed the model calls")

    monkeypatch.setattr(ex, "sample_many", refused)
    assert cli_main([*args, "--no-pack", "--out", str(ckpt_dir / "alone.csv")]) == 0
    packed, alone = pd.read_csv(ckpt_dir / "packed.csv"), pd.read_csv(ckpt_dir / "alone.csv")
    assert len(alone) == 2 * 2 * 3 and alone["text"].tolist() == packed["text"].tolist()
    assert alone["nfe"].tolist() == packed["nfe"].tolist()


@pytest.mark.slow
def test_cli_sweep_from_csv_plots_a_saved_sweep_without_sampling(ckpt_dir, capsys, monkeypatch):
    """--from-csv: the summary and the figures of an earlier --out table, nothing loaded or sampled; a file
    that is not a sweep table, or neither --checkpoint nor --from-csv, is one error line and exit 2."""
    import explorer.experiments as ex

    saved = ckpt_dir / "saved.csv"
    assert cli_main(["sweep", "--checkpoint", "pat", "--steps", "1,2", "--strategy", "confidence,random", "--n", "2",
                     "--out", str(saved)]) == 0
    first = capsys.readouterr().out

    def refused(*a, **k):
        raise AssertionError("--from-csv sampled")

    monkeypatch.setattr(ex, "sample", refused)
    monkeypatch.setattr(ex, "sample_many", refused)
    assert cli_main(["sweep", "--from-csv", str(saved), "--plot", str(ckpt_dir / "again.html"), "--metric",
                     "pattern_quality,tokens_per_s", "--plot-resources", "cdn"]) == 0
    again = capsys.readouterr().out
    def cells(out):  # each printed row but its tokens/s: the cells, n, NFE and every quality mean ± sem
        rows = [line.split() for line in out.splitlines() if line.startswith("diffusion")]
        return [r[:5] + r[6:] for r in rows]

    assert cells(again) == cells(first) and len(cells(first)) == 4
    assert sorted(p.name for p in ckpt_dir.glob("again.*.html")) == ["again.pattern_quality.steps.html",
                                                                   "again.tokens_per_s.steps.html"]
    (ckpt_dir / "other.csv").write_text("a,b\n1,2\n")
    for argv, says in ((["--from-csv", str(ckpt_dir / "other.csv")], "not a sweep's per-sample table"),
                       (["--from-csv", str(ckpt_dir / "missing.csv")], "missing.csv"),
                       (["--steps", "1,2"], "--checkpoint is required")):
        assert cli_main(["sweep", *argv]) == 2
        assert says in capsys.readouterr().err
    # a metric the saved sweep lacks: the one error line, not the whole table above it
    assert cli_main(["sweep", "--from-csv", str(saved), "--plot", str(ckpt_dir / "x.html"), "--metric", "gen_ppl"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: --metric gen_ppl: not in this sweep")


def test_cli_evaluate_patterns_and_text(ckpt_dir, capsys):
    assert cli_main(["evaluate", "--checkpoint", "pat", "--n", "2", "--steps", "4", "--val-sequences", "8"]) == 0
    out = capsys.readouterr().out
    assert "NELBO" in out and "accuracy" in out and "reference" in out
    assert cli_main(["evaluate", "--checkpoint", "txt", "--data", str(ckpt_dir / "tiny.txt"), "--n", "2",
                     "--steps", "4", "--judge", "none"]) == 0
    assert "word_validity" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_text_sweep_with_judge_and_ar_baseline(ckpt_dir, capsys):
    rc = cli_main(["sweep", "--checkpoint", "txt", "--data", str(ckpt_dir / "tiny.txt"), "--judge", "ar", "--ar",
                   "--steps", "1,2", "--strategy", "confidence", "--threshold", "none,0.5", "--n", "2",
                   "--out", str(ckpt_dir / "t.csv"), "--plot", str(ckpt_dir / "t.html"),
                   "--metric", "gen_ppl,entropy", "--x", "steps,nfe", "--plot-resources", "cdn"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "gen_ppl" in out and "sweet spot" in out
    table = pd.read_csv(ckpt_dir / "t.csv")
    assert set(table["sampler"]) == {"diffusion", "ar", "reference"}
    assert len(table[table["threshold"] == 0.5]) == 2  # one threshold cell, not one per step count
    assert len(list(ckpt_dir.glob("t.*.html"))) == 4


def test_cli_evaluate_ar_checkpoint(ckpt_dir, capsys):
    assert cli_main(["evaluate", "--checkpoint", "ar", "--data", str(ckpt_dir / "tiny.txt"), "--n", "2",
                     "--judge", "ar"]) == 0
    out = capsys.readouterr().out
    assert "cross-entropy" in out and "accuracy" not in out and "gen_ppl" in out


@pytest.mark.parametrize("argv, message", [
    (["sweep", "--checkpoint", "nope"], "no checkpoint 'nope'"),
    (["sweep", "--checkpoint", "pat", "--steps", "1,x"], "--steps: 'x' is not a valid value"),
    (["sweep", "--checkpoint", "pat", "--strategy", "confidence,nope"], "unknown strategy 'nope'"),
    (["sweep", "--checkpoint", "pat", "--n", "0"], "argument -n/--n: expected an integer in [1, 1000000], got '0'"),
    (["sweep", "--checkpoint", "txt", "--judge", "pat"], "the judge must be an AR checkpoint"),
    (["sweep", "--checkpoint", "txt", "--ar"], "there is no judge"),
    (["sweep", "--checkpoint", "pat", "--metric", "gen_ppx"], "--metric gen_ppx: unknown"),
    (["sweep", "--checkpoint", "pat", "--metric", "gen_ppl"], "--metric gen_ppl: not measured on a patterns"),
    (["sweep", "--checkpoint", "txt", "--metric", "gen_ppl"], "needs an AR judge"),
    (["evaluate", "--checkpoint", "txt"], "pass --data FILE"),
    (["evaluate", "--checkpoint", "txt", "--data", "OTHER"], "is not the file this checkpoint was trained on"),
    # a --data given is read for the reference row: a file it cannot use is an error, not a note
    (["sweep", "--checkpoint", "txt", "--steps", "1", "--n", "1", "--judge", "none", "--data", "MISSING"],
     "data file not found"),
    (["sweep", "--checkpoint", "txt", "--steps", "1", "--n", "1", "--judge", "none", "--data", "OTHER"],
     "is not the file this checkpoint was trained on"),
    (["sweep", "--checkpoint", "txt", "--data", "OTHER", "--no-reference"], "which --no-reference leaves out"),
    (["sweep", "--checkpoint", "ar", "--steps", "2", "--judge", "none"], "an autoregressive model's sampler does not"),
    (["sweep", "--from-csv", "OTHER", "--steps", "1,2", "--checkpoint", "pat"],
     "samples nothing: --steps, --checkpoint would be ignored; leave them out"),
    (["sample", "--checkpoint", "pat", "--no-cache"], "--no-cache: an AR model's KV cache"),
])
def test_cli_error_paths(ckpt_dir, capsys, argv, message):
    argv = [str(ckpt_dir / "other.txt") if a == "OTHER" else str(ckpt_dir / "gone.txt") if a == "MISSING" else a
            for a in argv]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


@pytest.mark.parametrize("argv, message", [
    (["--checkpoint", "pat", "--out", "{d}/pat.safetensors"], "that is the --checkpoint file this sweep reads"),
    (["--checkpoint", "{d}/pat.safetensors", "--out", "{d}/../{n}/pat.safetensors"], "the --checkpoint file"),
    (["--checkpoint", "txt", "--judge", "ar", "--out", "{d}/ar.safetensors"], "that is the --judge file"),
    (["--checkpoint", "txt", "--data", "{d}/tiny.txt", "--out", "{d}/tiny.txt"], "that is the --data file"),
    (["--checkpoint", "txt", "--data", "{d}/corpus.csv", "--out", "{d}/corpus.csv"], "that is the --data file"),
    (["--checkpoint", "txt", "--data", "{d}/corpus.html", "--plot", "{d}/corpus.html"], "that is the --data file"),
    (["--checkpoint", "pat", "--out", "{d}/other.txt"], "an existing file that is not .csv; not overwriting it"),
    (["--from-csv", "{d}/saved.csv", "--out", "{d}/saved.csv"], "that is the --from-csv file this sweep reads"),
])
def test_cli_sweep_writes_over_no_file_it_reads_nor_another_kind_of_file(ckpt_dir, capsys, argv, message):
    """--out / --plot naming the checkpoint, the data, the saved table, or an existing file that is not a
    table (a figure): one error line, exit 2, before anything is sampled; every file is as it was."""
    (ckpt_dir / "corpus.csv").write_text("a,b\n1,2\n")
    (ckpt_dir / "corpus.html").write_text("<p>notes</p>")
    (ckpt_dir / "saved.csv").write_text(SAVED)
    before = {p: p.read_bytes() for p in ckpt_dir.iterdir()}
    argv = [a.format(d=ckpt_dir, n=ckpt_dir.name) for a in argv]
    run = [] if "--from-csv" in argv else ["--steps", "1", "--n", "1"]  # (a saved sweep samples nothing)
    assert cli_main(["sweep", *run, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert {p: p.read_bytes() for p in ckpt_dir.iterdir()} == before


def test_cli_sweep_replaces_an_earlier_sweeps_table_and_figure(ckpt_dir, capsys):
    """Writing over the .csv and .html of an earlier sweep stays allowed, as any command's output."""
    (ckpt_dir / "saved.csv").write_text(SAVED)
    for name in ("again.csv", "again.summary.csv", "again.html"):
        (ckpt_dir / name).write_text("an earlier sweep's")
    assert cli_main(["sweep", "--from-csv", str(ckpt_dir / "saved.csv"), "--out", str(ckpt_dir / "again.csv"),
                     "--plot", str(ckpt_dir / "again.html"), "--plot-resources", "cdn"]) == 0
    assert len(pd.read_csv(ckpt_dir / "again.csv")) == 4 and "bokeh" in (ckpt_dir / "again.html").read_text()


# a saved sweep's per-sample table (some of the columns --out writes), for --from-csv
SAVED = """sampler,steps,strategy,seed,sample,nfe,tokens_per_s,text,pattern_quality
diffusion,1,confidence,0,0,1,100.5,ABAB,0.5
diffusion,1,confidence,0,1,1,100.5,ABBA,0.25
diffusion,2,confidence,0,0,2,50.0,AAAA,1.0
diffusion,2,confidence,0,1,2,50.0,ABAB,0.5
"""


@pytest.mark.parametrize("column, value, message", [
    ("nfe", "x", "column 'nfe', row 3 after the header: 'x' is not a number"),
    ("tokens_per_s", "fast", "column 'tokens_per_s', row 3 after the header: 'fast' is not a number"),
    ("pattern_quality", "x", "column 'pattern_quality', row 3 after the header: 'x' is not a number"),
    ("steps", "x", "column 'steps', row 3 after the header: 'x' is not a number"),
    ("seed", "x", "column 'seed', row 3 after the header: 'x' is not a number"),
    ("steps", "1.5", "column 'steps', row 3 after the header: '1.5' is not a whole number"),
])
def test_cli_sweep_from_csv_names_a_hand_edited_cell_that_is_not_a_number(ckpt_dir, capsys, column, value, message):
    table = pd.read_csv(io.StringIO(SAVED)).astype(str)
    table.loc[2, column] = value
    table.to_csv(ckpt_dir / "edited.csv", index=False)
    assert cli_main(["sweep", "--from-csv", str(ckpt_dir / "edited.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --from-csv {ckpt_dir / 'edited.csv'}: {message}"]


def test_cli_sweep_from_csv_says_why_pandas_cannot_read_it_in_one_line(ckpt_dir, capsys):
    """pandas ends its tokenizer's message in a newline, which the error line showed as a literal \\n."""
    (ckpt_dir / "torn.csv").write_text("sampler,steps,text\ndiffusion,1,a\ndiffusion,1,a,b,c\n")
    assert cli_main(["sweep", "--from-csv", str(ckpt_dir / "torn.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("Expected 3 fields in line 3, saw 5")


@pytest.mark.parametrize("command", ["sweep", "evaluate"])
def test_a_judge_named_for_a_patterns_checkpoint_is_refused_not_ignored(ckpt_dir, capsys, command):
    """Pattern quality scores a patterns checkpoint: a --judge (even a missing one) was silently ignored."""
    extra = ["--steps", "2", "-n", "2"] if command == "sweep" else ["--steps", "2"]
    for judge in ("nonexist", "ar"):
        assert cli_main([command, "--checkpoint", "pat", "--judge", judge, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0] == (f"error: --judge {judge}: a patterns checkpoint is scored by pattern "
                                            "quality, not by a judge; leave --judge out"), err


def test_a_uniform_state_sweep_drops_the_default_strategies_and_refuses_given_ones(ckpt_dir, capsys):
    """A uniform-state model reads no strategy: the default confidence,random axis swept it twice, in identical
    rows at twice the model calls; given on the command line it is refused, as `sample` refuses it."""
    from tests.support.dashboard import save_twins

    save_twins(ckpt_dir)
    out = ckpt_dir / "u.csv"
    assert cli_main(["sweep", "--checkpoint", "tiny-uniform", "--steps", "1,2", "--temperature", "0.5,1",
                     "--n", "2", "--no-reference", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert len(table) == 2 * 2 * 2 and "strategy" not in pd.read_csv(ckpt_dir / "u.summary.csv")
    capsys.readouterr()
    assert cli_main(["sweep", "--checkpoint", "tiny-uniform", "--steps", "1,2", "--strategy", "margin,random",
                     "--n", "2", "--no-reference"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("error: --strategy margin,random: a uniform-state model's sampler does not read it; "
                           "leave it out")
    # a masked model keeps its default strategies
    assert cli_main(["sweep", "--checkpoint", "tiny", "--steps", "1", "--n", "1", "--no-reference",
                     "--out", str(ckpt_dir / "m.csv")]) == 0
    assert set(pd.read_csv(ckpt_dir / "m.csv")["strategy"]) == {"confidence", "random"}


def test_an_ar_sweep_drops_the_axes_its_sampler_does_not_read(ckpt_dir):
    """An AR model writes left to right, a token a call: its default steps x strategy axes gave 12 identical
    rows (the same text at every step count); they are dropped, as a uniform-state model's strategies."""
    out = ckpt_dir / "ar.csv"
    assert cli_main(["sweep", "--checkpoint", "ar", "--n", "2", "--judge", "none", "--no-reference",
                     "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert len(table) == 2 and set(table["sampler"]) == {"ar"}


def test_a_plot_without_a_judge_draws_a_metric_the_sweep_measured(ckpt_dir, capsys):
    """--plot on text without --metric drew gen-PPL, which a sweep without a judge does not measure: the
    run ended in an error after all its sampling. It draws one the sweep has."""
    plot = ckpt_dir / "nojudge.html"
    assert cli_main(["sweep", "--checkpoint", "txt", "--steps", "1,2", "--n", "2", "--judge", "none",
                     "--no-reference", "--plot", str(plot), "--plot-resources", "cdn"]) == 0
    assert plot.is_file() and "error" not in capsys.readouterr().err


def test_a_saved_sweep_without_samples_is_one_error(ckpt_dir, capsys):
    header = ckpt_dir / "header.csv"
    header.write_text("sampler,steps,text,seed\n")
    assert cli_main(["sweep", "--from-csv", str(header)]) == 2
    assert capsys.readouterr().err.strip() == f"error: --from-csv {header}: the table has no samples (a header alone)"
