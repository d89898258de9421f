"""The network only: a bidirectional transformer denoiser and its causal (AR) twin.

No loss and no sampling live here (see diffusion.py and sampling/). Both models share
the same Block; the AR baseline is the same stack with a causal attention mask.

Public call used everywhere downstream:
    logits = model(x, t)   # x (B, L) long, may hold [MASK]; t (B,) float masked fraction
    logits = ar_model(x)   # next-token logits (B, L, V)
    logits = model(x[:, a:b], t, cache=CanvasKV(a, kv.k, kv.v))  # block diffusion: a window over a cache
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F

from .names import KINDS, TIME_CONDITIONING


# Upper bounds on a config's sizes, far above anything trained here (the largest shipped model: 6 layers
# of width 352, context 256) yet low enough that a config read from a file or typed on the command line
# cannot ask for an absurd build. vocab_size covers every Unicode character plus [MASK].
LIMITS = {"vocab_size": 0x110000 + 1, "block_size": 1 << 16, "n_layer": 512, "n_head": 512, "n_embd": 1 << 15}


def _is_int(value) -> bool:
    # bool is an int subclass, but `true` as a layer count is a mistake, not a number
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild the network; stored verbatim in every checkpoint."""

    vocab_size: int  # includes the [MASK] id
    mask_id: int
    block_size: int = 256  # context length (positions)
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 192
    dropout: float = 0.0
    kind: str = "diffusion"  # "diffusion" (bidirectional) or "ar" (causal)
    time_conditioning: str = "none"  # "none" or "adaln"
    # Dream's adaptation of an AR model: logits[:, i] is read from position i-1 (where the causal
    # model it started from predicted token i); position 0 reads its own. Diffusion models only.
    shift_logits: bool = False

    def __post_init__(self):
        self._check_sizes()
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.time_conditioning not in TIME_CONDITIONING:
            raise ValueError(
                f"time_conditioning must be one of {TIME_CONDITIONING}, got {self.time_conditioning!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.shift_logits and self.kind != "diffusion":
            raise ValueError("shift_logits is for diffusion models adapted from an AR one, not for kind 'ar'")
        if self.time_conditioning != "none" and self.kind != "diffusion":
            # the causal model is never given t: its blocks' adaLN would have nothing to read
            raise ValueError(f"time_conditioning {self.time_conditioning!r} is for diffusion models, not kind 'ar'")
        if not 0 <= self.mask_id < self.vocab_size:
            raise ValueError(f"mask_id {self.mask_id} outside vocabulary of {self.vocab_size}")

    def _check_sizes(self) -> None:
        """Types and ranges, before anything else reads them: a checkpoint's config is JSON, where 2.5,
        "6", true or 10**12 can stand for a layer count."""
        for name, hi in LIMITS.items():
            value = getattr(self, name)
            if not _is_int(value) or not 1 <= value <= hi:
                raise ValueError(f"{name} must be an integer in [1, {hi}], got {value!r}")
        if not _is_int(self.mask_id):
            raise ValueError(f"mask_id must be an integer, got {self.mask_id!r}")
        dropout = self.dropout
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")
        for name in ("kind", "time_conditioning"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, got {getattr(self, name)!r}")
        if not isinstance(self.shift_logits, bool):
            raise ValueError(f"shift_logits must be true or false, got {self.shift_logits!r}")

    def parameter_count(self) -> int:
        """Parameters of Transformer(self), from the sizes alone (nothing is built): what a checkpoint
        of this config must hold (the output head is tied to the token embedding, stored once).

        Returns:
            the number of scalars in the model's parameters.
        """
        C = self.n_embd
        adaln = self.time_conditioning == "adaln"
        block = 4 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C)  # norms, attn, mlp
        block += (4 * C * C + 4 * C) if adaln else 0  # the block's adaLN projection
        time_mlp = 2 * (C * C + C) if adaln and self.kind == "diffusion" else 0
        return (self.vocab_size + self.block_size) * C + time_mlp + self.n_layer * block + 2 * C  # + ln_f

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        if not isinstance(d, dict):
            raise ValueError(f"a model config is a JSON object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {sorted(unknown)}")
        return cls(**d)


class KVCache:
    """Per-layer key/value store for incremental causal decoding (AR baseline only)."""

    def __init__(self):
        self.k: list[torch.Tensor | None] = []
        self.v: list[torch.Tensor | None] = []
        self.length = 0  # number of positions already cached

    @property
    def position(self) -> int:
        """The position of the next call's first token: the positions cached so far."""
        return self.length

    def advance(self, n: int) -> None:
        self.length += n

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        while len(self.k) <= layer:
            self.k.append(None)
            self.v.append(None)
        if self.k[layer] is not None:
            k = torch.cat([self.k[layer], k], dim=2)  # (B, nh, T_past+T, hs)
            v = torch.cat([self.v[layer], v], dim=2)
        self.k[layer], self.v[layer] = k, v
        return k, v


class CanvasKV:
    """Every layer's keys and values over a whole canvas, for block diffusion's approximate cache
    (Fast-dLLM): a full forward writes them (`start` None: x is the whole canvas), then forwards over a
    window of the canvas (`start`: x holds positions start .. start + T - 1) attend to the stored keys and
    values outside the window and to their own, freshly computed, inside it. A bidirectional model's stored
    entries are what the canvas looked like at the write (its tokens then, and t then under adaLN): the
    approximation. A window's keys and values are written over the stored ones (the next call of the same
    window recomputes them), so the stored tensors are read and written in place: no copy per call.

    Args:
        start: None to write (a full forward), else the first position of the window.
        k, v: per layer (B, nh, L, hs), from an earlier write (a window reads them).
    """

    def __init__(self, start: int | None = None, k: list | None = None, v: list | None = None):
        self.start = start
        self.k: list[torch.Tensor] = [] if k is None else k
        self.v: list[torch.Tensor] = [] if v is None else v

    @property
    def position(self) -> int:
        """The position of x's first token (the model's position embedding starts there)."""
        return 0 if self.start is None else self.start

    def advance(self, n: int) -> None:
        """A canvas cache does not grow with the tokens it sees (KVCache does)."""

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """The keys and values layer `layer` attends to: a write's own, or the stored ones with the
        window's (B, nh, T, hs) written over positions start .. start + T - 1."""
        if self.start is None:
            k, v = k.contiguous(), v.contiguous()  # its own storage: windows write into it
            if layer == len(self.k):
                self.k.append(k)
                self.v.append(v)
            else:
                self.k[layer], self.v[layer] = k, v
            return k, v
        if layer >= len(self.k):
            raise ValueError("a window forward needs a canvas cache written by a full forward first")
        ck, cv = self.k[layer], self.v[layer]  # (B, nh, L, hs)
        if ck.shape[0] != k.shape[0] or self.start + k.shape[2] > ck.shape[2]:
            raise ValueError(f"the window ({k.shape[0]} rows, positions {self.start} to {self.start + k.shape[2] - 1}) "
                             f"lies outside the cached canvas ({ck.shape[0]} rows, {ck.shape[2]} positions)")
        ck[:, :, self.start:self.start + k.shape[2]] = k
        cv[:, :, self.start:self.start + v.shape[2]] = v
        return ck, cv


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.causal = cfg.kind == "ar"

    def forward(self, x, cache: KVCache | None = None, layer: int = 0):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, nh, T_past+T, hs)
        # With a cache, new queries sit at the end of the keys; a causal mask aligned to the
        # top-left would be wrong, so a single new token attends to everything (is_causal=False).
        causal = self.causal and q.size(2) > 1
        if causal and k.size(2) != q.size(2):
            raise ValueError("cached causal attention supports one new token per call after the prompt")
        # No attention-probability dropout: on the CPU it forces SDPA's slow math path (training measured
        # 3.6x slower on a 2-core CPU); the residual dropout in Block regularises instead.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.drop(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-norm transformer block; with adaLN, t shifts and scales both norms (the guide "Let's Build a
    Diffusion LM", §6.5)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = SelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.ada = None
        if cfg.time_conditioning == "adaln":
            self.ada = nn.Sequential(nn.SiLU(), nn.Linear(cfg.n_embd, 4 * cfg.n_embd))
            # Zero init: every block starts as the unconditioned block (adaLN-Zero, DiT).
            nn.init.zeros_(self.ada[1].weight)
            nn.init.zeros_(self.ada[1].bias)

    def forward(self, x, temb=None, cache=None, layer=0):
        h1, h2 = self.ln_1(x), None
        if self.ada is not None:
            shift1, scale1, shift2, scale2 = self.ada(temb)[:, None, :].chunk(4, dim=-1)  # (B, 1, C) each
            h1 = h1 * (1 + scale1) + shift1
        x = x + self.drop(self.attn(h1, cache, layer))
        h2 = self.ln_2(x)
        if self.ada is not None:
            h2 = h2 * (1 + scale2) + shift2
        return x + self.mlp(h2)


