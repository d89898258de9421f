"""A Hugging Face model behind the project's contract: `model(x, t)` -> logits (B, L, V) with
logits[:, i] predicting token i, and `.tokenizer`, `.config`, `.meta`, `.path` as a shipped checkpoint
has them. Nothing downstream knows where a model came from."""
from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass

import torch
from torch import nn

from ..errors import CheckpointError
from ..model import CanvasKV
from .source import (LLADA_MASK_ID, HFOptions, HFSource, check_sizes, detect_family, needs_remote_code, parse_source,
                     read_config)
from .tokenizer import HFTokenizer
from .wrapped import WrappedNet

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEFAULT_CONTEXT = 512  # when a config names no context length
# The canvas a run takes when none is asked for (the dashboard's first run, a sweep, sample without a
# template): a real dLLM's context is 4k-131k tokens, and a first run over all of it takes minutes on a GPU
# (a DiffusionGemma's 131,072 is 512 of its blocks); 256 is the shipped checkpoints' length and one
# DiffusionGemma canvas.
DEFAULT_LENGTH = 256


@dataclass(frozen=True)
class HFModelConfig:
    """What the sampler and the views read of a model's config (the fields ModelConfig shares)."""

    vocab_size: int
    mask_id: int
    block_size: int  # context length in tokens
    family: str
    shift_logits: bool = False
    kind: str = "diffusion"
    time_conditioning: str = "none"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HFJudgeConfig:
    """A causal LM's config as the judge (metrics.gen_nll) reads it: kind 'ar', no [MASK]."""

    vocab_size: int
    block_size: int
    family: str = "causal"
    kind: str = "ar"
    mask_id: None = None

    def to_dict(self) -> dict:
        return asdict(self)


class HFCausalJudge(WrappedNet):
    """A Hugging Face causal LM as a judge of text: model(x) -> next-token logits (B, L, V)."""

    def __init__(self, net: nn.Module, config: HFJudgeConfig):
        super().__init__()
        self.net, self.config = net, config

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
        if kwargs.get("cache") is not None:
            raise ValueError("a Hugging Face causal LM judges text here; it is not sampled (no KV cache)")
        return self.net(input_ids=x).logits[..., : self.config.vocab_size]


