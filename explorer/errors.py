"""Errors shared across layers (a leaf module: the checkpoint loader and explorer.hf both raise these)."""


class CheckpointError(ValueError):
    """A checkpoint or model is missing, unreadable, or not loadable; the message says which."""
