"""A checkpoint whose held-out text is not on the server (trained on a file that is not here): the
Inspect tab says so in its notice (escaped: the corpus name is the checkpoint's text) and in its
confidence-by-position figure's title (not "computing", which it never would be), the empty text's
notice asks for a typed text (its "Use validation text" button, with nothing to put back, is disabled), a typed text
still gets its predictions, and the server log gets one line per page, not a traceback."""
from __future__ import annotations

import html
import logging

import torch

from explorer.checkpoint import save_checkpoint
from explorer.dashboard.tabs import build_tab
from explorer.dashboard.tabs.explore import open_session
from explorer.data.patterns import pattern_tokenizer
from tests.support.dashboard import LENGTH, wait_for
from tests.support.models import make_model

CORPUS = "<img src=x onerror=alert(1)>"  # a corpus name from the checkpoint's metadata: shown as typed


def save_without_held_out(directory) -> str:
    """A tiny diffusion checkpoint trained on a text file that no longer exists."""
    tok = pattern_tokenizer()
    model = make_model(vocab_size=tok.vocab_size, mask_id=tok.mask_id, block_size=LENGTH, n_layer=1, n_embd=32,
                       n_head=2, seed=1)
    meta = {"tokenizer": tok.to_dict(), "n_params": sum(p.numel() for p in model.parameters()),
            "corpus": {"name": CORPUS, "kind": "text", "sha256": "0" * 64},
            "train_config": {"corpus": "text", "data": str(directory / "gone.txt")}, "words": []}
    save_checkpoint(model, directory / "lectures.safetensors", meta, dtype=torch.float32)
    return "lectures"


def test_missing_held_out_text_is_a_notice_and_one_log_line(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MDLM_EXPLORER_CHECKPOINTS", str(tmp_path))
    torch.set_num_threads(1)
    name = save_without_held_out(tmp_path)
    caplog.set_level(logging.INFO)
    pages = []
    for _ in range(2):  # two pages opening the tab: a line each, never a traceback
        s = open_session(checkpoint=name, device="cpu", auto_run=False, sweep_auto=False)
        tab, view = build_tab("Inspect", s)
        pages.append(s)
        s.load(wait=True)
        tab.on_shown()  # what showing the tab does (app.watch_shown)
        wait_for(lambda: view.notice.visible and view.busy.object == "")
        assert tab.validation_error.startswith("the held-out text is not available on this server: ")
        assert tab.validation_error.endswith("; type a text to inspect") and tab.tokens is None
        shown = html.unescape(view.notice.get_root().text)  # the HTML the page's notice renders
        assert "the held-out text is not available" in shown
        assert CORPUS not in shown and html.escape(CORPUS, quote=False) in shown
        # the empty text's notice does not send the reader to a button that has nothing to put back
        wait_for(lambda: tab.text_notice == "the text is empty: type some text")
        assert view.reset.disabled
        title = view.positions_plot.figure.title.text
        assert title == "Mean confidence by position (no held-out text on this server)"
    try:
        # this checkpoint's lines, by its corpus's name: the log is the process's, and a session an earlier
        # test left behind may still be logging about its own held-out text
        lines = [r for r in caplog.records if CORPUS in r.getMessage()]
        assert len(lines) == 2 and all(r.levelno == logging.WARNING and r.exc_info is None for r in lines)
        assert not any(r.exc_info for r in caplog.records if r.getMessage().startswith("validation text failed"))
        tab.text = "ABCABC"  # a typed text needs no held-out text
        wait_for(lambda: tab.predictions is not None and tab.predictions["text"] == "ABCABC")
    finally:
        for s in pages:
            s.close()