class HFDenoiser(WrappedNet):
    """The wrapped transformers model; t is accepted and ignored (these models are not time-conditioned).

    Where the network's forward takes `past_key_values` and `use_cache` (LLaDA's and Dream's remote code as
    Fast-dLLM runs it), it also takes the canvas cache of block diffusion (model.CanvasKV, sampling/cache.py):
    a full forward (cache.start None) keeps each layer's keys and values as the network returns them (one
    pair per layer, the positions on axis -2); a window that runs to the canvas' end (the prefix cache)
    passes the kept entries of the positions before it as past_key_values, and the network attends to them
    and to its own, its positions continuing from theirs; a window that stops earlier (the dual cache) needs
    a forward that also takes `replace_position` (Fast-dLLM's modified code): the whole kept canvas goes in,
    the window's entries written over it in place. `cache_modes` says which of the two the network takes;
    load_hf_model sets it (and `canvas_kv`) once it has tried a tiny cached forward."""

    canvas_kv = False
    cache_modes: tuple[str, ...] = ()

    def __init__(self, net: nn.Module, config: HFModelConfig, never: list[int] | None = None):
        super().__init__()
        self.net, self.config = net, config
        # ids that are never text (a BERT-family model's [CLS], [SEP], [PAD], [UNK]): -inf logits
        self.register_buffer("never", torch.tensor(sorted(never or []), dtype=torch.long), persistent=False)
        params = _forward_params(net)
        self._past = "past_key_values" in params and "use_cache" in params
        self._replace = self._past and "replace_position" in params
        self._dual_flag = self._replace and "dual_cache" in params  # Dream's: replace_position only with it

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None, cache: CanvasKV | None = None) -> torch.Tensor:
        end = x.shape[1] + (cache.start if cache is not None and cache.start is not None else 0)
        if end > self.config.block_size:
            raise ValueError(f"sequence of {end} exceeds the model's context of {self.config.block_size}")
        if cache is None:
            out = self.net(input_ids=x)
        elif not self._past:
            raise ValueError(f"this {self.config.family} model's forward takes no past_key_values (no KV cache)")
        elif cache.start is None:
            out = self._write(x, cache)
        else:
            out = self._window(x, cache)
        logits = out.logits if hasattr(out, "logits") else out[0]  # (B, L, V')
        logits = logits[..., : self.config.vocab_size]
        if len(self.never):
            logits = logits.index_fill(-1, self.never, float("-inf"))
        if self.config.shift_logits:  # (a window's first row is its own position's: it has none before it)
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)  # (B, L, V): row i from position i-1
        return logits

    def _write(self, x: torch.Tensor, cache: CanvasKV):
        """A full forward that keeps every layer's keys and values (their own storage: windows write in it)."""
        out = self.net(input_ids=x, use_cache=True)
        past = _returned_kv(out)
        if not isinstance(past, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in past):
            raise ValueError(f"this {self.config.family} model's forward returned no per-layer keys and values "
                             f"({type(past).__name__})")
        cache.k = [k.contiguous() for k, _ in past]
        cache.v = [v.contiguous() for _, v in past]
        return out

    def _window(self, x: torch.Tensor, cache: CanvasKV):
        """Positions start .. start + T - 1 of the canvas whose keys and values `cache` holds."""
        if not cache.k:
            raise ValueError("a window forward needs a canvas cache written by a full forward first")
        first, end, length = cache.start, cache.start + x.shape[1], cache.k[0].shape[-2]
        if cache.k[0].shape[0] != x.shape[0] or end > length:
            raise ValueError(f"the window ({x.shape[0]} rows, positions {first} to {end - 1}) lies outside the "
                             f"cached canvas ({cache.k[0].shape[0]} rows, {length} positions)")
        if end == length:  # prefix: the cached positions before the window, which follows them
            past = None if first == 0 else [(k[..., :first, :], v[..., :first, :]) for k, v in zip(cache.k, cache.v)]
            return self.net(input_ids=x, past_key_values=past, use_cache=True)
        if not self._replace:
            raise ValueError(f"this {self.config.family} model's forward takes no replace_position: only a window "
                             f"that runs to the canvas' end (the prefix cache)")
        # LLaDA's code writes the positions marked in row 0 into every row (a (B, L) mask would repeat them B
        # times); Dream's reads each row's own
        rows = x.shape[0] if self._dual_flag else 1
        where = torch.zeros(rows, length, dtype=torch.bool, device=x.device)
        where[:, first:end] = True
        extra = {"dual_cache": True} if self._dual_flag else {}
        return self.net(input_ids=x, past_key_values=list(zip(cache.k, cache.v)), use_cache=True,
                        replace_position=where, **extra)

    def probe_cache(self) -> None:
        """Set `canvas_kv` and `cache_modes` from a cached forward over two [MASK] tokens and a window over
        the second: a forward that names past_key_values and then refuses them (LLaDA's released code
        asserts they are None) or returns them in another form takes no cache here."""
        self.canvas_kv, self.cache_modes = False, ()
        if not self._past:
            return
        x = torch.full((1, 2), self.config.mask_id, dtype=torch.long, device=self.device)
        try:
            with torch.no_grad():
                kv = CanvasKV()
                self(x, cache=kv)
                window = self(x[:, 1:], cache=CanvasKV(1, kv.k, kv.v))
        except (AssertionError, ValueError, TypeError, RuntimeError, IndexError, AttributeError, NotImplementedError):
            return
        if window.shape != (1, 1, self.config.vocab_size):
            return
        self.canvas_kv = True
        self.cache_modes = ("prefix", "dual") if self._replace else ("prefix",)


def _returned_kv(out):
    """The keys and values a forward returned: its output's `cache` (transformers 5 names past_key_values so,
    and warns on the old name), `past_key_values`, or a tuple's second item."""
    if isinstance(out, dict):
        return out.get("cache", out.get("past_key_values"))
    if isinstance(out, tuple) and len(out) > 1:
        return out[1]
    return getattr(out, "past_key_values", None)


def _forward_params(net: nn.Module) -> set[str]:
    """The names a network's forward takes (none where its signature cannot be read)."""
    try:
        return set(inspect.signature(net.forward).parameters)
    except (TypeError, ValueError):
        return set()


def _context(cfg: dict) -> int:
    for key in ("max_sequence_length", "max_position_embeddings", "n_positions", "seq_length"):
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            return int(cfg[key])
    return DEFAULT_CONTEXT


