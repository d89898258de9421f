"""Share and export: a run's trajectory as JSON / CSV, a table as CSV, a figure as standalone HTML
or PNG, and the lazy download button the tabs put them behind.

Everything here is a pure function of numpy / pandas / plot objects (no model, no session), so the
tabs, the CLI and the tests share it. Files are made only when a button is clicked, off the UI thread.
"""
from __future__ import annotations

import asyncio
import io
import json
import logging
import tempfile
from pathlib import Path

import numpy as np

from .ui.internals import quiet_file_download

log = logging.getLogger(__name__)

# Per-step arrays of a recorded Trajectory, written when present (record=False runs have none).
STEP_ARRAYS = ("tokens", "scores", "proposals", "confidence", "remasked", "committed", "step_t", "temperatures",
               "called_model", "blocks", "row_t", "row_temperatures", "row_steps", "settled", "edited")
CSV_COLUMNS = ("step", "row", "position", "token", "char", "state", "proposal", "proposal_char", "score",
               "confidence", "committed", "remasked", "settled", "edited", "committed_at", "commit_confidence")
# (a uniform-state run's committed are its accepted positions, remasked its re-noised ones, settled where a block
# stopped and took its final tokens; a masked run never settles; edited: a committed token replaced, token editing)


def _plain(a):
    """A JSON-ready copy of an array or scalar: lists of Python numbers, NaN / inf -> null."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        out = a.astype(object)
        out[~np.isfinite(a)] = None
        return out.tolist()
    return a.tolist()


def _tokenizer(traj, tokenizer):
    tok = tokenizer or traj.tokenizer
    if tok is None:
        raise ValueError("exporting a trajectory needs its tokenizer (the loaded model's)")
    return tok


def trajectory_dict(traj, tokenizer=None) -> dict:
    """Everything a run produced, as plain JSON types: knobs, seed, cost, texts, final tokens, and the
    per-step arrays (shape (S+1, B, L) for tokens, (S, B, L) for the rest) when they were recorded."""
    tok = _tokenizer(traj, tokenizer)
    out = {"format": "mdlm-explorer trajectory v1", "kind": traj.kind,
           "process": getattr(traj, "process", "masked"), "config": traj.config.to_dict(),
           "seed": int(traj.seed), "nfe": int(traj.nfe), "seconds": float(traj.seconds),
           "n_steps": int(traj.n_steps), "batch_size": int(traj.batch_size), "length": int(traj.length),
           "mask_id": int(traj.mask_id), "vocabulary": "".join(getattr(tok, "chars", [])),
           "token_strings": traj.token_strings(tok),
           "texts": traj.texts(tok), "final": _plain(traj.final), "fixed": _plain(traj.fixed),
           "committed_at": _plain(traj.committed_at), "commit_confidence": _plain(traj.commit_confidence),
           "step_seconds": _plain(traj.step_seconds), "recorded": bool(traj.recorded)}
    for name in STEP_ARRAYS:
        value = getattr(traj, name, None)
        if value is not None:
            out[name] = _plain(value)
    return out


def trajectory_json(traj, tokenizer=None) -> str:
    """The trajectory as a JSON document (strict JSON: NaN is written as null)."""
    return json.dumps(trajectory_dict(traj, tokenizer), ensure_ascii=False, allow_nan=False)


def _final_frame(traj, tok, b: int) -> dict:
    """The one row a record=False trajectory has: its final canvas (step = n_steps)."""
    from .frames import CODE

    final, fixed, L = traj.final[b], traj.fixed[b], traj.length
    state = np.where(fixed, CODE["fixed"], np.where(final == traj.mask_id, CODE["masked"], CODE["earlier"]))
    nan = np.full(L, np.nan)
    at = np.where(traj.committed_at[b] >= 0, traj.committed_at[b] + 1, -1)  # as a step row, like the others
    return {"step": np.full(L, traj.n_steps), "token": final, "state": state, "proposal": final, "score": nan,
            "confidence": nan, "committed": np.zeros(L, bool), "remasked": np.zeros(L, bool),
            "settled": np.zeros(L, bool), "edited": np.zeros(L, bool), "committed_at": at,
            "commit_confidence": traj.commit_confidence[b]}


def _step_frames(traj, tok, b: int) -> list[dict]:
    """Per-step columns of batch row b, built by the heatmap's own Frames (same states, same rows)."""
    from .frames import Frames, glyph_table

    frames = Frames.from_trajectory(traj, glyph_table(tok), b)
    remasked = np.zeros((frames.n_rows, traj.length), bool)
    remasked[1:] = traj.remasked[:, b]
    settled = np.zeros((frames.n_rows, traj.length), bool)
    if getattr(traj, "settled", None) is not None:
        settled[1:] = traj.settled[:, b]
    edited = np.zeros((frames.n_rows, traj.length), bool)
    if getattr(traj, "edited", None) is not None:
        edited[1:] = traj.edited[:, b]
    return [{"step": np.full(traj.length, r), "token": frames.tokens[r], "state": frames.state[r],
             "proposal": frames.proposals[r], "score": frames.scores[r], "confidence": frames.step_conf[r],
             "committed": frames.committed[r], "remasked": remasked[r], "settled": settled[r], "edited": edited[r],
             "committed_at": frames.committed_at[r],
             "commit_confidence": frames.bar_conf[r]} for r in range(frames.n_rows)]


