"""Every list of valid names in one place: the CLI's choices, the configs' checks and the dashboard's
selectors all read these (a leaf module: importing it loads nothing, so `--help` stays fast)."""
from __future__ import annotations

KINDS = ("diffusion", "ar")  # bidirectional denoiser, causal baseline
TIME_CONDITIONING = ("none", "adaln")
WEIGHTINGS = ("uniform", "elbo")  # diffusion loss: mean masked CE, or the 1/t-weighted ELBO
# diffusion forward process: tokens become [MASK] (MDLM), or are redrawn uniformly from the vocabulary
# (uniform-state: UDLM, Duo). A checkpoint's metadata names its process; a loader refuses any other name.
PROCESSES = ("masked", "uniform")
PROCESS_NAMES = {"masked": "masked", "uniform": "uniform-state"}  # as the pages and messages name them
LR_SCHEDULES = ("cosine", "linear", "constant")
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")
# The sampler's registries (sampling/strategies.py, sampling/schedules.py) are keyed by exactly these
# names; they check it when imported, so a name cannot be offered here that the sampler cannot build.
STRATEGIES = ("confidence", "margin", "entropy", "random", "left_to_right")
SCHEDULES = ("remaining", "linear", "cosine")
# Older names still accepted from links, the CLI and saved sweeps, read as the name they map to
SCHEDULE_ALIASES = {"seed": "remaining"}
HF_FAMILIES = ("mlm", "llada", "dream", "diffusion_gemma", "causal")  # BERT-family masked LMs; LLaDA-style;
# Dream-style (shifted logits); DiffusionGemma-style block diffusion (uniform-state noise, a cache of what precedes
# the block); causal LMs (GPT-2, Llama ...), which judge text (gen-PPL) and are not sampled here
HF_DTYPES = ("bf16", "fp16", "fp32")
# block diffusion's key/value cache (Fast-dLLM): none; the committed prefix; the prefix and what follows the block
CACHES = ("none", "prefix", "dual")
SUPPRESS_EOS = ("off", "logits", "confidence", "both")  # LLaDA: EOS / end-of-turn never proposed, or committed last
# `run.py serve --scheduler ADDRESS` hands the Dask scheduler's address to the app in this variable; here so
# that a sweep can tell whether there is a cluster without importing explorer.cluster (and Dask)
SCHEDULER_ENV = "MDLM_EXPLORER_SCHEDULER"