def _mask_id(family: str, cfg: dict, tok, options: HFOptions, source: HFSource) -> int:
    if options.mask_id is not None:
        return int(options.mask_id)
    candidates = [cfg.get("mask_token_id"), getattr(tok, "mask_token_id", None)]
    if family == "llada":
        candidates.append(LLADA_MASK_ID)
    for c in candidates:
        if isinstance(c, int) and c >= 0:
            return c
    raise CheckpointError(f"{source.spec}: the model has no mask token (neither its config nor its tokenizer "
                          f"names one); pass --mask-id ID")


def _dtype(options: HFOptions, device: torch.device) -> torch.dtype:
    if options.dtype is not None:
        return DTYPES[options.dtype]
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def _check_allowed(source: HFSource, options: HFOptions) -> None:
    if options.allowed is not None and source.spec not in options.allowed:
        shown = ", ".join(options.allowed) or "none"
        raise CheckpointError(f"{source.spec!r} is not one of the models this server's operator listed "
                              f"(serve --models): {shown}")


def _check_trust(cfg: dict, source: HFSource, options: HFOptions) -> None:
    if needs_remote_code(cfg) and not options.trust_remote_code:
        raise CheckpointError(f"{source.spec} ships its own modelling code (auto_map in config.json); it runs "
                              f"only if you pass --trust-remote-code, after reading that code")


def _from_pretrained(auto_cls, source: HFSource, options: HFOptions, **kwargs):
    """transformers' own loader, its errors as one CheckpointError line (never a traceback in the UI)."""
    try:
        return auto_cls.from_pretrained(source.location, revision=source.revision,
                                        trust_remote_code=options.trust_remote_code,
                                        local_files_only=source.is_local, **kwargs)
    except (OSError, ValueError, KeyError, ImportError, AttributeError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{source.spec}: transformers could not load {auto_cls.__name__} ({first})") from e


def _load_net(family: str, source: HFSource, options: HFOptions, dtype: torch.dtype) -> nn.Module:
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per shard on stderr would bury the CLI's own output
    auto_cls = {"mlm": AutoModelForMaskedLM, "causal": AutoModelForCausalLM}.get(family, AutoModel)
    return _from_pretrained(auto_cls, source, options, dtype=dtype)


def _load_tokenizer(source: HFSource, options: HFOptions):
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, source, options)


def _vocab_size(net: nn.Module, cfg: dict) -> int:
    emb = net.get_output_embeddings() if hasattr(net, "get_output_embeddings") else None
    if emb is not None and getattr(emb, "weight", None) is not None:
        return int(emb.weight.shape[0])
    return int(cfg.get("vocab_size") or cfg.get("embedding_size"))


def checked_config(spec, options: HFOptions | None = None) -> tuple[HFSource, dict, object, str]:
    """What a load reads and checks before it builds anything (no weights read): the model's source, its
    config.json (sizes in bounds, remote code allowed, the model listed where options list models), the
    folder of its files and its family. `serve --models` checks each listed model with it at start.

    Raises CheckpointError (one line) for anything a load would refuse there."""
    options = options or HFOptions()
    source = parse_source(spec)
    _check_allowed(source, options)
    cfg, files = read_config(source)
    check_sizes(cfg, source)
    _check_trust(cfg, source, options)
    return source, cfg, files, options.family or detect_family(cfg, source)


def load_hf_model(spec, device="cpu", options: HFOptions | None = None) -> HFDenoiser:
    """Rebuild a Hugging Face model as an HFDenoiser in eval mode with .tokenizer, .config, .meta, .path."""
    options = options or HFOptions()
    source, cfg, files, family = checked_config(spec, options)
    device = torch.device(device)
    dtype = _dtype(options, device)
    tok = _load_tokenizer(source, options)
    if family == "causal":
        return _judge(source, options, cfg, files, tok, device, dtype)
    if family == "diffusion_gemma":
        return _block_model(source, options, cfg, files, tok, device, dtype)
    mask_id = _mask_id(family, cfg, tok, options, source)
    net = _load_net(family, source, options, dtype)
    vocab = _vocab_size(net, cfg)
    if not 0 <= mask_id < vocab:
        raise CheckpointError(f"{source.spec}: mask id {mask_id} is outside the model's vocabulary of {vocab}")
    shift = options.shift_logits if options.shift_logits is not None else family == "dream"
    config = HFModelConfig(vocab, mask_id, _context(cfg), family, shift)
    tokenizer = HFTokenizer(tok, mask_id, vocab)
    # A masked LM's special tokens mark sequence structure, never text: not proposed. LLaDA's and Dream's
    # EOS / end-of-turn are text (an answer's end) and stay, under the suppress_eos knob.
    never = tokenizer.special_ids if family == "mlm" else []
    model = HFDenoiser(net, config, never).to(device).eval()
    model.probe_cache()  # whether its forward takes the canvas cache (sampling/cache.py)
    model.tokenizer = tokenizer
    return _attach(model, source, cfg, files)


