"""Where a Hugging Face model comes from and which family it is, decided from its config.json alone:
no weights are read and no code from the model runs here (remote code needs trust_remote_code)."""
from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from ..errors import CheckpointError
from ..names import HF_DTYPES, HF_FAMILIES as FAMILIES

PREFIX = "hf:"
LLADA_MASK_ID = 126336  # LLaDA's published [MASK] id, used when its config does not name one
HUB_HOST = "huggingface.co"


@dataclass(frozen=True)
class HFOptions:
    """The user's say over a Hugging Face model; each None means 'read it from the model'."""

    trust_remote_code: bool = False
    family: str | None = None  # one of FAMILIES
    mask_id: int | None = None
    shift_logits: bool | None = None  # Dream: logits[:, i] from position i-1
    dtype: str | None = None  # "bf16", "fp16" or "fp32"; default bf16 on CUDA, fp32 on CPU
    allowed: tuple[str, ...] | None = None  # a served dashboard: only these specs may load

    def __post_init__(self):
        if self.family is not None and self.family not in FAMILIES:
            raise CheckpointError(f"unknown model family {self.family!r}; valid: {', '.join(FAMILIES)}")
        if self.dtype is not None and self.dtype not in HF_DTYPES:
            raise CheckpointError(f"unknown dtype {self.dtype!r}; valid: {', '.join(HF_DTYPES)}")


@dataclass(frozen=True)
class HFSource:
    spec: str  # as the user wrote it
    location: str  # hub id or local directory
    revision: str | None
    is_local: bool


def is_hf_spec(spec) -> bool:
    """`hf:...`, or a directory holding a transformers config.json (a shipped checkpoint is a file)."""
    s = str(spec).strip()
    return s.startswith(PREFIX) or (Path(s).expanduser() / "config.json").is_file()


def parse_source(spec) -> HFSource:
    s = str(spec).strip()
    if not s.startswith(PREFIX):
        path = Path(s).expanduser()
        if not path.is_dir():
            raise CheckpointError(f"{s!r} is not a directory")
        if not (path / "config.json").is_file():
            raise CheckpointError(f"{s!r} is not a transformers model directory (it has no config.json)")
        return HFSource(s, str(path.resolve()), None, True)
    name, _, revision = s[len(PREFIX):].partition("@")
    if name.count("/") != 1 or not all(part.strip() for part in name.split("/")):
        raise CheckpointError(f"{s!r}: a hub model is written hf:ORG/NAME (optionally @revision)")
    return HFSource(s, name, revision or None, False)


def _hub_reachable(timeout: float = 3.0) -> bool:
    try:
        socket.create_connection((HUB_HOST, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def fetch_file(source: HFSource, filename: str) -> Path:
    """A file of the model: from its directory, the local hub cache, or (when reachable) the hub."""
    if source.is_local:
        return Path(source.location) / filename
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(source.location, filename, revision=source.revision, local_files_only=True))
    except Exception:  # not cached: go online, but say so fast when we cannot (no 20 s of retries)
        pass
    if os.environ.get("HF_HUB_OFFLINE") or not _hub_reachable():
        raise CheckpointError(f"{source.spec}: not in the local Hugging Face cache and the hub cannot be "
                              f"reached (offline?); download it where there is a network, or pass a local "
                              f"model directory")
    try:
        return Path(hf_hub_download(source.location, filename, revision=source.revision))
    except Exception as e:
        raise CheckpointError(f"{source.spec}: the hub has no such model or file ({type(e).__name__}: {e})") from e


def read_config(source: HFSource) -> tuple[dict, Path]:
    """The model's config.json as a dict, and the directory it lies in (the model's files on disk)."""
    path = fetch_file(source, "config.json")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{source.spec}: unreadable config.json ({e})") from e
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{source.spec}: config.json is not a JSON object")
    return cfg, path.parent


# Upper bounds on the sizes a config.json may give (its families' spellings), far above any published model
# (Llama 3.1 405B: 126 layers, width 16384, MLP 53248; LLaDA: vocabulary 126464), so that a lying config
# cannot make transformers build (and randomly initialise) an absurd model: checked before anything loads.
SIZE_LIMITS = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers"), 1024),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model"), 1 << 16),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_key_value_heads"), 1024),
    **dict.fromkeys(("intermediate_size", "mlp_hidden_size"), 1 << 20),
    **dict.fromkeys(("vocab_size", "embedding_size"), 1 << 22),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"), 1 << 24),
}


def check_sizes(cfg: dict, source: HFSource) -> None:
    """Every size config.json gives is a positive integer within SIZE_LIMITS: refused with one
    CheckpointError line before transformers builds anything.

    Args:
        cfg: the parsed config.json.
        source: where it came from (named in the message).
    """
    inner = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}  # DiffusionGemma's sizes
    for key, limit in SIZE_LIMITS.items():
        for value in (cfg.get(key), inner.get(key)):
            _check_size(key, value, limit, source)


def _check_size(key: str, value, limit: int, source: HFSource) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit):
        raise CheckpointError(f"{source.spec}: config.json's {key} must be an integer in [1, {limit}], "
                              f"got {value!r}")


def detect_family(cfg: dict, source: HFSource) -> str:
    """mlm (BERT-family masked LMs), llada, dream, diffusion_gemma or causal (a judge), from model_type and
    architectures."""
    model_type = str(cfg.get("model_type", "")).lower()
    archs = [str(a) for a in cfg.get("architectures") or []]
    if model_type == "diffusion_gemma" or any("DiffusionGemma" in a for a in archs):
        return "diffusion_gemma"
    if "dream" in model_type or any("Dream" in a for a in archs):
        return "dream"
    if "llada" in model_type or any("LLaDA" in a for a in archs):
        return "llada"
    if any(a.endswith("ForMaskedLM") for a in archs):
        return "mlm"
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return "causal"
    raise CheckpointError(f"{source.spec}: cannot tell the model family from its config (model_type "
                          f"{model_type!r}, architectures {archs}); pass --hf-family with one of "
                          f"{', '.join(FAMILIES)}")


def needs_remote_code(cfg: dict) -> bool:
    """The config maps to classes shipped as code with the model (auto_map) that transformers lacks."""
    if not cfg.get("auto_map"):
        return False
    from transformers import CONFIG_MAPPING

    return str(cfg.get("model_type", "")) not in CONFIG_MAPPING
