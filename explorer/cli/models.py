"""The options every command shares for Hugging Face models (`--checkpoint hf:ORG/NAME` or a model
directory): remote code only on request, and an override for each setting read from the model."""
from __future__ import annotations

import argparse

from . import CLIError, boolean, int_in
from ..names import HF_DTYPES, HF_FAMILIES

CHECKPOINT_HELP = ("checkpoint name in checkpoints/, a .safetensors path, a Hugging Face model hf:ORG/NAME[@rev], "
                   "or a local transformers model directory")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Hugging Face models")
    g.add_argument("--trust-remote-code", action="store_true",
                   help="run the modelling code a model ships (LLaDA, Dream); never done without this flag")
    g.add_argument("--hf-family", default=None, choices=HF_FAMILIES,
                   help="mlm (BERT-family), llada or dream; default: read from the model's config")
    g.add_argument("--mask-id", type=int_in(0), default=None, metavar="ID",
                   help="the [MASK] token id; default: the model's config or tokenizer (LLaDA: 126336)")
    g.add_argument("--shift-logits", type=boolean, default=None, metavar="true|false",
                   help="logits[:, i] from position i-1 (AR-adapted models); default: true for dream only")
    g.add_argument("--dtype", default=None, choices=HF_DTYPES,
                   help="weights' precision; default bf16 on CUDA, fp32 on CPU")


def hf_options(args, allowed=None, for_judge: bool = False):
    """HFOptions from parsed arguments (a served dashboard passes its operator's list as `allowed`).
    A judge takes only --trust-remote-code and --dtype: the overrides describe the diffusion model."""
    from ..hf import HFOptions

    if for_judge:
        return HFOptions(trust_remote_code=bool(getattr(args, "trust_remote_code", False)),
                         dtype=getattr(args, "dtype", None))
    return HFOptions(trust_remote_code=bool(getattr(args, "trust_remote_code", False)),
                     family=getattr(args, "hf_family", None), mask_id=getattr(args, "mask_id", None),
                     shift_logits=getattr(args, "shift_logits", None), dtype=getattr(args, "dtype", None),
                     allowed=allowed)


OVERRIDES = (("--hf-family", "hf_family"), ("--mask-id", "mask_id"), ("--shift-logits", "shift_logits"))


def check_overrides_apply(args, model) -> None:
    """--hf-family, --mask-id and --shift-logits describe a Hugging Face model: given for one of this
    project's checkpoints (whose metadata says all three) they would be ignored, so they are refused.

    Args: args, the parsed command line; model, the loaded --checkpoint. Raises CLIError."""
    from ..hf import is_hf_meta

    given = [flag for flag, name in OVERRIDES if getattr(args, name, None) is not None]
    if given and not is_hf_meta(getattr(model, "meta", None)):
        raise CLIError(f"{', '.join(given)}: for Hugging Face models only; {args.checkpoint} is a checkpoint of "
                       f"this project, which says its own")
