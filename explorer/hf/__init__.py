"""Hugging Face models: masked LMs, LLaDA- and Dream-style diffusion LMs and DiffusionGemma-style block
diffusion models behind the same `model(x, t)` contract, tokenizer interface and metadata as a shipped checkpoint."""
from .source import FAMILIES, HFOptions, HFSource, is_hf_spec, parse_source

__all__ = ["FAMILIES", "HFOptions", "HFSource", "is_hf_meta", "is_hf_spec", "parse_source", "load_hf_model"]


def is_hf_meta(meta) -> bool:
    """Whether a loaded model's metadata is a Hugging Face model's (hf/model.py's _meta), trained elsewhere,
    not a checkpoint of this project (which stores its own config, corpus and training run)."""
    return "hf_model_type" in (meta or {})


def load_hf_model(spec, device="cpu", options=None):
    """Load `spec` (`hf:ORG/NAME[@rev]` or a local model directory); see explorer.hf.model."""
    from .model import load_hf_model as _load

    return _load(spec, device, options)
