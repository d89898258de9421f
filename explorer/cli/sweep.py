"""`python run.py sweep`: quality and speed vs steps / strategy / any sampler knob, as CSV and a plot.

    python run.py sweep --checkpoint patterns --steps 1,2,4,8,16,32 --strategy confidence,random \\
        --n 30 --out results.csv --plot results.html

Writes the tidy table (one row per sample) to --out and the per-cell summary beside it
(<out>.summary.csv); prints the summary and its sweet spot. Ctrl-C stops after the current
batch and still writes what is done (a second Ctrl-C aborts at once). --scheduler ADDRESS (an existing
Dask scheduler) or --workers N (a local cluster of N processes) run the sampler calls as Dask tasks
(explorer/cluster.py); the table is the same.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from ..names import DEVICES
from . import CLIError, check_writable, float_in, int_in
from .models import CHECKPOINT_HELP, add_model_arguments, check_overrides_apply, hf_options

FLOAT = float_in()  # finite, normal numbers; each knob's range is SamplerConfig's
DEFAULT_JUDGE = "shakespeare-ar"
PLOT_SUFFIXES = (".html", ".png")
MAX_BATCH = 4096  # samples per sampler call
MAX_SAMPLES = 10**6  # samples per cell
PATTERN_METRICS = ("pattern_quality", "pattern_quality_p2", "distinct_symbols", "collapsed")  # patterns only


def swept_knobs() -> list:
    """The knobs `sweep` takes a list of (knobs.Knob.sweep), in the schema's order."""
    from ..sampling import knobs

    return [knob for knob in knobs.KNOBS.values() if knob.sweep]


def item_parser(knob):
    """The parser of one list item of `knob`: its type; 'none' too where None is its off (threshold:
    schedule decoding)."""
    kind = FLOAT if knob.type is float else knob.type
    if knob.none:
        return lambda item: None if item.lower() == "none" else kind(item)
    return kind