def _judge(source: HFSource, options: HFOptions, cfg: dict, files, tok, device, dtype) -> HFCausalJudge:
    net = _load_net("causal", source, options, dtype)
    vocab = _vocab_size(net, cfg)
    model = HFCausalJudge(net, HFJudgeConfig(vocab, _context(cfg))).to(device).eval()
    model.tokenizer = HFTokenizer(tok, -1, vocab)
    return _attach(model, source, cfg, files)


def _block_model(source: HFSource, options: HFOptions, cfg: dict, files, tok, device, dtype) -> nn.Module:
    """A DiffusionGemma-style model (explorer.hf.block): transformers' own class, by its config."""
    from transformers import DiffusionGemmaForBlockDiffusion
    from transformers.utils import logging as hf_logging

    from .block import HFBlockConfig, HFBlockDenoiser, end_tokens, recommended_knobs, text_config

    hf_logging.disable_progress_bar()  # (as _load_net: no bar on stderr)
    net = _from_pretrained(DiffusionGemmaForBlockDiffusion, source, options, dtype=dtype)
    inner = text_config(cfg)
    vocab = int(net.config.get_text_config().vocab_size)
    # no [MASK] in a uniform-state model: the id only marks positions whose block has not started
    placeholder = next(i for i in (options.mask_id, getattr(tok, "mask_token_id", None), inner.get("pad_token_id"), 0)
                       if isinstance(i, int) and 0 <= i < vocab)
    bos = next((i for i in (inner.get("bos_token_id"), getattr(tok, "bos_token_id", None), placeholder)
                if isinstance(i, int) and 0 <= i < vocab))
    canvas = int(cfg.get("canvas_length") or 256)
    eos, pad = end_tokens(files, vocab)
    context = _context(inner)
    # without a prompt a run's cache starts with the BOS token: one position of the context is not canvas
    config = HFBlockConfig(vocab, placeholder, context - 1, "diffusion_gemma", canvas, bos, context=context,
                           eos_ids=eos, pad_id=pad)
    model = HFBlockDenoiser(net, config).to(device).eval()
    model.tokenizer = HFTokenizer(tok, placeholder, vocab)
    model = _attach(model, source, cfg, files)
    model.meta["sampler_defaults"].update(recommended_knobs(files))
    return model


def _attach(model, source: HFSource, cfg: dict, files) -> nn.Module:
    model.meta = _meta(source, model.config, model, cfg)
    model.meta["sampler_defaults"] = {"length": min(DEFAULT_LENGTH, model.config.block_size)}
    model.path = files  # a directory (the model's snapshot): what caches key on, with its mtime
    return model


SHAPE_KEYS = {"layers": ("num_hidden_layers", "n_layers", "num_layers", "n_layer"),
              "heads": ("num_attention_heads", "n_heads", "num_heads", "n_head"),
              "width": ("hidden_size", "d_model", "n_embd", "dim")}


def _shape(cfg: dict) -> dict:
    """Layers, heads and width as the model's config.json names them (its text model's, for a model with
    one), for the Model tab; a size the config does not name is left out."""
    inner = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    out = {}
    for what, keys in SHAPE_KEYS.items():
        value = next((inner[k] for k in keys if isinstance(inner.get(k), int)), None)
        if value is not None:
            out[what] = value
    return out


def _meta(source: HFSource, config, model: nn.Module, cfg: dict) -> dict:
    weights_dtype = next(model.parameters()).dtype
    dtype = {v: k for k, v in DTYPES.items()}.get(weights_dtype, str(weights_dtype))
    return {"source": source.spec, "location": source.location, "revision": source.revision,
            "hf_model_type": cfg.get("model_type"), "family": config.family, "dtype": dtype,
            "parameters": sum(p.numel() for p in model.parameters()), "model_config": config.to_dict(),
            "hf_shape": _shape(cfg), "tokenizer": model.tokenizer.to_dict()}
