"""What a checkpoint's metadata says, as tables and numbers: its sections, stored curves and LR schedule.

Pure functions of the metadata dict (explorer/checkpoint.py `read_metadata`) and of a TrainConfig, with
no Panel or Bokeh: the Model tab's state and view both read them, and tests check them without a page.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ....hf import is_hf_meta
from ....train import TrainConfig, lr_at

EMA_ALPHA = 0.05  # smoothing of the per-step train loss (one batch each: noisy)
KIND_NAMES = {"diffusion": "masked diffusion (bidirectional)", "ar": "autoregressive baseline (causal)",
              "uniform": "uniform-state diffusion (bidirectional)"}  # "uniform": a diffusion model's process


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
    steps = np.unique(np.linspace(0, cfg.max_steps - 1, min(n_points, cfg.max_steps)).round().astype(int))
    return pd.DataFrame({"step": steps + 1, "lr": [lr_at(int(s), cfg) for s in steps]})


def stored_config(meta: dict):
    """The checkpoint's TrainConfig, or None when it stores none (or another version's)."""
    stored = meta.get("train_config") or {}
    try:
        return TrainConfig.from_dict(stored) if "lr_schedule" in stored else None
    except (TypeError, ValueError):
        return None


def stored_curves(meta: dict) -> tuple[dict, dict]:
    """Columns of the stored train curve (step, loss, smooth) and val curve (step, loss), as numpy."""
    table = curves_frame(meta)
    tr, va = table[table.split == "train"], table[table.split == "val"]
    return ({"step": tr.step.to_numpy(), "loss": tr.loss.to_numpy(), "smooth": ema(tr.loss.to_numpy())},
            {"step": va.step.to_numpy(), "loss": va.loss.to_numpy()})


def schedule_columns(cfg, trained_steps: int | None = None, meta: dict | None = None) -> tuple[dict, dict]:
    """Columns (step, lr) of a TrainConfig's planned schedule and of the LR used up to `trained_steps`
    (None: none yet); both empty for no config. The used LR is the checkpoint's stored `lr` curve where
    it has one (every step's real LR), else the plan re-warmed at each resume (training_state's
    resumed_at, as train.lr_at does): exact while the settings stayed the same across resumes."""
    empty = {"step": np.array([]), "lr": np.array([])}
    if cfg is None:
        return empty, empty
    table = schedule_frame(cfg)
    stored = np.array((meta or {}).get("curves", {}).get("lr") or [], dtype=float).reshape(-1, 2)
    if len(stored):
        return ({"step": table.step.to_numpy(), "lr": table.lr.to_numpy()},
                {"step": stored[:, 0].astype(int), "lr": stored[:, 1]})
    used = table[table.step <= (trained_steps or 0)]
    resumes = sorted(set((meta or {}).get("training_state", {}).get("resumed_at") or []))
    lrs = [lr_at(int(s) - 1, cfg, max([r for r in resumes if r <= s - 1], default=-1)) for s in used.step]
    return ({"step": table.step.to_numpy(), "lr": table.lr.to_numpy()},
            {"step": used.step.to_numpy(), "lr": np.array(lrs, dtype=float)})


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


def _architecture(meta: dict) -> list[tuple[str, str]]:
    mc, n_params = meta.get("model_config") or {}, meta.get("n_params")
    kind = "uniform" if mc.get("kind") == "diffusion" and meta.get("process") == "uniform" else mc.get("kind")
    return [("kind", KIND_NAMES.get(kind, str(kind))),
            ("parameters", f"{int(n_params):,} ({int(n_params) / 1e6:.2f} M)" if n_params else "?"),
            ("layers × heads", f"{mc.get('n_layer')} × {mc.get('n_head')}"),
            ("width (d_model)", str(mc.get("n_embd"))), ("context", f"{mc.get('block_size')} characters"),
            ("vocabulary", f"{mc.get('vocab_size')} ids (incl. mask)"),
            ("time conditioning", str(mc.get("time_conditioning"))), ("dropout", str(mc.get("dropout")))]


def _training(meta: dict) -> list[tuple[str, str]]:
    mc, tc, ts = meta.get("model_config") or {}, meta.get("train_config") or {}, meta.get("training_state") or {}
    schedule = f"{tc.get('lr_schedule', '?')}, peak {tc.get('lr', '?')}, warmup {tc.get('warmup_steps', '?')}"
    return [("steps", f"{ts.get('step', 0):,}"), ("tokens seen", f"{int(ts.get('tokens') or 0):,}"),
            ("training time", _fmt_seconds(ts.get("seconds"))), ("LR schedule", schedule),
            ("batch", f"{tc.get('batch_size', '?')} × {tc.get('block_size', '?')}"),
            ("loss weighting", str(tc.get("weighting", "?")) if mc.get("kind") != "ar" else "next-character CE"),
            ("device, precision", f"{meta.get('device', '?')}, {meta.get('precision', '?')}"),
            ("resumed at", ", ".join(f"{s:,}" for s in ts.get("resumed_at") or []) or "–"),
            ("saved", str(meta.get("created", "?")))]


def _by_length(meta: dict) -> list[tuple[str, str]]:
    """NELBO and argmax accuracy (t = 0.3) per canvas length, where the final metrics hold them."""
    m, mc = meta.get("metrics") or {}, meta.get("model_config") or {}
    full = mc.get("block_size")
    rows = []
    for L in sorted({int(k.rsplit("_L", 1)[1]) for k in m if k.startswith("accuracy_t0.3_L")}):
        nelbo = m.get("nelbo_nats_per_char" if L == full else f"nelbo_nats_per_char_L{L}")
        acc = m.get(f"accuracy_t0.3_L{L}")
        rows.append((f"{L} characters", f"NELBO {nelbo:.3f} nats/char · accuracy at t = 0.3: {acc:.3f}"
                     if nelbo is not None else f"accuracy at t = 0.3: {acc:.3f}"))
    return rows


def _recommended(meta: dict) -> list[tuple[str, str]]:
    """The sampler settings the checkpoint recommends and how they measured: against held-out text
    (tools/choose_defaults.py), or by pattern quality (tools/choose_pattern_defaults.py)."""
    metrics = meta.get("metrics") or {}
    wanted, bars = meta.get("sampler_defaults") or {}, metrics.get("text_bars") or {}
    if not wanted:
        return []
    rows = [("settings", ", ".join(f"{k} {v}" for k, v in wanted.items()))]
    if metrics.get("pattern_bars"):
        b = metrics["pattern_bars"]
        rows.append(("pattern quality", f"period-2 {b['pattern_quality_p2']:.3f} · the notebook's measure "
                                        f"{b['pattern_quality']:.3f} · {b['samples']} samples, the best of the grid"))
    for block, b in bars.items():
        rows.append((block, f"gen-PPL {b['gen_ppl']:.1f} (held-out {b['ref_gen_ppl']:.1f}) · entropy "
                            f"{b['entropy']:.2f} ({b['ref_entropy']:.2f}) · {'passes' if b['passes'] else 'fails'} "
                            f"the bars · {b['samples']} samples"))
    return rows


HF_KINDS = {"uniform": "uniform-state diffusion (blocks after a cache of what precedes them)",
            "masked": "masked diffusion (bidirectional)", "causal": "causal LM (a judge of gen-PPL)"}


def hf_sections(meta: dict, name: str) -> dict[str, list[tuple[str, str]]]:
    """A Hugging Face model's page: where it came from, what the sampler reads of it and what it recommends.
    It was trained elsewhere, so there is no corpus, training run or held-out figure to show."""
    mc, shape = meta.get("model_config") or {}, meta.get("hf_shape") or {}
    process = "causal" if mc.get("kind") == "ar" or mc.get("family") == "causal" else mc.get("process") or "masked"
    n = meta.get("parameters")
    context = mc.get("context") or mc.get("block_size")
    arch = [("kind", HF_KINDS.get(process, str(process))),
            ("family", f"{mc.get('family', '?')} (model_type {meta.get('hf_model_type') or '?'})"),
            ("parameters", f"{int(n):,} ({int(n) / 1e6:.2f} M), {meta.get('dtype', '?')} weights" if n else "?")]
    if shape:
        arch.append(("layers × heads, width", f"{shape.get('layers', '?')} × {shape.get('heads', '?')}, "
                                               f"{shape.get('width', '?')}"))
    arch += [("context", f"{context:,} tokens" if isinstance(context, int) else "?"),
             ("vocabulary", f"{mc.get('vocab_size', '?'):,} ids" if isinstance(mc.get("vocab_size"), int) else "?")]
    if process == "uniform":
        arch.append(("block (canvas_length)", f"{mc.get('canvas_length', '?')} tokens, random tokens at the start"))
    elif process == "masked":
        arch.append(("mask id", str(mc.get("mask_id", "?"))))
    source = [("source", str(meta.get("source", "?"))), ("revision", str(meta.get("revision") or "–")),
              ("result", "trained elsewhere: no held-out figure or training curves come with it")]
    sections = {name: source, "Recommended sampler": _recommended(meta), "Architecture": arch}
    return {title: rows for title, rows in sections.items() if rows}


def summary_sections(meta: dict, name: str) -> dict[str, list[tuple[str, str]]]:
    """Section title -> (label, value) rows of the page (plain strings, escaped when rendered); the
    by-length and recommended-sampler sections only where the metadata has them."""
    if is_hf_meta(meta):
        return hf_sections(meta, name)
    corpus = meta.get("corpus") or {}
    chars = (meta.get("tokenizer") or {}).get("chars")
    shown = "".join({"\n": "↵", " ": "␣"}.get(c, c) for c in chars) if isinstance(chars, str) else None
    data = [("corpus", f"{corpus.get('name', '?')} ({corpus.get('kind', '?')})"),
            *([("vocabulary", f"{len(chars)} characters: {shown}")] if shown else []),
            ("sha256", (corpus.get("sha256") or "–")[:16]), ("distinct words", f"{len(meta.get('words') or []):,}")]
    sections = {f"{name}": [("result", result_line(meta))], "Held-out figures by canvas length": _by_length(meta),
                "Recommended sampler": _recommended(meta), "Architecture": _architecture(meta), "Data": data,
                "Training": _training(meta)}
    return {title: rows for title, rows in sections.items() if rows}


def pattern_examples(meta: dict, n: int = 5) -> list[str]:
    """The example sequences of "The Forward Process" §4.1: `n` patterns as the training corpus of a patterns
    model draws them (seed 0, the model's context length); [] for other corpora."""
    import torch

    from ....data.patterns import generate_patterns

    if (meta.get("corpus") or {}).get("kind") != "patterns":
        return []
    chars = (meta.get("tokenizer") or {}).get("chars") or ""
    length = int((meta.get("model_config") or {}).get("block_size") or 24)
    n_symbols = min(len(chars), 15) if chars else 15
    ids = generate_patterns(n, length, n_symbols=n_symbols, generator=torch.Generator().manual_seed(0))
    return ["".join(chars[i] for i in row) if chars else " ".join(map(str, row)) for row in ids.tolist()]


def smallest_period(row: str) -> int:
    """The shortest p for which `row` repeats every p symbols (its length when none shorter does)."""
    return next(p for p in range(1, len(row) + 1) if all(row[i] == row[i - p] for i in range(p, len(row))))


TIME_DIM_FALLBACK = 64  # the guide's figure's width, for a model that has no embedding width stored


def time_embedding(meta: dict, n_t: int = 101) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """The guide "Let's Build a Diffusion LM" §6.2: the sinusoidal embedding of t in [0, 1]
    (explorer.model.sinusoidal_embedding, the one a time-conditioned model feeds to its blocks), at the model's
    width. Returns (t (n_t,), embedding (n_t, dim), dim, whether this model uses it)."""
    import torch

    from ....model import sinusoidal_embedding

    cfg = meta.get("model_config") or {}
    dim = int(cfg.get("n_embd") or TIME_DIM_FALLBACK)
    ts = np.linspace(0.0, 1.0, n_t)
    emb = sinusoidal_embedding(torch.tensor(ts, dtype=torch.float32), dim).numpy()
    return ts, emb, dim, cfg.get("time_conditioning") == "adaln"
