"""Character-level tokenizer with a [MASK] id; its vocabulary travels inside every checkpoint."""
from __future__ import annotations

from typing import Iterable, Sequence

MASK_GLYPH = "█"  # how [MASK] is rendered, and how templates mark a position to generate


class UnknownCharacterError(ValueError):
    """Raised by encode() for characters outside the vocabulary; `.chars` lists them."""

    def __init__(self, chars: Sequence[str]):
        self.chars = list(chars)
        shown = ", ".join(repr(c) for c in self.chars[:10]) + (" ..." if len(self.chars) > 10 else "")
        super().__init__(f"{len(self.chars)} character(s) not in the model's vocabulary: {shown}")


def is_subword(tokenizer) -> bool:
    """True for a tokenizer whose positions are subword tokens (a Hugging Face model's), False for the
    char tokenizer, a mock without one, or None: the views count and draw positions by it."""
    return getattr(tokenizer, "kind", "chars") == "tokens"


class CharTokenizer:
    """ids 0..n-1 are the characters in the given order; id n is [MASK]."""

    kind = "chars"  # one position per character (explorer.hf's tokenizer says "tokens")

    def __init__(self, chars: Iterable[str]):
        chars = list(chars)
        if len(set(chars)) != len(chars):
            raise ValueError("tokenizer characters must be unique")
        if any(len(c) != 1 for c in chars):
            raise ValueError("tokenizer entries must be single characters")
        if MASK_GLYPH in chars:
            raise ValueError(f"{MASK_GLYPH!r} is reserved for [MASK] and cannot be a vocabulary character")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.mask_id = len(chars)
        self.vocab_size = len(chars) + 1

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        return cls(sorted(set(text)))

    def unknown_chars(self, text: str) -> list[str]:
        """Distinct characters of `text` the vocabulary lacks, in order of first appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.stoi))

    def encode(self, text: str) -> list[int]:
        bad = self.unknown_chars(text)
        if bad:
            raise UnknownCharacterError(bad)
        return [self.stoi[c] for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.mask_id:
                out.append(MASK_GLYPH)
            elif 0 <= i < self.mask_id:
                out.append(self.chars[i])
            else:
                raise ValueError(f"token id {i} outside vocabulary of {self.vocab_size}")
        return "".join(out)

    def glyphs(self):
        """(V,) object array: id -> its character, [MASK] -> █ (what the views draw at a position).
        One array per tokenizer: the views send it to the browser only when it is another one."""
        if getattr(self, "_glyphs", None) is None:
            import numpy as np

            self._glyphs = np.array(list(self.chars) + [MASK_GLYPH], dtype=object)
        return self._glyphs

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        return list(self.decode(ids))

    def to_dict(self) -> dict:
        return {"type": "char", "chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, d: dict) -> "CharTokenizer":
        if d.get("type") != "char" or not isinstance(d.get("chars"), str):
            raise ValueError("tokenizer metadata must be {'type': 'char', 'chars': str}")
        return cls(list(d["chars"]))

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size}, mask_id={self.mask_id})"
