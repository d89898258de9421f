"""The only place that saves and rebuilds a model.

A checkpoint is one .safetensors file: weights (fp16 or fp32) plus string metadata holding JSON
(model config, tokenizer, training config and command, curves, metrics, corpus, word set).
Nothing is ever unpickled and no code from a checkpoint is executed.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch.overrides import TorchFunctionMode

from .data.tokenizer import CharTokenizer
from .errors import CheckpointError
from .model import ModelConfig, Transformer
from .names import PROCESSES

FORMAT = "mdlm-explorer"
FORMAT_VERSION = 1
SUFFIX = ".safetensors"
TIED = "head.weight"  # tied to tok_emb.weight: stored once, re-tied on load
WEIGHT_DTYPES = ("F16", "BF16", "F32", "F64")  # safetensors' names of the floating types weights may have


def checkpoints_dir() -> Path:
    env = os.environ.get("MDLM_EXPLORER_CHECKPOINTS")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "checkpoints"


def list_checkpoints(directory: Path | None = None) -> list[str]:
    d = directory or checkpoints_dir()
    return sorted(p.stem for p in d.glob(f"*{SUFFIX}")) if d.is_dir() else []


def resolve_checkpoint(name_or_path: str | Path, allow_paths: bool = True,
                       directory: Path | None = None) -> Path:
    """A bare name means checkpoints/<name>.safetensors. With allow_paths=False (the dashboard,
    URLs) anything that is not a plain name inside checkpoints/ is refused before any file is opened."""
    s = str(name_or_path).strip()
    d = (directory or checkpoints_dir()).resolve()
    is_plain = s and "/" not in s and "\\" not in s and s not in (".", "..") and not s.startswith(".")
    if is_plain:
        path = d / (s if s.endswith(SUFFIX) else s + SUFFIX)
    elif allow_paths:
        path = Path(s).expanduser()
    else:
        raise CheckpointError(f"checkpoint {s!r} is not a plain name; choose one of {list_checkpoints(d)}")
    if not path.is_file():
        raise CheckpointError(f"no checkpoint {s!r} (looked for {path}); available: {list_checkpoints(d)}")
    return path


def save_checkpoint(model: Transformer, path: str | Path, meta: dict, dtype=torch.float16) -> Path:
    """Write weights (cast to `dtype`) and JSON metadata atomically (tmp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu", dtype if v.is_floating_point() else v.dtype).contiguous()
               for k, v in model.state_dict().items() if k != TIED}
    full = dict(meta)
    full["model_config"] = model.config.to_dict()
    return _write(path, tensors, full)


def _write(path: Path, tensors: dict, meta: dict) -> Path:
    """Weights and JSON metadata into `path`, atomically (tmp file + rename)."""
    header = {"format": FORMAT, "format_version": str(FORMAT_VERSION), "meta": json.dumps(meta)}
    tmp = path.with_suffix(path.suffix + ".tmp")
    save_file(tensors, str(tmp), metadata=header)
    os.chmod(tmp, 0o644)  # readable by every user of a shared lab server
    os.replace(tmp, path)
    return path


def read_metadata(path: str | Path) -> dict:
    """The JSON metadata of a checkpoint file, validated, without loading weights."""
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors checkpoint ({e})") from e
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path} has no mdlm-explorer metadata; it was not written by this tool")
    if header.get("format_version") != str(FORMAT_VERSION):
        raise CheckpointError(f"{path} has format version {header.get('format_version')!r}; "
                              f"this version of mdlm-explorer reads version {FORMAT_VERSION}")
    try:
        meta = json.loads(header["meta"])
    except (KeyError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path} has corrupted metadata ({e})") from e
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path} has corrupted metadata (a JSON {type(meta).__name__}, not an object)")
    for key in ("model_config", "tokenizer"):
        if key not in meta:
            raise CheckpointError(f"{path} metadata lacks {key!r}")
    for key in ("model_config", "tokenizer", "train_config", "training_state", "metrics", "corpus"):
        optional = key not in ("model_config", "tokenizer")  # read as `meta.get(key) or {}`
        if not isinstance(meta.get(key), dict) and not (optional and meta.get(key) is None):
            what = "null" if meta.get(key) is None else type(meta[key]).__name__
            raise CheckpointError(f"{path} has corrupted metadata ({key!r} is a JSON {what}, not an object)")
    process = meta.get("process", "masked")
    if not isinstance(process, str) or process not in PROCESSES:
        raise CheckpointError(f"{path} was trained on the diffusion process {process!r}, which this version of "
                              f"mdlm-explorer does not know (it knows {', '.join(PROCESSES)})")
    return meta