def parse_list(text: str, kind, flag: str) -> list:
    """'1,2,4' -> [1, 2, 4], each item read by `kind` (item_parser: threshold's reads 'none' too)."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        try:
            out.append(kind(item))
        except (ValueError, argparse.ArgumentTypeError):
            raise CLIError(f"{flag}: {item!r} is not a valid value in {text!r}") from None
    if not out or "" in out:
        raise CLIError(f"{flag}: give a comma-separated list, got {text!r}")
    return out


def add_common_arguments(p: argparse.ArgumentParser, checkpoint_required: bool = True) -> None:
    """Options shared with `evaluate`: what to load and how to score text. The sweep checks --checkpoint
    itself: --from-csv needs none."""
    p.add_argument("--checkpoint", required=checkpoint_required,
                   help=CHECKPOINT_HELP + ("" if checkpoint_required else " (required unless --from-csv)"))
    p.add_argument("--judge", default=None,
                   help=f"AR checkpoint, or a Hugging Face causal LM (hf:ORG/NAME or a directory), scoring gen-PPL "
                        f"of text samples (default {DEFAULT_JUDGE} for the shipped character models when it "
                        "exists; 'none' to skip)")
    p.add_argument("--data", default=None, help="the training text file, to rebuild the held-out reference")
    p.add_argument("-n", "--n", type=int_in(1, MAX_SAMPLES), default=30,  # -n as `sample` spells it
                   help="samples per cell (default 30)")
    # samples draw seeds seed, seed + 1, ...: kept far from int64's end, where the table's column would overflow
    p.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0)
    p.add_argument("--length", type=int_in(1), default=None, help="sample length (default: the checkpoint's recommended length, else the model's context; a Hugging Face model's at most 256)")
    p.add_argument("--batch-size", type=int_in(1, MAX_BATCH), default=None,
                   help="samples per sampler call (default min(n, 64))")
    p.add_argument("--device", default="auto", choices=DEVICES)
    p.add_argument("--threads", type=int_in(0, 1024), default=0,
                   help="torch CPU threads (default 0: torch's choice); 1 gives steadier timings on a busy machine")
    add_model_arguments(p)


def add_arguments(p: argparse.ArgumentParser):
    add_common_arguments(p, checkpoint_required=False)
    for knob in swept_knobs():
        note = f"; none = {knob.off_means}" if knob.none else knob.off_note(ui=False)
        default = f" (default {knob.sweep_default})" if knob.sweep_default else ""
        # None when not given (vary_from_args applies the default list): a default axis the model's
        # sampler does not read is dropped, a given one refused (read_axes)
        p.add_argument(knob.flag, default=None, metavar="LIST",
                       help=f"{knob.help}{note}. Comma-separated values to sweep{default}")
    p.add_argument("--ar", nargs="?", const=True, default=None, metavar="CHECKPOINT",
                   help="add the AR baseline row: the judge, or the AR checkpoint named here")
    p.add_argument("--no-reference", action="store_true", help="skip the held-out reference row")
    p.add_argument("--out", default=None, help="CSV of every sample (summary goes to <out>.summary.csv)")
    p.add_argument("--plot", default=None, help="figure file: .html (standalone) or .png (needs a browser)")
    p.add_argument("--metric", default=None, metavar="LIST",
                   help="metric(s) to plot, e.g. gen_ppl,entropy,tokens_per_s (default pattern_quality or "
                        "gen_ppl); several give one file each, named <plot stem>.<metric>.<x><suffix>")
    p.add_argument("--x", default="steps", metavar="LIST", help="x axis: steps, nfe, or steps,nfe (default steps)")
    p.add_argument("--plot-resources", default="inline", choices=("inline", "cdn"),
                   help="inline: the HTML opens offline (~3 MB); cdn: small, needs the network")
    p.add_argument("--from-csv", default=None, metavar="TABLE",
                   help="summarise and plot a saved sweep (the per-sample CSV an earlier --out wrote) without "
                        "sampling again: other --metric / --x figures of the same samples")
    p.add_argument("--no-pack", action="store_true",
                   help="run the batches one after another, each timed alone, instead of packing every cell's model "
                        "calls into shared ones (the same samples, slower): a cell's tokens/s is then its own speed, "
                        "not its share of the packed sweep's time")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run the sampler calls as tasks on the Dask cluster of this scheduler "
                            "(e.g. tcp://gpu-node:8786); workers load the checkpoint by path or name")
    where.add_argument("--workers", type=int_in(1, 1024), default=None, metavar="N",
                       help="run them on a Dask cluster of N worker processes on the local machine")
    p.add_argument("--scheduler-timeout", type=float_in(0, 86400, "(]"), default=10.0, metavar="SECONDS",
                   help="how long to try reaching --scheduler (and to wait for a worker); default 10")


def vary_from_args(args) -> dict:
    """{knob: [values]} of every list flag given (or with a default list)."""
    vary = {}
    for knob in swept_knobs():
        text = getattr(args, knob.name)
        text = knob.sweep_default if text is None else text
        if text is not None:
            vary[knob.name] = parse_list(text, item_parser(knob), knob.flag)
    return vary


def read_axes(vary: dict, model, args) -> dict:
    """`vary` less the knobs the model's sampler does not read (experiments.read_axes: a uniform-state model
    reads no strategy or schedule, an AR model no step count either): a default list of one is dropped, since its cells would repeat one run;
    one given on the command line is refused, in sample's words (check_read), rather than swept as if it
    made a difference."""
    from ..experiments import read_axes as axes_read
    from .sample import check_read

    kept = axes_read(vary, model)
    check_read(model, {n: getattr(args, n) for n in vary if n not in kept and getattr(args, n, None) is not None})
    return kept


def load_models(args):
    """(model, judge or None, device). Judge errors are the user's: a name that is not there, or not AR."""
    import torch

    from ..checkpoint import CheckpointError, list_checkpoints, load_checkpoint
    from ..devices import resolve_device
    from ..experiments import sample_kind

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        device = resolve_device(args.device)
        model = load_checkpoint(args.checkpoint, device, hf=hf_options(args))
        check_overrides_apply(args, model)
        judge_name = args.judge
        if judge_name is None and sample_kind(model) == "text" and DEFAULT_JUDGE in list_checkpoints():
            judge_name = DEFAULT_JUDGE
        if sample_kind(model) == "patterns" and args.judge is not None and args.judge.lower() != "none":
            # a judge named for it would be ignored: pattern quality scores it
            raise CLIError(f"--judge {judge_name}: a patterns checkpoint is scored by pattern quality, not by a "
                           f"judge; leave --judge out")
        if judge_name is None or judge_name.lower() == "none" or sample_kind(model) == "patterns":
            return model, None, device
        judge = load_checkpoint(judge_name, device, hf=hf_options(args, for_judge=True))
    except (CheckpointError, ValueError) as e:
        raise CLIError(str(e)) from e
    if judge.config.kind != "ar":
        raise CLIError(f"--judge {judge_name} is a {judge.config.kind} model; the judge must be an AR checkpoint")
    return model, judge, device


