"""Tiny Hugging Face models written to a directory by the test, loaded through the real path:
native masked LMs (BERT, ModernBERT) with a tokenizer trained here, and a remote-code model written
here (configuration_*.py, modeling_*.py, auto_map), LLaDA-style or Dream-style. Never the network."""
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


_CONFIGURATION = '''
from transformers import PretrainedConfig


class TinyDiffConfig(PretrainedConfig):
    model_type = "{model_type}"

    def __init__(self, vocab_size=80, hidden_size=32, max_sequence_length=64, mask_token_id=None, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_sequence_length = max_sequence_length
        self.mask_token_id = mask_token_id
        super().__init__(**kwargs)
'''

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
    from transformers import AutoConfig, AutoModel

    out.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer(out)
    model_type = {"llada": "tiny_llada", "dream": "tiny_dream"}[style]
    (out / "configuration_tiny.py").write_text(_CONFIGURATION.format(model_type=model_type))
    (out / "modeling_tiny.py").write_text(_MODELING)
    cfg = {"model_type": model_type, "architectures": ["TinyDiffModel"], "vocab_size": len(tok),
           "hidden_size": 32, "max_sequence_length": 64, "mask_token_id": mask_id,
           "auto_map": {"AutoConfig": "configuration_tiny.TinyDiffConfig", "AutoModel": "modeling_tiny.TinyDiffModel"}}
    (out / "config.json").write_text(json.dumps(cfg))
    torch.manual_seed(seed)
    model = AutoModel.from_config(AutoConfig.from_pretrained(out, trust_remote_code=True), trust_remote_code=True)
    model.save_pretrained(out)
    cfg_saved = json.loads((out / "config.json").read_text())
    cfg_saved["auto_map"] = cfg["auto_map"]  # save_pretrained may rewrite it with module paths
    (out / "config.json").write_text(json.dumps(cfg_saved))
    return out


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
