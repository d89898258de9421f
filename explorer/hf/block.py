"""DiffusionGemma-style block diffusion models behind the project's contract.

Such a model is a uniform-state denoiser: a block (its `canvas_length` positions) starts as uniformly random
tokens, not [MASK], and is refined against a cache of everything before it (the prompt and the earlier
blocks), which its encoder writes once. `model(x, t)` denoises x as one block after the model's BOS token;
the sampler uses the extended call, `model(x, t, cache=cache, self_conditioning=logits)`:

    cache = model.new_cache()        # a BlockCache: the key-value cache of what precedes the block
    cache.append(prefix)             # (B, n) tokens, encoded once, in the next call
    logits = model(block, t, cache=cache, self_conditioning=previous_logits)  # (B, Lb, V) float32

`self_conditioning` is the previous step's tempered logits (DiffusionGemma feeds their softmax back as soft
embeddings); None at a block's first step. The model is transformers' own DiffusionGemmaForBlockDiffusion,
loaded by its config (no remote code); its encoder and decoder are called with the arguments, dtypes and
position ids transformers' `generate` gives them, so the logits are bit for bit those of `generate`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from .wrapped import WrappedNet

# DiffusionGemmaGenerationConfig's defaults (its _get_default_generation_params) as the project's knobs:
# what a model recommends when its generation_config.json leaves them unset
GENERATION_DEFAULTS = {"max_denoising_steps": 48, "entropy_bound": 0.1, "t_max": 0.8, "t_min": 0.4,
                       "stability_threshold": 1, "confidence_threshold": 0.005}


@dataclass(frozen=True)
class HFBlockConfig:
    """What the sampler and the views read of a block diffusion model's config."""

    vocab_size: int
    mask_id: int  # not a noise state: only the placeholder of positions whose block has not started
    block_size: int  # the longest canvas in tokens: the context less the BOS token a run without prompt starts from
    family: str
    canvas_length: int  # the model's block
    bos_id: int  # what the cache holds when there is no prompt (the decoder needs a prefix)
    context: int | None = None  # the model's positions, prefix included (None: block_size + 1)
    kind: str = "diffusion"
    process: str = "uniform"  # uniform-state noise: random tokens, re-noised; never [MASK]
    cached: bool = True  # blocks one after another, what precedes them through the cache
    self_conditioning: bool = True
    time_conditioning: str = "none"
    shift_logits: bool = False
    # generate's end of a row: a block holding one of eos_ids ends the row (its later tokens pad_id) and no
    # block follows once every row has ended (the model's generation_config.json; none: every block)
    eos_ids: tuple = ()
    pad_id: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class BlockCache:
    """The key-value cache of the tokens before the current block, for one batch: tokens appended here
    are encoded by the model's next call, once, and stay (positions continue where they end)."""

    def __init__(self, kv):
        self.kv = kv  # transformers' DynamicCache
        self.length = 0  # tokens encoded so far
        self.pending: torch.Tensor | None = None  # (B, n) tokens still to encode

    def append(self, tokens: torch.Tensor) -> None:
        tokens = tokens.long()
        self.pending = tokens if self.pending is None else torch.cat([self.pending, tokens], dim=1)