def process_of(model_or_meta) -> str:
    """The forward process a checkpoint's model denoises: "masked" (also every checkpoint written before
    the metadata named one, and every Hugging Face model) or "uniform"."""
    meta = model_or_meta if isinstance(model_or_meta, dict) else getattr(model_or_meta, "meta", None) or {}
    return meta.get("process") or "masked"


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: weights are unreadable ({e})") from e


def _stored_tensors(path: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    """Name -> (shape, dtype) of every tensor in the file, from its header alone: no weight is read."""
    try:
        with safe_open(str(path), framework="pt") as f:
            slices = {k: f.get_slice(k) for k in f.keys()}
            return {k: (tuple(s.get_shape()), s.get_dtype()) for k, s in slices.items()}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: weights are unreadable ({e})") from e


class _NoDraw(TorchFunctionMode):
    """Skips nn.init.normal_: on the meta device it imports torch's compiler stack (about 1 s, once per
    process), and a shape needs no values. A mode is this thread's alone: models built meanwhile in
    other threads (the dashboard's) are initialised as usual."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.init.normal_:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor a checkpoint of `cfg` stores (the tied head aside).

    Built on the meta device, which allocates nothing; with one block, whose entries repeat for every
    block, so a config that claims thousands of layers costs no more to check than one with a single layer.

    Args:
        cfg: a ModelConfig whose sizes are already in range (ModelConfig checks them).
    Returns:
        {state_dict key: shape}.
    """
    with torch.device("meta"), _NoDraw():
        one = Transformer(replace(cfg, n_layer=1))
    probe = {k: tuple(v.shape) for k, v in one.state_dict().items() if k != TIED}
    block = {k[len("blocks.0."):]: v for k, v in probe.items() if k.startswith("blocks.0.")}
    shapes = {}
    for key, shape in probe.items():  # the model's order, its blocks in place of the probe's one
        if not key.startswith("blocks."):
            shapes[key] = shape
        elif key == f"blocks.0.{next(iter(block))}":
            shapes.update({f"blocks.{i}.{name}": s for i in range(cfg.n_layer) for name, s in block.items()})
    return shapes


def check_weights(path: Path, cfg: ModelConfig) -> None:
    """Refuse a file whose tensors are not exactly those `cfg` implies (names, shapes, floating dtypes,
    parameter count), reading only the file's header: nothing is built or loaded before this passes.

    Raises:
        CheckpointError naming what does not fit (torch's own message starts with a line that names nothing).
    """
    stored, expected = _stored_tensors(path), expected_shapes(cfg)
    missing = [k for k in expected if k not in stored]  # in the model's order: blocks.2 before blocks.10
    extra = sorted(k for k in stored if k not in expected)
    wrong = [f"{k} {stored[k][0]} != {v}" for k, v in expected.items() if k in stored and stored[k][0] != v]
    dtypes = [f"{k} {dtype}" for k, (_, dtype) in stored.items() if dtype not in WEIGHT_DTYPES]
    problems = [f"{label}: {', '.join(items[:3])}{' ...' if len(items) > 3 else ''}"
                for label, items in (("missing", missing), ("unexpected", extra), ("wrong shape", wrong),
                                     ("not floating point", dtypes)) if items]
    held, implied = sum(math.prod(shape) for shape, _ in stored.values()), cfg.parameter_count()
    if held != implied:
        problems.append(f"the config implies {implied:,} parameters, the file holds {held:,}")
    if problems:
        raise CheckpointError(f"{path}: weights do not fit the stored config ({'; '.join(problems)})")


def _is_hf(name_or_path, allow_paths: bool, hf) -> bool:
    """A Hugging Face model: `hf:ORG/NAME`, a transformers model directory (paths allowed), or a spec
    the server's operator listed (hf.allowed). A served dashboard (allow_paths=False) opens no other."""
    from .hf import is_hf_spec

    s = str(name_or_path).strip()
    if hf is not None and hf.allowed is not None and s in hf.allowed:
        return True
    # any directory: a shipped checkpoint is a file, so a directory can only mean a transformers model
    # (and one that is not gets explorer.hf's message saying so)
    return s.startswith("hf:") or (allow_paths and (is_hf_spec(s) or Path(s).expanduser().is_dir()))


def load_checkpoint(name_or_path: str | Path, device: str | torch.device = "cpu", *,
                    allow_paths: bool = True, hf=None, graphs: bool | None = None):
    """Load a model: the one loader of the CLI, the sampler's callers and the dashboard.

    The file is checked before anything is built (metadata types and ranges, every tensor's name and
    shape against the config); no pickle is ever read.

    Args:
        name_or_path: a name in checkpoints/ ("shakespeare"), a .safetensors path (when allow_paths), a
            Hugging Face spec ("hf:ORG/NAME[@rev]") or a Hugging Face model directory.
        device: where the weights go ("cpu", "cuda", a torch.device).
        allow_paths: False accepts only names in checkpoints/ and listed Hugging Face models (a server
            taking names from links).
        hf: explorer.hf.HFOptions for Hugging Face models (dtype, trust_remote_code, allowed ids).
        graphs: on a CUDA device, replay the forward of this project's own models and of masked Hugging
            Face dLLMs from CUDA graphs (explorer/graphs.py: the same logits, launched as one graph); None reads
            MDLM_EXPLORER_CUDA_GRAPHS (on unless it is 0, off or false).

    Returns:
        The model in eval mode, called as `model(x, t)` -> logits (B, L, V) for every kind, with
        `.tokenizer` (encode / decode), `.config`, `.meta` (the checkpoint's JSON metadata) and `.path`.

    Raises:
        CheckpointError: one readable line (no such name, a lying or corrupt file, a refused model).

    Example:
        >>> from explorer import load_checkpoint
        >>> model = load_checkpoint("shakespeare")
        >>> model.config.block_size, model.tokenizer.decode(model.tokenizer.encode("ROMEO"))
        (256, 'ROMEO')
    """
    if _is_hf(name_or_path, allow_paths, hf):
        from .hf import HFOptions, load_hf_model
        from .hf.model import HFDenoiser

        options = hf or HFOptions()
        if not allow_paths and options.allowed is None:
            raise CheckpointError(f"{str(name_or_path)!r}: this server opens only the models its operator "
                                  f"listed (serve --models)")
        model = load_hf_model(name_or_path, device, options)
        if isinstance(model, HFDenoiser):  # a masked dLLM (not a judge, nor a block model's cached calls)
            _with_graphs(model, device, graphs, hf=True)
        return model
    path = resolve_checkpoint(name_or_path, allow_paths)
    meta = read_metadata(path)
    cfg, tokenizer = checked_config(path, meta)
    model = Transformer(cfg)
    weights = {k: v.float() for k, v in _read_weights(path).items()}
    weights[TIED] = weights["tok_emb.weight"]
    model.load_state_dict(weights, strict=True)
    model.to(device).eval()
    model.tokenizer, model.meta, model.path = tokenizer, meta, path
    return _with_graphs(model, device, graphs)


def _with_graphs(model, device, graphs: bool | None, hf: bool = False):
    """The model with its forward replayed from CUDA graphs where load_checkpoint's `graphs` asks for it."""
    if torch.device(device).type == "cuda" and (cuda_graphs_wanted() if graphs is None else graphs):
        from . import graphs as cuda_graphs

        cuda_graphs.install(model, max_graphs=cuda_graphs.HF_GRAPHS if hf else cuda_graphs.MAX_GRAPHS)
    return model


def cuda_graphs_wanted() -> bool:
    """MDLM_EXPLORER_CUDA_GRAPHS: CUDA graphs for own models on a GPU unless it says 0, off or false."""
    return os.environ.get("MDLM_EXPLORER_CUDA_GRAPHS", "on").strip().lower() not in ("0", "off", "false")


def checked_config(path: Path, meta: dict) -> tuple[ModelConfig, CharTokenizer]:
    """The model config and tokenizer of a checkpoint's metadata, with every check a file must pass
    before a module is built: types and ranges (ModelConfig), tokenizer against config, and the
    tensors the header lists against those the config implies (check_weights).

    Args:
        path: the checkpoint file (its header is read, no weight).
        meta: its metadata (read_metadata).
    Returns:
        (ModelConfig, CharTokenizer).
    Raises:
        CheckpointError: one line naming the first problem.
    """
    try:
        cfg = ModelConfig.from_dict(meta["model_config"])
        tokenizer = CharTokenizer.from_dict(meta["tokenizer"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: incompatible metadata ({e})") from e
    if tokenizer.vocab_size != cfg.vocab_size or tokenizer.mask_id != cfg.mask_id:
        raise CheckpointError(f"{path}: tokenizer ({tokenizer.vocab_size} ids) does not match the model config")
    check_weights(path, cfg)
    return cfg, tokenizer


def update_metadata(name_or_path: str | Path, changes: dict) -> Path:
    """Merge `changes` into a checkpoint's metadata (top-level keys; a dict value is merged one level
    down, so adding a metric keeps the others). The weights are copied as stored, bit for bit."""
    path = resolve_checkpoint(name_or_path)
    meta = read_metadata(path)
    for key, value in changes.items():
        meta[key] = {**meta[key], **value} if isinstance(value, dict) and isinstance(meta.get(key), dict) else value
    return _write(path, _read_weights(path), meta)
