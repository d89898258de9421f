"""Template notation (as in the "Generation: Iterative Unmasking" notebook and the guide "Let's Build a
Diffusion LM"): which canvas positions are given and which are generated.

    "To be█████that is"        █ marks one position to generate
    "To [___] or not to [___]"  [___] stands for five of them
    "ROMEO:"                   a plain prompt: a template whose tail is masked

A position is one token of the model: a character for the shipped models, a subword token for a
Hugging Face model (its tokenizer encodes each run of fixed text). Everything else is a fixed character, never changed and never re-masked. The dashboard calls
`parse_template` to validate what the user typed before it starts a run, so every error is a
`ValueError` whose message can be shown as it is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..data.tokenizer import MASK_GLYPH

BLANK = "[___]"
BLANK_WIDTH = 5


@dataclass(frozen=True)
class Canvas:
    """The starting canvas of one sample: token ids with [MASK] where text is generated."""

    tokens: np.ndarray  # (L,) int64, mask_id at positions to generate
    fixed: np.ndarray  # (L,) bool, True where the template gives the character
    template: str | None = None  # what parse_template was given: parsing it again at this length gives
    # this canvas exactly (decoding the tokens need not, for a subword tokenizer)

    @property
    def length(self) -> int:
        return int(self.tokens.shape[0])

    @cached_property
    def n_generate(self) -> int:
        # kept: the sampler reads it at every step (a frozen dataclass still takes a cached_property)
        return int((~self.fixed).sum())

    @property
    def is_prefix(self) -> bool:
        """True when every fixed position precedes every generated one (what an AR model can do)."""
        first_gap = int(np.argmin(self.fixed)) if not self.fixed.all() else self.length
        return not self.fixed[first_gap:].any()


def expand_blanks(template: str) -> str:
    """Replace every [___] by five █, so one character is one position."""
    return template.replace(BLANK, MASK_GLYPH * BLANK_WIDTH)


def _check_length(n: int, length: int | None, context: int | None) -> int:
    if context is not None and n > context:  # first: no length could fix this one
        raise ValueError(f"the template is {n} positions but the model's context is {context}; "
                         f"shorten the template")
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(f"length must be a positive integer, got {length!r}")
        if length < n:
            raise ValueError(f"the template is {n} positions long but length is {length}; "
                             f"raise length or shorten the template")
    if context is not None and max(n, length or 0) > context:
        raise ValueError(f"the canvas would be {max(n, length or 0)} positions but the model's context "
                         f"is {context}; shorten the template or the length")
    return length if length is not None else n


def blank_canvas(length: int, mask_id: int, context: int | None = None) -> Canvas:
    """A canvas with every position to generate (no template)."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if context is not None and length > context:
        raise ValueError(f"length {length} exceeds the model's context of {context}")
    return Canvas(np.full(length, mask_id, dtype=np.int64), np.zeros(length, dtype=bool))


def parse_template(template: str, tokenizer, *, length: int | None = None,
                   context: int | None = None) -> Canvas:
    """Parse a template into a Canvas.

    length: canvas length; the template is padded with █ up to it. Without it, a template with gaps
    is used as written and a plain prompt (no gaps) is padded to `context`, the model's context.
    Raises ValueError for an empty template, unknown characters (named), a canvas longer than the
    context, or a template that leaves nothing to generate.
    """
    if not isinstance(template, str) or template == "":
        raise ValueError("the template is empty; type a prompt, or use █ / [___] for positions to generate")
    text = expand_blanks(template)
    bad = tokenizer.unknown_chars(text.replace(MASK_GLYPH, ""))
    if bad:
        shown = ", ".join(repr(c) for c in bad[:10]) + (" ..." if len(bad) > 10 else "")
        raise ValueError(f"the template has {len(bad)} character(s) the model does not know: {shown}")
    ids, fixed = _encode(text, tokenizer)
    if length is None and MASK_GLYPH not in text and context is not None:
        length = max(context, len(ids))  # plain prompt: masked tail up to the context
    total = _check_length(len(ids), length, context)
    if fixed.all() and total == len(ids):
        raise ValueError("the template leaves nothing to generate; add █ or [___], or raise length")
    pad = total - len(ids)
    ids = np.concatenate([ids, np.full(pad, tokenizer.mask_id, dtype=np.int64)])  # (L,)
    fixed = np.concatenate([fixed, np.zeros(pad, dtype=bool)])  # (L,)
    return Canvas(ids, fixed, template)


def _encode(text: str, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(ids, fixed) of an expanded template: each █ one position, each run of fixed text encoded on its
    own by the model's tokenizer (a character each for the char tokenizer; subword tokens otherwise)."""
    ids, fixed = [], []
    for part in re.split(f"({MASK_GLYPH}+)", text):
        if part.startswith(MASK_GLYPH):
            ids += [tokenizer.mask_id] * len(part)
            fixed += [False] * len(part)
        elif part:
            encoded = tokenizer.encode(part)
            ids += encoded
            fixed += [True] * len(encoded)
    return np.array(ids, dtype=np.int64), np.array(fixed, dtype=bool)


def as_chat(prompt: str, tokenizer) -> str:
    """`prompt` as the user's message in the tokenizer's chat template, ready for the answer (an instruct
    model's prompt: the generated positions follow it). ValueError where there is no chat template."""
    render = getattr(tokenizer, "render_chat", None)
    if render is None:
        raise ValueError("chat prompts need a Hugging Face model whose tokenizer has a chat template")
    if MASK_GLYPH in prompt or BLANK in prompt:
        raise ValueError("a chat prompt is the user's message: the answer after it is generated, so it "
                         "takes no █ or [___]")
    return render(prompt)
