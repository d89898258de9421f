"""Training corpora: Tiny Shakespeare (downloaded once, hash-checked), any UTF-8 file, or patterns.

A corpus hands out (B, L) batches of token ids for training and a fixed validation tensor.
"""
from __future__ import annotations

import hashlib
import os
import re
import urllib.request
from pathlib import Path

import torch

from .patterns import generate_patterns, pattern_tokenizer
from .tokenizer import CharTokenizer

SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
WORD_RE = re.compile(r"[A-Za-z']+")


class CorpusError(RuntimeError):
    """A corpus could not be obtained; the message says what to do instead."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_dir() -> Path:
    return Path(os.environ.get("MDLM_EXPLORER_CACHE", Path.home() / ".cache" / "mdlm-explorer"))


def local_shakespeare(cache: Path | None = None, extra=()) -> Path | None:
    """A verified local Tiny Shakespeare: the download cache, else the first of `extra` (paths) that
    hashes to the known corpus. Never downloads (a served dashboard may be offline, and must not
    fetch anything a visitor asks for)."""
    for path in [(cache or cache_dir()) / "tinyshakespeare.txt", *map(Path, extra)]:
        try:
            if path.is_file() and sha256_bytes(path.read_bytes()) == SHAKESPEARE_SHA256:
                return path
        except OSError:
            continue
    return None


def fetch_shakespeare(url: str = SHAKESPEARE_URL, cache: Path | None = None) -> Path:
    """Return the cached Tiny Shakespeare file, downloading and verifying it the first time."""
    path = (cache or cache_dir()) / "tinyshakespeare.txt"
    if local_shakespeare(cache) is not None:
        return path
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            data = r.read()
    except OSError as e:
        raise CorpusError(f"could not download Tiny Shakespeare from {url} ({e}); "
                          "pass --data FILE with a local copy instead") from e
    if sha256_bytes(data) != SHAKESPEARE_SHA256:
        raise CorpusError(f"downloaded file has sha256 {sha256_bytes(data)}, expected {SHAKESPEARE_SHA256}; "
                          "pass --data FILE with a verified copy instead")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def read_text_file(path: str | Path) -> tuple[str, str]:
    """(text, sha256) of a UTF-8 file, with a clear error for anything else."""
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"data file not found: {p}")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{p} is not UTF-8 text ({e})") from e
    if len(text) < 2:
        raise CorpusError(f"{p} is too short to train on ({len(text)} characters)")
    return text, sha256_bytes(raw)


def word_set(text: str) -> list[str]:
    """Sorted distinct lower-cased words: used later to score generated text."""
    return sorted({w.lower() for w in WORD_RE.findall(text)})


class TextCorpus:
    """A character corpus with a deterministic 90/10 train/validation split (by position)."""

    kind = "text"

    def __init__(self, text: str, name: str = "text", sha256: str | None = None,
                 tokenizer: CharTokenizer | None = None, val_fraction: float = 0.1):
        self.name = name
        self.sha256 = sha256 or sha256_bytes(text.encode("utf-8"))
        self.tokenizer = tokenizer or CharTokenizer.from_text(text)
        ids = torch.tensor(self.tokenizer.encode(text), dtype=torch.long)
        n_train = int(len(ids) * (1 - val_fraction))
        self.train_ids, self.val_ids = ids[:n_train], ids[n_train:]
        self.train_text, self.val_text = text[:n_train], text[n_train:]
        self.words = word_set(text[:n_train])

    def batch(self, batch_size: int, length: int, generator: torch.Generator | None = None,
              split: str = "train") -> torch.Tensor:
        """(B, L) random crops of the chosen split."""
        ids = self.train_ids if split == "train" else self.val_ids
        if len(ids) <= length:
            raise CorpusError(f"{split} split has {len(ids)} tokens, fewer than the context {length}")
        starts = torch.randint(0, len(ids) - length, (batch_size,), generator=generator)
        return torch.stack([ids[s:s + length] for s in starts.tolist()])  # (B, L)

    def val_tensor(self, length: int, max_sequences: int | None = None) -> torch.Tensor:
        """(N, L) non-overlapping chunks of the validation split: the fixed held-out set."""
        n = len(self.val_ids) // length
        if n == 0:
            raise CorpusError(f"validation split ({len(self.val_ids)} tokens) is shorter than the context {length}")
        if max_sequences:
            n = min(n, max_sequences)
        return self.val_ids[: n * length].view(n, length)


class PatternCorpus:
    """Endless fresh pattern sequences for training; a fixed seeded set for validation."""

    kind = "patterns"

    def __init__(self, seq_len: int = 24, n_symbols: int = 15, min_period: int = 2, max_period: int = 6):
        self.name = "patterns"
        self.tokenizer = pattern_tokenizer(n_symbols)
        self.opts = dict(n_symbols=n_symbols, min_period=min_period, max_period=max_period)
        self.seq_len = seq_len
        self.sha256 = None
        self.words: list[str] = []
        self.val_text = ""

    def batch(self, batch_size, length, generator=None, split="train"):
        return generate_patterns(batch_size, length, generator=generator, **self.opts)

    def val_tensor(self, length, max_sequences=None):
        g = torch.Generator().manual_seed(1234)
        return generate_patterns(max_sequences or 512, length, generator=g, **self.opts)


def load_corpus(name: str = "shakespeare", data: str | None = None, **pattern_opts):
    """'patterns', 'shakespeare' (download/cache) or any UTF-8 file given as `data`."""
    if name == "patterns":
        return PatternCorpus(**pattern_opts)
    if data is not None:
        text, digest = read_text_file(data)
        corpus_name = "shakespeare" if digest == SHAKESPEARE_SHA256 else Path(data).stem
        return TextCorpus(text, name=corpus_name, sha256=digest)
    if name != "shakespeare":
        raise CorpusError(f"unknown corpus {name!r}: use 'shakespeare', 'patterns' or --data FILE")
    text, digest = read_text_file(fetch_shakespeare())
    return TextCorpus(text, name="shakespeare", sha256=digest)


def checkpoint_corpus(meta: dict, tokenizer, block_size: int, data: str | None = None, download: bool = True):
    """Rebuild the corpus a checkpoint was trained on, for its held-out split (the one path for it:
    the CLI's evaluate and sweep and the dashboard all come here). PatternCorpus for patterns; for
    text, `data`, else the training file recorded in the checkpoint, else (Tiny Shakespeare only) the
    verified cache, downloaded once if `download`. The file must be the one trained on (same sha256):
    another file would give another split. Raises CorpusError saying what to pass."""
    corpus = meta.get("corpus") or {}
    if corpus.get("kind") == "patterns":
        return PatternCorpus(seq_len=block_size, n_symbols=len(tokenizer.chars))
    path = data or _recorded_data(meta)
    if path is None and corpus.get("name") == "shakespeare":
        path = fetch_shakespeare() if download else local_shakespeare()
        if path is None:  # only without download: a download either finds it or raises
            raise CorpusError("Tiny Shakespeare is missing: `python run.py serve` downloads it at start when it "
                              "can reach the internet (not with --offline), or give it --data FILE (a copy)")
    if path is None:
        raise CorpusError(f"the held-out text of {corpus.get('name', 'an unknown corpus')!r} is not available (the "
                          "file it was trained on was not found); pass --data FILE (that file) to rebuild its "
                          "held-out split")
    text, digest = read_text_file(path)
    if corpus.get("sha256") and digest != corpus["sha256"]:
        raise CorpusError(f"{path} (sha256 {digest[:12]}...) is not the file this checkpoint was trained on "
                          f"({corpus['sha256'][:12]}...): its held-out split would be different text")
    return TextCorpus(text, name=corpus.get("name", "text"), sha256=digest, tokenizer=tokenizer)


def _recorded_data(meta: dict) -> str | None:
    """The --data path recorded at training time, when that file still exists."""
    path = (meta.get("train_config") or {}).get("data")
    return path if path and Path(path).is_file() else None
