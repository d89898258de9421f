"""Tiny Hugging Face models written to a directory by the test, loaded through the real path:
native masked LMs (BERT, ModernBERT) with a tokenizer trained here, and remote-code models written
here (configuration_*.py, modeling_*.py, auto_map), LLaDA-style or Dream-style: one whose forward takes
input ids alone, and one taking past_key_values as LLaDA's and Dream's code does under Fast-dLLM
(cached_remote_code_dir). Never the network."""
from __future__ import annotations

import json
from pathlib import Path

import torch

TEXT = ["to be or not to be that is the question",
        "whether tis nobler in the mind to suffer the slings and arrows of outrageous fortune",
        "or to take arms against a sea of troubles"] * 20
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<eos>"]


def tiny_tokenizer(out: Path, vocab_size: int = 80, mask_token: bool = True):
    """A WordPiece tokenizer trained on TEXT, saved as a transformers fast tokenizer in `out`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.decoder = decoders.WordPiece()
    tk.train_from_iterator(TEXT, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS))
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]" if mask_token else None,
                                   eos_token="<eos>")
    # an instruct model's chat template, in the form transformers renders (jinja)
    fast.chat_template = ("{% for m in messages %}[CLS] {{ m['content'] }} [SEP]{% endfor %}"
                          "{% if add_generation_prompt %} answer{% endif %}")
    fast.save_pretrained(out)
    return fast


def bert_dir(out: Path, seed: int = 0, context: int = 64, mask_token: bool = True) -> Path:
    from transformers import BertConfig, BertForMaskedLM

    tok = tiny_tokenizer(out, mask_token=mask_token)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=context)
    BertForMaskedLM(cfg).save_pretrained(out)
    return out


def modernbert_dir(out: Path, seed: int = 0) -> Path:
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    tok = tiny_tokenizer(out)
    torch.manual_seed(seed)
    cfg = ModernBertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                           bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                           cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id)
    ModernBertForMaskedLM(cfg).save_pretrained(out)
    return out


def _config_source(name: str, model_type: str, fields: dict) -> str:
    """configuration_tiny.py of a remote-code model: a PretrainedConfig `name` with `fields` (their defaults)."""
    args = ", ".join(f"{key}={value!r}" for key, value in fields.items())
    sets = "".join(f"        self.{key} = {key}\n" for key in fields)
    return (f"from transformers import PretrainedConfig\n\n\nclass {name}(PretrainedConfig):\n"
            f"    model_type = {model_type!r}\n\n    def __init__(self, {args}, **kwargs):\n{sets}"
            f"        super().__init__(**kwargs)\n")


def _save_remote_code(out: Path, configuration: str, modeling: str, cfg: dict, seed: int) -> Path:
    """Write a remote-code model's two sources and config.json (`cfg`, with its auto_map) into `out` and save
    its weights, initialised after torch.manual_seed(seed), as save_pretrained does."""
    from transformers import AutoConfig, AutoModel

    (out / "configuration_tiny.py").write_text(configuration)
    (out / "modeling_tiny.py").write_text(modeling)
    (out / "config.json").write_text(json.dumps(cfg))
    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(out, trust_remote_code=True), trust_remote_code=True)
    model.save_pretrained(out)
    cfg_saved = json.loads((out / "config.json").read_text())
    cfg_saved["auto_map"] = cfg["auto_map"]  # save_pretrained may rewrite it with module paths
    (out / "config.json").write_text(json.dumps(cfg_saved))
    return out


_TINY_CONFIG = {"vocab_size": 80, "hidden_size": 32, "max_sequence_length": 64, "mask_token_id": None}

_MODELING = '''
import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

from .configuration_tiny import TinyDiffConfig


class TinyDiffModel(PreTrainedModel):
    """Embedding, one bidirectional attention layer, head: enough for logits that depend on context."""
    config_class = TinyDiffConfig

    def __init__(self, config):
        super().__init__(config)
        self.emb = nn.Embedding(config.vocab_size, config.hidden_size)
        self.pos = nn.Embedding(config.max_sequence_length, config.hidden_size)
        self.attn = nn.MultiheadAttention(config.hidden_size, 2, batch_first=True)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        h = self.emb(input_ids) + self.pos(torch.arange(input_ids.shape[1], device=input_ids.device))
        h = h + self.attn(h, h, h, need_weights=False)[0]
        return MaskedLMOutput(logits=self.head(h))
'''


def remote_code_dir(out: Path, style: str = "llada", seed: int = 0, mask_id: int | None = 4) -> Path:
    """A model whose classes ship as code beside its weights (auto_map), as LLaDA and Dream do."""
    out.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer(out)
    model_type = {"llada": "tiny_llada", "dream": "tiny_dream"}[style]
    cfg = {"model_type": model_type, "architectures": ["TinyDiffModel"], "vocab_size": len(tok),
           "hidden_size": 32, "max_sequence_length": 64, "mask_token_id": mask_id,
           "auto_map": {"AutoConfig": "configuration_tiny.TinyDiffConfig", "AutoModel": "modeling_tiny.TinyDiffModel"}}
    return _save_remote_code(out, _config_source("TinyDiffConfig", model_type, _TINY_CONFIG), _MODELING, cfg, seed)


def gpt2_dir(out: Path, seed: int = 0) -> Path:
    """A tiny causal LM with the same tokenizer: a judge of text (gen-PPL) for the models above."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = tiny_tokenizer(out)
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=64,
                     bos_token_id=tok.cls_token_id, eos_token_id=tok.eos_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(out)
    return out