def load_ar(spec, judge, device):
    """--ar alone: the judge is the AR baseline; --ar NAME: that AR checkpoint."""
    from ..checkpoint import CheckpointError, load_checkpoint

    if spec is None:
        return None
    if spec is True:
        if judge is None:
            raise CLIError("--ar without a name uses the judge as AR baseline, but there is no judge; "
                           "pass --ar CHECKPOINT")
        return judge
    try:
        ar = load_checkpoint(spec, device)
    except CheckpointError as e:
        raise CLIError(str(e)) from e
    if ar.config.kind != "ar":
        raise CLIError(f"--ar {spec} is a {ar.config.kind} model, not an AR checkpoint")
    return ar


def load_reference(model, args, length: int, required: bool):
    """Held-out samples for the reference row, or None with a note when the text cannot be found."""
    from ..data.corpus import CorpusError
    from ..experiments import held_out, reference_samples

    try:
        corpus = held_out(model, args.data)
        return corpus, reference_samples(model, corpus, length, args.n, args.seed)
    except (CorpusError, ValueError) as e:
        if required:
            raise CLIError(str(e)) from e
        print(f"note: no reference row ({e})", file=sys.stderr)
        return None, None


def format_summary(summary, knobs) -> str:
    """The summary as text: one line per cell, each metric as mean ± sem."""
    import pandas as pd

    from ..experiments import METRIC_DIRECTION

    cols = {"sampler": summary["sampler"]}
    for k in knobs:
        cols[k] = summary[k].astype(object).where(summary[k].notna(), "-")
    cols["n"] = summary["n"]
    for name in ("nfe", "tokens_per_s", *(m for m in METRIC_DIRECTION if m != "gen_nll")):  # = log gen_ppl
        if f"{name}_mean" in summary:
            m, e = summary[f"{name}_mean"], summary[f"{name}_sem"]
            digits = 0 if name in ("nfe", "tokens_per_s") else 3
            cols[name] = ["-" if pd.isna(m_) else f"{m_:.{digits}f}" + ("" if pd.isna(e_) else f" ± {e_:.{digits}f}")
                          for m_, e_ in zip(m, e)]
    if "gen_ppl_pooled" in summary:
        cols["gen_ppl_pooled"] = [f"{v:.3f}" if pd.notna(v) else "-" for v in summary["gen_ppl_pooled"]]
    if "symbols_used" in summary:  # patterns: different symbols across the cell's samples
        cols["symbols_used"] = summary["symbols_used"]
    return pd.DataFrame(cols).to_string(index=False)


class _CtrlCCancels:
    """First Ctrl-C sets the cancel event (the sweep stops between batches); a second one aborts."""

    def __init__(self, event: threading.Event):
        self.event, self.previous = event, None

    def _handler(self, signum, frame):
        if self.event.is_set():
            raise KeyboardInterrupt
        self.event.set()
        print("\nstopping after this batch (Ctrl-C again to abort)", file=sys.stderr)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def run_sweep(model, judge, ar, vary, args, reference, client=None):
    """The sweep with a tqdm bar (on the Dask cluster of `client` when given); returns (table, summary,
    cancelled)."""
    from tqdm import tqdm

    from ..cluster import sweep
    from ..experiments import SweepCancelled, aggregate, cells_from_vary
    from ..sampling.config import config_for

    bar = tqdm(unit="sample", dynamic_ncols=True, file=sys.stderr)

    def progress(done, total):
        bar.total = total
        bar.update(done - bar.n)

    cancel = threading.Event()
    try:
        with _CtrlCCancels(cancel):
            table, summary = sweep(model, config_for(model), cells_from_vary(vary), args.n, args.seed, length=args.length,
                                   judge=judge, batch_size=args.batch_size, progress=progress, cancel=cancel,
                                   include_ar=ar, reference=reference, client=client, pack=not args.no_pack)
        return table, summary, False
    except SweepCancelled as e:
        return e.table, (aggregate(e.table, e.table.attrs.get("knobs")) if len(e.table) else None), True
    except ValueError as e:
        raise CLIError(str(e)) from e
    finally:
        bar.close()


