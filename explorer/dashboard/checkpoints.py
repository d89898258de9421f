"""Checkpoints for the dashboard: listed, loaded once per process, described for the header, their AR
judge found, and their held-out data (the one path for it).

Only plain names inside checkpoints/ are ever opened (allow_paths=False). A checkpoint that is still
being trained is re-saved periodically, so the cache key includes the file's modification time:
choosing it again picks up the newer weights.

What is loaded is kept in runtime/cache.py (MODELS, HELD_OUT, LISTED_MODELS): one copy per server
process, shared by every session (`panel serve` imports this package once; each session only re-runs
app.py), and safe when several sessions ask for the same model at once (the first loads it, the
others wait and get that object). This module says what to load and how; runtime/ only keeps it.
"""
from __future__ import annotations

import math
import os
from types import SimpleNamespace

from ..checkpoint import (
    checked_config,
    list_checkpoints,
    load_checkpoint,
    read_metadata,
    resolve_checkpoint,
)
from ..sampling.cache import cache_modes, takes_cache
from ..sampling.uniform import model_process
from .runtime import owners
from .runtime.cache import CARDS, HELD_OUT, LISTED_MODELS, MODELS


def list_models(specs, options=None) -> None:
    """Let this server open these Hugging Face models (hub ids or directories) besides checkpoints/,
    with the operator's options (remote code, overrides). Sessions can open nothing else."""
    from ..hf import HFOptions

    base = options or HFOptions()
    LISTED_MODELS["options"] = HFOptions(**{**base.__dict__, "allowed": tuple(str(s) for s in specs)})


def listed_models() -> list[str]:
    options = LISTED_MODELS["options"]
    return list(options.allowed) if options is not None else []


SESSION = "session"  # available()'s default owner: the served session being built now (owners.session_owner)


def available(owner: str | None = SESSION) -> list[str]:
    """The checkpoints and listed models a session may open: all of them (owner None), or those but the
    ones other users trained in their browser (owner: runtime/owners.py). By default, for the served
    session whose page is being built now (its sidebar list, and what its link may open), or all
    outside one. A name's file is someone's, listed or not: check new names against owner=None."""
    names = list_checkpoints()
    names += [m for m in listed_models() if m not in names]
    return owners.visible(names, owners.session_owner() if owner == SESSION else owner)


def default_checkpoint(names: list[str]) -> str | None:
    """The shipped Shakespeare diffusion model when present, else the first diffusion-looking name."""
    for preferred in ("shakespeare", "patterns"):
        if preferred in names:
            return preferred
    plain = [n for n in names if not n.endswith("-ar")]
    return (plain or names or [None])[0]


def load(name: str, device) -> object:
    """The model for checkpoints/<name>.safetensors (or a listed Hugging Face model) on `device`,
    shared by every session."""
    hf = LISTED_MODELS["options"]
    if name in listed_models():
        key = (name, str(device), 0)
    else:
        key = (name, str(device), resolve_checkpoint(name, allow_paths=False).stat().st_mtime_ns)
    return MODELS.get(key, lambda: load_checkpoint(name, device, allow_paths=False, hf=hf))


def peek(name: str):
    """A checkpoint of checkpoints/ as its metadata describes it, read without its weights: `.config`,
    `.tokenizer` and `.meta` as its loaded model has them (a session fits its knobs to it before the
    load: Session._preview). None for a listed Hugging Face model, or a file its load will report on."""
    if name in listed_models():
        return None
    try:
        return card(name)
    except (ValueError, OSError):  # CheckpointError is a ValueError
        return None


def card(name: str) -> SimpleNamespace:
    """A checkpoint of checkpoints/ read without its weights (peek), once per version of its file per
    server: every session reads the checkpoint it opens, and its AR judge is looked for (find_judge)
    twice per load through the metadata of every checkpoint, some of them half a megabyte of JSON
    (training curves). On `patterns`, which has no AR twin, that was 0.16 s of the server's CPU per
    session: five seconds for a class opening one link. Shared by the sessions: read-only.

    Raises:
        CheckpointError (a ValueError), OSError: the file is not a readable checkpoint (not cached: a
        file being written may be readable on the next call).
    """
    path = resolve_checkpoint(name, allow_paths=False)
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)  # a checkpoint saved again is another version

    def read() -> SimpleNamespace:
        meta = read_metadata(path)
        config, tokenizer = checked_config(path, meta)
        return SimpleNamespace(config=config, tokenizer=tokenizer, meta=meta, path=path)
    return CARDS.get_or_make(key, read)