def diffusion_gemma_dir(out: Path, seed: int = 0, canvas_length: int = 8, context: int = 128) -> Path:
    """A tiny random DiffusionGemma (transformers' own classes: an encoder writing the cache of what
    precedes a block, a bidirectional decoder over the block with self-conditioning, a 2-expert MoE and a
    one-layer vision tower) with the WordPiece tokenizer above, as save_pretrained writes it."""
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    tok = tiny_tokenizer(out)
    text = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=16, global_head_dim=16,
                max_position_embeddings=context, sliding_window=16, num_experts=2, top_k_experts=1,
                moe_intermediate_size=32, layer_types=["sliding_attention", "full_attention"],
                pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.cls_token_id)
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=8, position_embedding_size=64, patch_size=4)
    torch.manual_seed(seed)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=canvas_length)
    DiffusionGemmaForBlockDiffusion(cfg).save_pretrained(out)
    return out


# A stand-in for LLaDA's and Dream's remote code as Fast-dLLM runs it: a bidirectional transformer with rotary
# positions whose forward takes `past_key_values` (one (keys, values) pair per layer, the positions on axis -2;
# keys kept before the rotation, which is applied over the whole key length each call, the queries at its
# last positions: the window continues the cached positions) and `use_cache` (the output's past_key_values,
# the same layout). Layout "heads" is LLaDA's (B, heads, L, head size), "flat" Dream's (B, L, hidden).
# TinyCachedLM's forward has no replace_position (as LLaDA's released code); TinyFastDllmLM's has it
# (Fast-dLLM's modified LLaDA: the window's keys and values are written over the cached ones at the
# positions it marks, in place, and the queries sit at those positions); TinyFastDreamLM's also takes
# dual_cache (Fast-dLLM's Dream: replace_position is read only with dual_cache, row by row).
# `refuse_cache` copies the released LLaDA code's assert: past_key_values and use_cache in the signature,
# refused when used. Each forward appends its input's length to `calls`.
_CACHED_CONFIG = {"vocab_size": 80, "hidden_size": 32, "n_heads": 2, "n_layers": 2, "max_sequence_length": 64,
                  "mask_token_id": None, "kv_layout": "heads", "refuse_cache": False}