def plot_paths(args, summary) -> list[tuple[str, str, Path]]:
    """(metric, x, file) for every requested figure; one figure keeps the --plot name as given."""
    from ..experiments import pick_metric

    # the default: pattern quality, else gen-PPL, else what the sweep measured (no judge: no gen-PPL)
    default = next((m for m in ("pattern_quality", "gen_ppl") if f"{m}_mean" in summary), None) \
        or pick_metric(summary) or "tokens_per_s"
    metrics_ = parse_list(args.metric or default, str, "--metric")
    xs = parse_list(args.x, str, "--x")
    for m in metrics_:
        if f"{m}_mean" not in summary:
            have = ", ".join(c[:-5] for c in summary.columns if c.endswith("_mean"))
            raise CLIError(f"--metric {m}: not in this sweep; have {have}")
    path = Path(args.plot)
    if len(metrics_) * len(xs) == 1:
        return [(metrics_[0], xs[0], path)]
    return [(m, x, path.with_name(f"{path.stem}.{m}.{x}{path.suffix}")) for m in metrics_ for x in xs]


def check_plot_args(args, kind: str | None = None, judge=None) -> None:
    """Fail on a --metric / --x the sweep cannot produce before it runs, not after: misspelt names
    first, then (once the model is loaded) metrics of the other corpus kind or gen-PPL without judge."""
    from ..experiments import METRIC_DIRECTION

    known = {*METRIC_DIRECTION, "tokens_per_s", "seconds"}
    for m in parse_list(args.metric, str, "--metric") if args.metric else []:
        if m not in known:
            raise CLIError(f"--metric {m}: unknown; valid: {', '.join(sorted(known))}")
        if kind is not None and (m in PATTERN_METRICS) != (kind == "patterns") and m in METRIC_DIRECTION:
            raise CLIError(f"--metric {m}: not measured on a {kind} checkpoint")
        if kind is not None and m in ("gen_ppl", "gen_nll", "ref_distance") and judge is None:
            raise CLIError(f"--metric {m} needs an AR judge (--judge CHECKPOINT)")
        if m == "ref_distance" and args.no_reference:
            raise CLIError("--metric ref_distance is measured against the reference row; drop --no-reference")
    for x in parse_list(args.x, str, "--x"):
        if x not in ("steps", "nfe"):
            raise CLIError(f"--x {x}: use steps or nfe")


def check_outputs(args) -> None:
    """Before any sampling: every file the sweep will write can be written, and --plot names a kind of
    figure there is (a run must not end unable to save what it measured); none of them is a file the
    run reads, or an existing file of another kind (a mistyped --out must not replace a checkpoint)."""
    inputs = input_files(args)
    if args.out:
        out = check_writable(args.out, "--out")
        summary = check_writable(out.with_suffix(".summary.csv"), "--out (its .summary.csv)")
        check_replaceable(out, "--out", (".csv",), inputs)
        check_replaceable(summary, "--out (its .summary.csv)", (".csv",), inputs)
    if args.plot:
        if Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
            raise CLIError(f"--plot {args.plot}: name a .html or .png file (the suffix picks the format)")
        check_replaceable(check_writable(args.plot, "--plot"), "--plot", PLOT_SUFFIXES, inputs)


def input_files(args) -> dict[str, Path]:
    """{flag: file} of every existing file the run reads: the checkpoints (a name resolved in
    checkpoints/), --data and --from-csv. A name that resolves to no file is left to the loading
    to report."""
    named = {"--checkpoint": args.checkpoint, "--judge": args.judge,
             "--ar": args.ar if isinstance(args.ar, str) else None}  # (a bare --ar is the judge)
    files = {"--data": args.data, "--from-csv": args.from_csv}
    if any(named.values()):  # (torch is imported only for a run that loads a model anyway)
        from ..checkpoint import CheckpointError, resolve_checkpoint

        for flag, name in named.items():
            try:
                files[flag] = resolve_checkpoint(name) if name else None
            except CheckpointError:  # hf:ORG/NAME, 'none', or a typo that loading the model reports
                pass
    files = {flag: Path(f).expanduser() for flag, f in files.items() if f}
    return {flag: f for flag, f in files.items() if f.is_file()}