def sinusoidal_embedding(t: torch.Tensor, dim: int, max_period: float = 10_000.0) -> torch.Tensor:
    """(B,) times in [0, 1] -> (B, dim) sinusoidal features (scaled so t in [0,1] spans them)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = 1000.0 * t.float()[:, None] * freqs[None, :]  # (B, half)
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    return F.pad(emb, (0, dim % 2))  # (B, dim)


class Transformer(nn.Module):
    """Token + position embeddings, pre-norm blocks, tied output head."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.time_mlp = None
        if cfg.time_conditioning == "adaln" and cfg.kind == "diffusion":
            self.time_mlp = nn.Sequential(
                nn.Linear(cfg.n_embd, cfg.n_embd), nn.SiLU(), nn.Linear(cfg.n_embd, cfg.n_embd))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        self.head.weight = self.tok_emb.weight  # weight tying (the guide "Let's Build a Diffusion LM", nanoGPT)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @property
    def device(self) -> torch.device:
        return self.tok_emb.weight.device

    # forward(x, t, cache=CanvasKV(...)) reads and writes a canvas cache (block diffusion, sampling/cache.py)
    canvas_kv = True

    def forward(self, x: torch.Tensor, t: torch.Tensor | None = None, *, cache: KVCache | CanvasKV | None = None):
        """Logits (B, T, V) of x (B, T). cache: a KVCache (the AR baseline's incremental decoding: x
        follows the cached positions), or a CanvasKV (block diffusion: a full forward writes it; a window
        forward, x the canvas' positions start .. start + T - 1, reads it outside the window). With
        shift_logits a window's first row is its own position's (it has no position before it)."""
        B, T = x.shape
        start = cache.position if cache is not None else 0
        if start + T > self.config.block_size:
            raise ValueError(f"sequence of {start + T} exceeds the model's context of {self.config.block_size}")
        pos = torch.arange(start, start + T, device=x.device)
        h = self.drop(self.tok_emb(x) + self.pos_emb(pos))  # (B, T, C)
        temb = None
        if self.time_mlp is not None:
            if t is None:
                raise ValueError("this model is time-conditioned (adaln): pass t, the masked fraction, shape (B,)")
            temb = self.time_mlp(sinusoidal_embedding(t.reshape(B), self.config.n_embd))  # (B, C)
        for i, block in enumerate(self.blocks):
            h = block(h, temb, cache, i)
        if cache is not None:
            cache.advance(T)
        logits = self.head(self.ln_f(h))  # (B, T, V)
        if self.config.shift_logits:
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)  # (B, T, V): row i from position i-1
        return logits