def _latest_val(meta: dict) -> float | None:
    val = (meta.get("curves") or {}).get("val") or []
    return float(val[-1][1]) if val else None


def describe(model, name: str) -> dict:
    """What the header shows: name, size, NELBO (or the latest validation loss while training)."""
    meta = getattr(model, "meta", {}) or {}
    metrics = meta.get("metrics") or {}
    n_params = meta.get("n_params") or sum(p.numel() for p in model.parameters())
    info = {"name": name, "kind": model.config.kind, "n_params": int(n_params),
            "corpus": (meta.get("corpus") or {}).get("name", "?"), "context": model.config.block_size,
            "step": (meta.get("training_state") or {}).get("step"), "process": model_process(model),
            "kv_cache": takes_cache(model),  # the sidebar's `cache` knob needs it (Knob.needs)
            "cache_modes": list(cache_modes(model)),  # and offers these (a model may take prefix only)
            # suppress_eos needs end-of-sequence tokens (Knob.needs): a character tokenizer has none
            "eos": bool(getattr(getattr(model, "tokenizer", None), "eos_ids", None))}
    if "family" in meta:  # a Hugging Face model: its family, weights' dtype and memory
        info.update(family=meta["family"], dtype=meta.get("dtype"), corpus=meta["family"],
                    memory_gb=sum(p.numel() * p.element_size() for p in model.parameters()) / 1e9)
    if "nelbo_bits_per_char" in metrics:
        info["nelbo_bits"] = float(metrics["nelbo_bits_per_char"])
        info["nelbo_nats"] = float(metrics.get("nelbo_nats_per_char", info["nelbo_bits"] * math.log(2)))
    elif "val_ce_bits_per_char" in metrics:
        info["ce_bits"] = float(metrics["val_ce_bits_per_char"])
    elif _latest_val(meta) is not None:
        info["val_nats_latest"] = _latest_val(meta)  # training not finished: no final NELBO yet
    return info


DATA_ENV = "MDLM_EXPLORER_DATA"  # `serve --data`: text files the checkpoints may have been trained on


def data_files() -> list[str]:
    """The text files the server was given for held-out figures (`serve --data FILE`, or MDLM_EXPLORER_DATA:
    paths separated by the OS's path separator), in that order."""
    return [p for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p.strip()]


def served_data(meta: dict) -> str | None:
    """The text file on this server that a checkpoint was trained on: the first of data_files() with the
    sha256 its metadata records (any of them where it records none), else a file that a served checkpoint
    recorded as its training data and that has that sha256. Else None: a file of another text would give
    another held-out split, so it is never used for this checkpoint.

    The recorded files count because the server's start counts them when it decides that Tiny
    Shakespeare is here and need not be downloaded (local_shakespeare): a checkpoint that recorded a path
    relative to where it was trained (`shakespeare`: ../shared/...) would otherwise get no held-out text on
    a server where its twin's recorded copy lies, and nothing downloaded."""
    want = (meta.get("corpus") or {}).get("sha256")
    for path in data_files():
        digest = _file_sha256(path)
        if digest is not None and (want is None or digest == want):
            return path
    if want is not None:
        for path in _recorded_files():
            if _file_sha256(path) == want:
                return path
    return None


def _file_sha256(path: str) -> str | None:
    """A file's sha256, read once per version of it per server (None where it cannot be read)."""
    from ..data.corpus import sha256_bytes

    def digest() -> str:
        with open(path, "rb") as f:
            return sha256_bytes(f.read())

    try:
        stat = os.stat(path)
        return HELD_OUT.get_or_make(("sha256", path, stat.st_mtime_ns, stat.st_size), digest)
    except OSError:
        return None