def check_replaceable(path: Path, flag: str, suffixes: tuple[str, ...], inputs: dict[str, Path]) -> None:
    """Refuse to write over a file the run reads (by any name: a link, a relative path), or over an existing
    file whose suffix is not one of `suffixes`. Replacing an earlier sweep's table or figure stays allowed."""
    if not path.is_file():
        return
    for source, file in inputs.items():
        if os.path.samefile(path, file):
            raise CLIError(f"{flag} {path}: that is the {source} file this sweep reads; write to another file")
    if path.suffix.lower() not in suffixes:
        raise CLIError(f"{flag} {path}: an existing file that is not {' or '.join(suffixes)}; "
                       "not overwriting it (remove it first, or name another file)")


def write_outputs(table, summary, args) -> None:
    from ..plots import quality_speed_plot, save_plot, speed_plot

    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(out, index=False)
        summary.to_csv(out.with_suffix(".summary.csv"), index=False)
        print(f"wrote {out} ({len(table)} rows) and {out.with_suffix('.summary.csv')}", file=sys.stderr)
    if not args.plot:
        return
    for metric, x, path in plot_paths(args, summary):
        try:
            fig = speed_plot(summary, x=x) if metric == "tokens_per_s" else quality_speed_plot(summary, metric, x=x)
            save_plot(fig, path, args.plot_resources)
        except (RuntimeError, ValueError) as e:
            raise CLIError(str(e)) from e
        print(f"wrote {path}", file=sys.stderr)


def print_sweet_spot(summary, args) -> None:
    """The sweet-spot rule of "Sampling Strategies & Speed Tradeoffs", ranked by the collapse-proof reading of
    the first plotted metric (default: of the main one): experiments.ranking_metric, so a collapsed sampler is
    never the one printed."""
    from ..experiments import METRIC_DIRECTION, ranking_metric, sweet_spot

    wanted = [m for m in parse_list(args.metric, str, "--metric") if METRIC_DIRECTION.get(m)] if args.metric else []
    metric = ranking_metric(summary, wanted[0] if wanted else None)
    try:
        spot = sweet_spot(summary, metric)
    except ValueError as e:
        print(f"(no sweet spot: {e})")
        return
    print(f"\nsweet spot by {metric} (fewest steps reaching 90% of the best mean):")
    print(spot.to_string(index=False))


def read_numbers(table, path: Path) -> None:
    """The numeric columns of a read-back table (number knobs, counts, speeds, metrics) made numbers in place,
    the whole-number knobs Int64 (read back as floats where a baseline row has none). A hand-edited cell
    that is not a number (or not a whole one) is a CLIError naming its column, row and value, not a
    traceback in the summary. Empty cells stay empty (NA)."""
    import numpy as np
    import pandas as pd

    from ..experiments import INT_COLUMNS, METRIC_DIRECTION, SPEED_COLUMNS
    from ..sampling import knobs

    whole = {name for name, knob in knobs.KNOBS.items() if knob.type is int}
    numeric = whole | {name for name, knob in knobs.KNOBS.items() if knob.type is float}
    numeric |= {*INT_COLUMNS, *SPEED_COLUMNS, *METRIC_DIRECTION}
    for name in [c for c in table.columns if c in numeric]:
        values = pd.to_numeric(table[name], errors="coerce")
        number = values.astype(float)
        bad = table[name].notna() & number.isna()
        if name in whole:  # (Int64 takes no fraction, infinity or number past its 2**63)
            bad |= number.notna() & ~(np.isfinite(number) & (number == number.round()) & (number.abs() < 2**63))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            what = "a number" if pd.isna(number.iloc[row]) else "a whole number"
            raise CLIError(f"--from-csv {path}: column {name!r}, row {row + 1} after the header: "
                           f"{str(table[name].iloc[row])!r} is not {what}")
        table[name] = values.astype("Int64") if name in whole else values