class HFBlockDenoiser(WrappedNet):
    """transformers' DiffusionGemmaForBlockDiffusion as a uniform-state denoiser (module docstring)."""

    def __init__(self, net: nn.Module, config: HFBlockConfig):
        super().__init__()
        self.net, self.config = net, config

    def new_cache(self) -> BlockCache:
        from transformers import DynamicCache

        return BlockCache(DynamicCache(config=self.net.config.get_text_config(decoder=True)))

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None, *, cache: BlockCache | None = None,
                self_conditioning: torch.Tensor | None = None) -> torch.Tensor:
        if cache is None:  # the plain contract: x is one block after the model's BOS token
            cache = self.new_cache()
            cache.append(torch.full((x.shape[0], 1), self.config.bos_id, device=x.device))
        if cache.pending is not None:
            self._encode(cache)
        context = self.config.context or self.config.block_size + 1
        if cache.length + x.shape[1] > context:
            raise ValueError(f"sequence of {cache.length + x.shape[1]} exceeds the model's context of {context}")
        # generate's decoder position ids: int32, continuing after the cache
        positions = torch.arange(cache.length, cache.length + x.shape[1], dtype=torch.int32, device=x.device)
        sc = None if self_conditioning is None else self_conditioning.to(self._embedding_dtype)
        out = self.net(decoder_input_ids=x, self_conditioning_logits=sc, cache=cache.kv,
                       decoder_position_ids=positions[None])
        return out.logits[..., : self.config.vocab_size]  # (B, Lb, V) float32, soft-capped

    @property
    def _embedding_dtype(self) -> torch.dtype:
        return self.net.model.decoder.embed_tokens.weight.dtype

    def _encode(self, cache: BlockCache) -> None:
        """The pending tokens into the cache, as generate's encoder call (int32 positions after the cache)."""
        ids = cache.pending.contiguous()  # (B, n)
        n = ids.shape[1]
        positions = torch.arange(cache.length, cache.length + n, dtype=torch.int32, device=ids.device)
        out = self.net.model.encoder(input_ids=ids, cache=cache.kv, position_ids=positions[None])
        cache.kv, cache.length, cache.pending = out.cache, cache.length + n, None


def is_block_diffusion(cfg: dict) -> bool:
    """config.json of a DiffusionGemma-style model (model_type or architecture)."""
    archs = [str(a) for a in cfg.get("architectures") or []]
    return str(cfg.get("model_type", "")).lower() == "diffusion_gemma" or any("DiffusionGemma" in a for a in archs)


def text_config(cfg: dict) -> dict:
    """The text model's part of a DiffusionGemma config.json (its sizes live there)."""
    inner = cfg.get("text_config")
    return inner if isinstance(inner, dict) else {}


def generation_file(files) -> dict:
    """The model's generation_config.json as a dict ({} when missing or unreadable)."""
    import json
    from pathlib import Path

    path = Path(files) / "generation_config.json"
    try:
        gen = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        gen = {}
    return gen if isinstance(gen, dict) else {}


def end_tokens(files, vocab: int) -> tuple[tuple, int | None]:
    """(eos ids, pad id) as generate reads them from generation_config.json (ids outside the vocabulary
    dropped)."""
    gen = generation_file(files)
    eos = gen.get("eos_token_id")
    eos = [eos] if isinstance(eos, int) else eos if isinstance(eos, list) else []
    pad = gen.get("pad_token_id")
    return (tuple(int(i) for i in eos if isinstance(i, int) and 0 <= i < vocab),
            pad if isinstance(pad, int) and 0 <= pad < vocab else None)


def recommended_knobs(files) -> dict:
    """The model's generation_config.json (DiffusionGemma's defaults where it leaves a value unset) as
    sampler knobs: steps, entropy_bound, temperature (t_max), temperature_end (t_min), stable_steps and
    stop_entropy. A missing or unreadable file gives the defaults."""
    gen = generation_file(files)
    sampler = gen.get("sampler_config")
    bound = sampler.get("entropy_bound") if isinstance(sampler, dict) else None
    pick = {**GENERATION_DEFAULTS, **{k: v for k, v in gen.items() if k in GENERATION_DEFAULTS and v is not None}}
    if isinstance(bound, (int, float)):
        pick["entropy_bound"] = bound
    return {"steps": int(pick["max_denoising_steps"]), "entropy_bound": float(pick["entropy_bound"]),
            "temperature": float(pick["t_max"]), "temperature_end": float(pick["t_min"]),
            "stable_steps": int(pick["stability_threshold"]), "stop_entropy": float(pick["confidence_threshold"])}