def validation_tokens(model, length: int, n: int = 64):
    """(N, length) held-out tokens of the corpus the checkpoint was trained on (its 10% split), through
    the project's one held-out path (data.corpus.checkpoint_corpus: same sha256 as trained on), from the
    server's --data files, the recorded training file or the Tiny Shakespeare cache, never downloading:
    a served dashboard fetches nothing a visitor asks for. Raises ValueError with what is missing."""
    from ..data.corpus import CorpusError, checkpoint_corpus

    key = ("tokens", str(getattr(model, "path", id(model))), length, n)
    cached = HELD_OUT.get(key)
    if cached is not None:
        return cached
    if "family" in (getattr(model, "meta", None) or {}):
        raise ValueError("a Hugging Face model brings no held-out text of its own")
    try:
        meta = getattr(model, "meta", None) or {}
        corpus = checkpoint_corpus(meta, model.tokenizer, length, data=served_data(meta), download=False)
        tokens = corpus.val_tensor(length, n)
    except (CorpusError, OSError) as e:
        raise ValueError(f"no validation data for this checkpoint: {e}") from e
    HELD_OUT.put(key, tokens)
    return tokens


def reference_scores(model, judge, length: int, n: int = 32) -> tuple[float, float]:
    """(mean gen NLL under `judge`, mean unigram entropy) of `n` held-out crops of `length` characters:
    the reference row that metrics.ref_distance measures a text sample against. Cached per model,
    judge and length; ValueError when the checkpoint's held-out data is not on the server."""
    import numpy as np

    from ..metrics import text_quality

    def scores() -> tuple[float, float]:
        texts = [model.tokenizer.decode(row) for row in validation_tokens(model, length, n).tolist()]
        table = text_quality(texts, judge=judge)
        return float(np.mean(table["gen_nll"])), float(np.mean(table["entropy"]))

    key = ("reference", str(getattr(model, "path", id(model))), str(getattr(judge, "path", id(judge))), length, n)
    return HELD_OUT.get_or_make(key, scores)


def find_judge(model, names: list[str]):
    """An AR checkpoint with the model's alphabet to score text (gen-PPL) and act as the AR baseline."""
    base = getattr(getattr(model, "path", None), "stem", "")
    ordered = sorted(names, key=lambda n: (n != f"{base}-ar", not n.endswith("-ar"), n))
    for name in ordered:
        try:
            meta = card(name).meta
        except (ValueError, OSError):
            continue
        if meta["model_config"].get("kind") == "ar" and meta["tokenizer"] == model.tokenizer.to_dict():
            return name
    return None


def _served_metadata():
    """The metadata of every checkpoint on this server, whoever it is shown to (read without the weights;
    a file that cannot be read is left out)."""
    for name in available(owner=None):
        try:
            yield card(name).meta
        except (ValueError, OSError):
            continue


def local_shakespeare():
    """A verified Tiny Shakespeare on this server: the download cache, a --data file, or the file a listed
    checkpoint was trained on. Never downloads (the server may be offline)."""
    from ..data.corpus import local_shakespeare as find

    return find(extra=[*data_files(), *_recorded_files()])  # any file on this server will do


def _recorded_files() -> list[str]:
    """The training files the served checkpoints recorded (`train_config.data`), in their order."""
    return [data for meta in _served_metadata() if (data := (meta.get("train_config") or {}).get("data"))]


def needs_shakespeare() -> bool:
    """Whether a checkpoint of this server was trained on Tiny Shakespeare (its held-out figures need it)."""
    return any((meta.get("corpus") or {}).get("name") == "shakespeare" for meta in _served_metadata())


def corpus_preview(model, n: int = 200) -> tuple[int, str, int, int] | None:
    """(characters in the corpus, its first `n` characters, characters in the train and in the validation
    split) of the text a checkpoint was trained on, when that text is on this server (the recorded file
    or the verified Tiny Shakespeare cache, hash-checked); None otherwise. Never downloads."""
    from ..data.corpus import CorpusError, checkpoint_corpus

    meta = getattr(model, "meta", None) or {}
    if (meta.get("corpus") or {}).get("kind") != "text":
        return None
    key = ("preview", str(getattr(model, "path", id(model))), n)
    cached = HELD_OUT.get(key)
    if cached is not None:
        return cached
    try:
        corpus = checkpoint_corpus(meta, model.tokenizer, model.config.block_size, data=served_data(meta),
                                   download=False)
    except (CorpusError, OSError, ValueError):
        return None
    # the file's order is the train split then the validation split (which a short file reaches)
    head = corpus.train_ids[:n].tolist() + corpus.val_ids[:max(0, n - len(corpus.train_ids))].tolist()
    n_train, n_val = len(corpus.train_ids), len(corpus.val_ids)
    preview = (n_train + n_val, model.tokenizer.decode(head), n_train, n_val)
    HELD_OUT.put(key, preview)
    return preview