def check_nothing_to_sample(args) -> None:
    """--from-csv samples nothing: a flag that only a run reads (what to load, a knob's list, where to run)
    would be ignored, and the figure taken for the sweep it asked for."""
    given = [knob.flag for knob in swept_knobs() if getattr(args, knob.name) is not None]
    given += [flag for flag, value in (("--checkpoint", args.checkpoint), ("--judge", args.judge),
                                       ("--data", args.data), ("--ar", args.ar), ("--length", args.length),
                                       ("--batch-size", args.batch_size), ("--scheduler", args.scheduler),
                                       ("--workers", args.workers), ("--no-reference", args.no_reference or None),
                                       ("--no-pack", args.no_pack or None)) if value is not None]
    if given:
        raise CLIError(f"--from-csv draws a saved sweep again and samples nothing: {', '.join(given)} would be "
                       f"ignored; leave {'it' if len(given) == 1 else 'them'} out")


def report_saved(args) -> int:
    """--from-csv: the summary, the sweet spot and the figures of a saved per-sample table; nothing sampled."""
    import pandas as pd

    from ..experiments import aggregate

    path = Path(args.from_csv)
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as e:  # a missing file, or one pandas cannot parse
        raise CLIError(f"--from-csv {path}: {str(e).strip()}") from e  # (pandas ends some messages in a newline)
    if not {"sampler", "steps", "text"} <= set(table.columns):
        raise CLIError(f"--from-csv {path}: not a sweep's per-sample table (the CSV that --out writes)")
    if not len(table):
        raise CLIError(f"--from-csv {path}: the table has no samples (a header alone)")
    check_outputs(args)
    read_numbers(table, path)
    check_plot_args(args)
    summary = aggregate(table)  # its knobs inferred from the table's columns
    if args.plot:  # a metric the saved sweep lacks: said before the table, not under it
        plot_paths(args, summary)
    print(format_summary(summary, summary.attrs["knobs"]))
    if table["steps"].nunique() > 1:
        print_sweet_spot(summary, args)
    write_outputs(table, summary, args)
    return 0


def main(args) -> int:
    from ..experiments import cells_from_vary, sweep_cells
    from ..sampling.config import SamplerConfig

    if args.from_csv:
        check_nothing_to_sample(args)
        return report_saved(args)
    if not args.checkpoint:
        raise CLIError("--checkpoint is required (or --from-csv TABLE, to plot a saved sweep)")
    if args.data and args.no_reference:
        raise CLIError("--data is read for the reference row alone, which --no-reference leaves out: drop one")
    vary = vary_from_args(args)
    check_outputs(args)
    try:  # bad knob values fail here, before any model is loaded
        sweep_cells(SamplerConfig(), cells_from_vary(vary))
    except ValueError as e:
        raise CLIError(str(e)) from e
    check_plot_args(args)
    if args.scheduler is None and args.workers is None:
        return sweep_and_report(args, vary, None)
    from ..cluster import ClusterError, open_client

    try:  # the cluster first: a wrong address fails in seconds, before any model is loaded
        with open_client(args.scheduler, args.workers, threads=args.threads,
                         timeout=args.scheduler_timeout) as client:
            n = len(client.nthreads())
            print(f"sweeping on the Dask cluster at {client.scheduler.address} ({n} workers)", file=sys.stderr)
            return sweep_and_report(args, vary, client)
    except ClusterError as e:
        raise CLIError(str(e)) from e


def sweep_and_report(args, vary, client) -> int:
    """Load, sweep (in-process, or on `client`'s cluster), print and write; the exit status."""
    from ..devices import model_device
    from ..experiments import canvas_length, sample_kind

    model, judge, _ = load_models(args)
    vary = read_axes(vary, model, args)
    check_plot_args(args, sample_kind(model), judge)
    ar = load_ar(args.ar, judge, model_device(model))
    try:
        length = canvas_length(model, args.length, None)
    except ValueError as e:
        raise CLIError(str(e)) from e
    # a --data given is read for the reference row alone: a file it cannot use is an error, not a note
    reference = None if args.no_reference else load_reference(model, args, length, required=args.data is not None)[1]
    table, summary, cancelled = run_sweep(model, judge, ar, vary, args, reference, client)
    if summary is None:
        print("cancelled before the first batch finished: nothing to write", file=sys.stderr)
        return 130
    knobs = summary.attrs.get("knobs") or list(vary)
    print(format_summary(summary, knobs))
    if "steps" in vary and len(vary["steps"]) > 1 and not cancelled:
        print_sweet_spot(summary, args)
    write_outputs(table, summary, args)
    return 130 if cancelled else 0
