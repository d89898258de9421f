"""What the Model tab draws: a checkpoint's metadata as HTML tables, its train/val curves and LR
schedule as tables and Bokeh figures (live ones stream new points only).

Pure functions of the metadata dict (explorer/checkpoint.py `read_metadata`), so tests check the page
without a browser. Colours: Okabe-Ito (palette.py); train, val and LR also differ by dash and width.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

TRAIN_COLOR, VAL_COLOR, LR_COLOR, PLAN_COLOR = "#0072B2", "#D55E00", "#009E73", "#999999"
EMA_ALPHA = 0.05  # smoothing of the per-step train loss (one batch each: noisy)
KIND_NAMES = {"diffusion": "masked diffusion (bidirectional)", "ar": "autoregressive baseline (causal)"}


def ema(values, alpha: float = EMA_ALPHA, start: float | None = None) -> np.ndarray:
    """Exponential moving average; `start` continues a previous one (live curves get points in batches)."""
    out = np.empty(len(values))
    level = start
    for i, v in enumerate(values):
        level = v if level is None else level + alpha * (v - level)
        out[i] = level
    return out


def curves_frame(meta: dict) -> pd.DataFrame:
    """The stored curves as one long table: step, split (train | val), loss (nats/char)."""
    curves = meta.get("curves") or {}
    parts = [pd.DataFrame(curves.get(split) or [], columns=["step", "loss"], dtype=float).assign(split=split)
             for split in ("train", "val")]
    table = pd.concat(parts, ignore_index=True)[["step", "split", "loss"]]
    table["step"] = table["step"].astype(int)
    return table


def schedule_frame(cfg, n_points: int = 400) -> pd.DataFrame:
    """The learning rate at each step of a TrainConfig's schedule (explorer.train.lr_at): what a run
    with these settings will use, drawn before it starts."""
    from ...train import lr_at

    steps = np.unique(np.linspace(0, cfg.max_steps - 1, min(n_points, cfg.max_steps)).round().astype(int))
    return pd.DataFrame({"step": steps + 1, "lr": [lr_at(int(s), cfg) for s in steps]})


def _fmt_seconds(seconds) -> str:
    s = int(round(float(seconds or 0)))
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


def result_line(meta: dict) -> str:
    """The held-out figure: NELBO (diffusion), cross-entropy (AR), or the latest estimate mid-training."""
    m = meta.get("metrics") or {}
    if "nelbo_nats_per_char" in m:
        bits = m.get("nelbo_bits_per_char", m["nelbo_nats_per_char"] / np.log(2))
        return f"NELBO {m['nelbo_nats_per_char']:.3f} nats/char ({bits:.3f} bits/char) on held-out text"
    if "val_ce_nats_per_char" in m:
        return (f"cross-entropy {m['val_ce_nats_per_char']:.3f} nats/char "
                f"({m.get('val_ce_bits_per_char', 0):.3f} bits/char) on held-out text")
    val = (meta.get("curves") or {}).get("val") or []
    if val:
        return f"not finished: latest validation estimate {val[-1][1]:.3f} nats/char at step {val[-1][0]:,}"
    return "no held-out figure stored"


def summary_sections(meta: dict, name: str) -> dict[str, list[tuple[str, str]]]:
    """Section title -> (label, value) rows of the page (plain strings, escaped when rendered)."""
    mc, tc = meta.get("model_config") or {}, meta.get("train_config") or {}
    ts, corpus = meta.get("training_state") or {}, meta.get("corpus") or {}
    n_params = meta.get("n_params")
    arch = [("kind", KIND_NAMES.get(mc.get("kind"), str(mc.get("kind")))),
            ("parameters", f"{int(n_params):,} ({int(n_params) / 1e6:.2f} M)" if n_params else "?"),
            ("layers × heads", f"{mc.get('n_layer')} × {mc.get('n_head')}"), ("width (d_model)", str(mc.get("n_embd"))),
            ("context", f"{mc.get('block_size')} characters"), ("vocabulary", f"{mc.get('vocab_size')} ids (incl. mask)"),
            ("time conditioning", str(mc.get("time_conditioning"))), ("dropout", str(mc.get("dropout")))]
    data = [("corpus", f"{corpus.get('name', '?')} ({corpus.get('kind', '?')})"),
            ("sha256", (corpus.get("sha256") or "–")[:16]), ("distinct words", f"{len(meta.get('words') or []):,}")]
    train = [("steps", f"{ts.get('step', 0):,}"), ("tokens seen", f"{int(ts.get('tokens') or 0):,}"),
             ("training time", _fmt_seconds(ts.get("seconds"))),
             ("LR schedule", f"{tc.get('lr_schedule', '?')}, peak {tc.get('lr', '?')}, warmup {tc.get('warmup_steps', '?')}"),
             ("batch", f"{tc.get('batch_size', '?')} × {tc.get('block_size', '?')}"),
             ("loss weighting", str(tc.get("weighting", "?")) if mc.get("kind") != "ar" else "next-character CE"),
             ("device, precision", f"{meta.get('device', '?')}, {meta.get('precision', '?')}"),
             ("resumed at", ", ".join(f"{s:,}" for s in ts.get("resumed_at") or []) or "–"),
             ("saved", str(meta.get("created", "?")))]
    return {f"{name}": [("result", result_line(meta))], "Architecture": arch, "Data": data, "Training": train}


def _table(rows) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table class='meta-table'>{body}</table>"


def summary_html(meta: dict, name: str) -> str:
    """The metadata page: one table per section, then the commands that made the checkpoint."""
    parts = [f"<h3>{html.escape(title)}</h3>{_table(rows)}" for title, rows in summary_sections(meta, name).items()]
    commands = meta.get("commands") or []
    if commands:
        items = "".join(f"<li><code>{html.escape(c)}</code></li>" for c in commands)
        parts.append(f"<h3>Commands</h3><ol class='meta-commands'>{items}</ol>")
    return "".join(parts)


PAGE_CSS = """
.meta-table { border-collapse: collapse; width: 100%; font-size: 0.92em; }
.meta-table th { text-align: left; font-weight: 600; padding: 2px 12px 2px 0; white-space: nowrap; width: 40%;
                 vertical-align: top; color: #333; }
.meta-table td { padding: 2px 0; }
.meta-commands code { white-space: pre-wrap; word-break: break-all; font-size: 0.85em; }
h3 { font-size: 1.05em; margin: 12px 0 4px 0; }
"""


def loss_figure(title: str, height: int = 300, prefix: str = "live"):
    """(figure, train source, val source): raw train loss faint, its EMA bold, val dashed with dots.
    The sources are named <prefix>-train / <prefix>-val (what browser tests read)."""
    fig = figure(title=title, height=height, sizing_mode="stretch_width", x_axis_label="step",
                 y_axis_label="loss (nats/char)", tools="pan,box_zoom,wheel_zoom,reset,save", toolbar_location="above")
    train = ColumnDataSource({"step": [], "loss": [], "smooth": []}, name=f"{prefix}-train")
    val = ColumnDataSource({"step": [], "loss": []}, name=f"{prefix}-val")
    fig.line("step", "loss", source=train, color=TRAIN_COLOR, alpha=0.25, line_width=1)
    smooth = fig.line("step", "smooth", source=train, color=TRAIN_COLOR, line_width=2.5, legend_label="train (smoothed)")
    line = fig.line("step", "loss", source=val, color=VAL_COLOR, line_width=2, line_dash="dashed", legend_label="validation")
    fig.scatter("step", "loss", source=val, color=VAL_COLOR, size=6, marker="circle", legend_label="validation")
    fig.add_tools(HoverTool(renderers=[smooth, line], tooltips=[("step", "@step"), ("loss", "@loss{0.000}")]))
    fig.legend.location = "top_right"
    return fig, train, val


def lr_figure(title: str, height: int = 220, prefix: str = "live"):
    """(figure, planned source, actual source): the schedule's curve (grey dashed) and the LR used so far."""
    fig = figure(title=title, height=height, sizing_mode="stretch_width", x_axis_label="step",
                 y_axis_label="learning rate", tools="pan,box_zoom,reset,save", toolbar_location="above")
    plan = ColumnDataSource({"step": [], "lr": []}, name=f"{prefix}-lr-plan")
    used = ColumnDataSource({"step": [], "lr": []}, name=f"{prefix}-lr-used")
    fig.line("step", "lr", source=plan, color=PLAN_COLOR, line_width=2, line_dash="dashed", legend_label="schedule")
    used_line = fig.line("step", "lr", source=used, color=LR_COLOR, line_width=3, legend_label="used so far")
    fig.add_tools(HoverTool(renderers=[used_line], tooltips=[("step", "@step"), ("lr", "@lr{0.00e0}")]))
    fig.yaxis.formatter.use_scientific = True
    fig.legend.location = "top_right"
    return fig, plan, used


def stored_curves_data(meta: dict) -> tuple[dict, dict]:
    """Columns of the stored-curves figure's train and val sources (loss_figure)."""
    table = curves_frame(meta)
    tr, va = table[table.split == "train"], table[table.split == "val"]
    return ({"step": tr.step.to_numpy(), "loss": tr.loss.to_numpy(), "smooth": ema(tr.loss.to_numpy())},
            {"step": va.step.to_numpy(), "loss": va.loss.to_numpy()})


def stored_schedule_data(cfg, trained_steps: int) -> tuple[dict, dict]:
    """Columns of the planned schedule and of the part of it used (up to the steps trained), from a
    checkpoint's TrainConfig (None: empty)."""
    if cfg is None:
        return {"step": [], "lr": []}, {"step": [], "lr": []}
    table = schedule_frame(cfg)
    used = table[table.step <= trained_steps]
    return ({"step": table.step.to_numpy(), "lr": table.lr.to_numpy()},
            {"step": used.step.to_numpy(), "lr": used.lr.to_numpy()})
