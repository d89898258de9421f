"""The text Inspect shows the model and its random mask: unknown characters left out, the forward
process's mask at ratio t from a seed, and the mask-fraction check (no model, no Panel)."""
from __future__ import annotations

import numpy as np
import torch

from ....data.tokenizer import is_subword
from ....diffusion import forward_mask
from ....metrics import is_uniform, masked_fraction_vs_t, uniform_noise_tokens
from ....sampling.uniform import noise_ids
from ...runtime.cache import INSPECT

FRACTION_TS = tuple(round(0.05 * i, 2) for i in range(21))
FRACTION_DRAWS = 256  # rows per t of the mask-fraction check


def prepare_text(tokenizer, text: str, context: int) -> tuple[str, list[str]]:
    """The text the model is shown and what was changed: characters the tokenizer does not know are
    left out (named in the notice), and the text is cut to the model's context."""
    notices = []
    unknown = tokenizer.unknown_chars(text)
    if unknown:
        drop = set(unknown)
        text = "".join(c for c in text if c not in drop)
        names = ", ".join(repr(c) for c in unknown[:12]) + (" …" if len(unknown) > 12 else "")
        notices.append(f"left out {len(unknown)} character(s) this model does not know: {names}")
    if is_subword(tokenizer):  # a subword model: its context counts tokens
        ids = tokenizer.encode(text)
        if len(ids) > context:
            notices.append(f"the text has {len(ids)} tokens but the model sees at most {context}: "
                           f"only the first {context} are used")
            text = tokenizer.decode(ids[:context])
        return text, notices
    if len(text) > context:
        notices.append(f"the text has {len(text)} characters but the model sees at most {context}: "
                       f"only the first {context} are used")
        text = text[:context]
    return text, notices


def pieces(model, text: str) -> list[str]:
    """`text` as the model's positions: its characters, or a Hugging Face model's token strings."""
    tok = model.tokenizer
    return tok.token_strings(tok.encode(text)) if is_subword(tok) else list(text)


def positions(model, text: str) -> int:
    """Positions `text` takes on the model's canvas."""
    return len(pieces(model, text))


def draw_mask(length: int, t: float, seed: int) -> np.ndarray:
    """(length,) bool: which positions are masked at ratio t, drawn exactly as the forward process does
    (explorer.diffusion.forward_mask, as metrics.topk_predictions draws it). One uniform per position
    from `seed`, masked where u < t: the masks of one seed are nested as t grows."""
    g = torch.Generator().manual_seed(int(seed))
    return forward_mask(torch.zeros(1, length, dtype=torch.long), float(t), mask_id=1, generator=g)[1][0].numpy()


def noise_tokens(model) -> int | None:
    """How many tokens a uniform-state model's noise draws from (its sampler's noise_ids: our own models'
    ids below [MASK]); None for a masked model."""
    return noise_ids(model) if model is not None and is_uniform(model) else None


def fraction_check(length: int, seed: int, n_tokens: int | None = None):
    """metrics.masked_fraction_vs_t over FRACTION_DRAWS rows per t (cached: it depends on no model, only
    on the process: n_tokens for a uniform-state one, whose fraction is of the tokens the noise changed)."""
    return INSPECT.get_or_make(("fraction", length, seed, n_tokens),
                               lambda: masked_fraction_vs_t(FRACTION_TS, length=length, n=FRACTION_DRAWS, seed=seed,
                                                            n_tokens=n_tokens))


def draw_noised(model, text: str, t: float, seed: int) -> tuple[list[str], np.ndarray]:
    """A uniform-state model's view of `text` at t: (what each position shows, which of them the noise
    changed), drawn as metrics.topk_predictions draws it from the same seed (the positions of draw_mask,
    their tokens from metrics.uniform_noise_tokens): the forward view and the predictions agree."""
    tok = model.tokenizer
    ids = torch.tensor(tok.encode(text), dtype=torch.long)
    redrawn = torch.from_numpy(draw_mask(len(ids), t, seed))
    xt = torch.where(redrawn, uniform_noise_tokens(len(ids), seed, model.config.mask_id)[0], ids)
    return [tok.decode([i]) for i in xt.tolist()], (xt != ids).numpy()
