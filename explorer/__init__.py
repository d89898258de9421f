"""mdlm-explorer: an interactive explorer for masked diffusion language models."""
__version__ = "0.1.0"


def load_checkpoint(name_or_path, device="cpu", **kwargs):
    """Load a checkpoint by name (checkpoints/<name>.safetensors) or path; see explorer.checkpoint."""
    from .checkpoint import load_checkpoint as _load

    return _load(name_or_path, device, **kwargs)


__all__ = ["load_checkpoint", "__version__"]