_CACHED_MODELING = '''
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_tiny import TinyCachedConfig


def rotate(t, pos):
    """Rotary embedding of t (..., n, hs) at positions pos (n,)."""
    half = t.shape[-1] // 2
    freq = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32, device=t.device) / half))
    angle = pos.float()[:, None] * freq[None, :]  # (n, half)
    cos, sin = torch.cat([angle.cos()] * 2, -1).to(t.dtype), torch.cat([angle.sin()] * 2, -1).to(t.dtype)
    t1, t2 = t[..., :half], t[..., half:]
    return t * cos + torch.cat([-t2, t1], -1) * sin


class Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.norm1, self.norm2 = nn.LayerNorm(config.hidden_size), nn.LayerNorm(config.hidden_size)
        self.q, self.k, self.v = (nn.Linear(config.hidden_size, config.hidden_size) for _ in range(3))
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.mlp = nn.Sequential(nn.Linear(config.hidden_size, 2 * config.hidden_size), nn.GELU(),
                                 nn.Linear(2 * config.hidden_size, config.hidden_size))

    def forward(self, h, past=None, use_cache=False, replace_position=None):
        B, T, C = h.shape
        nh = self.config.n_heads
        x = self.norm1(h)
        q, k, v = self.q(x), self.k(x), self.v(x)  # (B, T, C)
        heads = self.config.kv_layout == "heads"
        if heads:
            k, v = (z.view(B, T, nh, C // nh).transpose(1, 2) for z in (k, v))  # (B, nh, T, hs)
        if past is not None:
            pk, pv = past
            if replace_position is None:  # the window follows the cached positions
                k, v = torch.cat([pk, k], dim=-2), torch.cat([pv, v], dim=-2)
            elif heads:  # LLaDA: the marked positions of the first row, for every row
                idx = replace_position.nonzero(as_tuple=True)[1]
                pk[:, :, idx], pv[:, :, idx] = k, v
                k, v = pk, pv
            else:  # Dream: each row its own marked positions
                for b in range(replace_position.shape[0]):
                    idx = replace_position[b].nonzero(as_tuple=True)[0]
                    pk[b, idx], pv[b, idx] = k[b, :len(idx)], v[b, :len(idx)]
                k, v = pk, pv
        present = (k, v) if use_cache else None
        if not heads:
            k, v = (z.view(B, -1, nh, C // nh).transpose(1, 2) for z in (k, v))
        q = q.view(B, T, nh, C // nh).transpose(1, 2)
        L = k.shape[-2]
        end = L if replace_position is None else int(replace_position.nonzero(as_tuple=True)[-1].max()) + 1
        q = rotate(q, torch.arange(end - T, end, device=h.device))
        k = rotate(k, torch.arange(L, device=h.device))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=False)  # bidirectional
        h = h + self.out(y.transpose(1, 2).reshape(B, T, C))
        return h + self.mlp(self.norm2(h)), present


class TinyCachedLM(PreTrainedModel):
    config_class = TinyCachedConfig

    def __init__(self, config):
        super().__init__(config)
        self.emb = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Layer(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.hidden_size)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)
        self.calls = []
        self.post_init()

    def forward(self, input_ids, attention_mask=None, past_key_values=None, use_cache=None, return_dict=None):
        return self._run(input_ids, past_key_values, use_cache)

    def _run(self, input_ids, past_key_values, use_cache, replace_position=None):
        if self.config.refuse_cache:
            assert past_key_values is None and not use_cache, "The kvcache is not supported for MDM."
        self.calls.append(input_ids.shape[1])
        if past_key_values:
            assert len(past_key_values) == len(self.layers)
        h = self.emb(input_ids)
        presents = [] if use_cache else None
        for i, layer in enumerate(self.layers):
            h, present = layer(h, None if past_key_values is None else past_key_values[i], use_cache,
                               replace_position)
            if use_cache:
                presents.append(present)
        return CausalLMOutputWithPast(logits=self.head(self.norm(h)), past_key_values=presents)


class TinyFastDllmLM(TinyCachedLM):
    def forward(self, input_ids, attention_mask=None, past_key_values=None, use_cache=None, return_dict=None,
                replace_position=None):
        return self._run(input_ids, past_key_values, use_cache, replace_position)


class TinyFastDreamLM(TinyCachedLM):
    def forward(self, input_ids, attention_mask=None, past_key_values=None, use_cache=None, return_dict=None,
                dual_cache=False, replace_position=None):
        return self._run(input_ids, past_key_values, use_cache, replace_position if dual_cache else None)
'''

CACHED_CLASSES = {"past": "TinyCachedLM", "replace": "TinyFastDllmLM", "dream": "TinyFastDreamLM"}


def cached_remote_code_dir(out: Path, style: str = "llada", forward: str = "replace", seed: int = 0,
                           layers: int = 2, hidden: int = 32, heads: int = 2, context: int = 64,
                           refuse_cache: bool = False) -> Path:
    """A remote-code model (auto_map) whose forward takes past_key_values, LLaDA's layout (style llada) or
    Dream's (style dream); forward: "past" (past_key_values and use_cache only), "replace" (also
    replace_position, as Fast-dLLM's LLaDA) or "dream" (also dual_cache and replace_position, as
    Fast-dLLM's Dream)."""
    out.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer(out)
    model_type = {"llada": "tiny_llada", "dream": "tiny_dream"}[style]
    auto_map = {"AutoConfig": "configuration_tiny.TinyCachedConfig",
                "AutoModel": f"modeling_tiny.{CACHED_CLASSES[forward]}"}
    cfg = {"model_type": model_type, "architectures": [CACHED_CLASSES[forward]], "vocab_size": len(tok),
           "hidden_size": hidden, "n_heads": heads, "n_layers": layers, "max_sequence_length": context,
           "mask_token_id": 4, "kv_layout": "heads" if style == "llada" else "flat", "refuse_cache": refuse_cache,
           "auto_map": auto_map}
    configuration = _config_source("TinyCachedConfig", model_type, _CACHED_CONFIG)
    return _save_remote_code(out, configuration, _CACHED_MODELING, cfg, seed)