def trajectory_table(traj, tokenizer=None):
    """Long format, one row per (step, batch row, position). step 0 is the canvas before the first
    denoising step, step k the canvas after step k (the heatmap's rows); committed_at is the step
    that committed the current token (-1: masked or fixed)."""
    import pandas as pd

    from .frames import STATES

    tok = _tokenizer(traj, tokenizer)
    glyphs = tok.glyphs()
    parts = []
    for b in range(traj.batch_size):
        for cols in (_step_frames(traj, tok, b) if traj.recorded else [_final_frame(traj, tok, b)]):
            parts.append(pd.DataFrame({**cols, "row": b, "position": np.arange(traj.length)}))
    df = pd.concat(parts, ignore_index=True)
    df["char"] = glyphs[df["token"].to_numpy()]
    df["proposal_char"] = glyphs[df["proposal"].to_numpy()]
    df["state"] = np.array(STATES, dtype=object)[df["state"].to_numpy()]
    return df[list(CSV_COLUMNS)]


def trajectory_csv(traj, tokenizer=None) -> str:
    """trajectory_table as CSV (empty cells where a score / confidence is undefined)."""
    return table_csv(trajectory_table(traj, tokenizer))


def table_csv(df) -> str:
    """A DataFrame as CSV text: no index column, NaN as an empty cell."""
    return df.to_csv(index=False, lineterminator="\n")


def _bokeh_model(obj):
    """The bokeh model of a HoloViews object (rendered fresh), or the bokeh model itself."""
    from bokeh.model import Model

    if isinstance(obj, Model):
        return obj
    from ..plots import render_bokeh

    return render_bokeh(obj)  # never into a served session's document (see there)


def plot_html(obj, title: str = "mdlm-explorer") -> str:
    """A standalone HTML page of a HoloViews or bokeh figure, BokehJS inlined (~1.3 MB): opens offline,
    loading nothing (plots.standalone_html)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    from ..plots import standalone_html

    return standalone_html(file_html(_bokeh_model(obj), INLINE, title))


def plot_png(obj, timeout_ms: int = 30_000) -> bytes:
    """A PNG of a HoloViews or bokeh figure, drawn by the machine's headless Chromium (plots.save_png
    for HoloViews; the same route for a bokeh figure, from its standalone HTML)."""
    from ..plots import save_png

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "figure.png"
        if hasattr(obj, "opts"):  # HoloViews: plots.save_png drops the toolbar itself
            save_png(obj, path, timeout_ms)
        else:
            _screenshot(plot_html(obj), path, timeout_ms)
        return path.read_bytes()


def _screenshot(html: str, path: Path, timeout_ms: int) -> None:
    """Open `html` in headless Chromium and screenshot its bokeh canvas (axes and title, no toolbar)."""
    from ..plots import screenshot_html

    page_file = path.with_suffix(".html")
    page_file.write_text(html, encoding="utf-8")
    screenshot_html(page_file, path, ".bk-Canvas", timeout_ms)


class LazyDownload:
    """The click handler of a download button: runs `make` on a worker thread (a PNG takes Chromium
    seconds; the page stays live meanwhile) and hands the bytes to the widget, or shows why not."""

    def __init__(self, button, label: str, make):
        self.button, self.label, self.make = button, label, make

    def produce(self):
        """Run `make` (on any thread); (bytes, '') or (None, readable reason)."""
        try:
            data = self.make()
        except Exception as e:  # the reason in the button, the traceback in the server log
            log.exception("download %s failed", self.button.filename)
            return None, str(e).splitlines()[0] if str(e) else type(e).__name__
        if data is None:
            return None, "nothing to download yet"
        return (data.encode("utf-8") if isinstance(data, str) else bytes(data)), ""

    async def fetch(self):
        """The widget's (async) callback: a file object, or None after showing why there is none."""
        data, reason = await asyncio.get_running_loop().run_in_executor(None, self.produce)
        self.show(reason)
        return None if data is None else io.BytesIO(data)

    def show(self, reason: str) -> None:
        """A failure is the notice on the button itself (its label and colour); success restores it."""
        self.button.param.update(label=f"⚠ {self.label}: {reason}" if reason else self.label,
                                 color="danger" if reason else "default",
                                 description=reason or None)


def download_button(label: str, filename: str, make, session=None, **kwargs):
    """A FileDownload button that calls `make()` (-> str or bytes) only when clicked. A failure shows
    its reason on the button (a notice, no traceback); the next click tries again. With the browser
    `session`, its label follows the session's type size (projector type)."""
    kwargs["css_classes"] = [*kwargs.get("css_classes", []), "download-button"]  # browser tests find them by it
    button = quiet_file_download()(label=label, filename=filename, color="default", **kwargs)
    if session is not None:
        from .ui.base import watch_presentation

        watch_presentation(session, widgets=(button,))
    handler = LazyDownload(button, label, make)

    async def callback():  # a coroutine function, so Panel awaits it on the event loop
        return await handler.fetch()

    button.handler, button.callback = handler, callback
    return button
