"""A transformers tokenizer behind the interface of the char tokenizer (encode, decode, mask_id,
vocab_size), plus what subword tokens need: each token's display string and the special ids."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..data.tokenizer import MASK_GLYPH

# How byte-level BPE (GPT-2, LLaDA, Dream) and SentencePiece write a leading space and a newline
_SPACE_MARKS = {"Ġ": " ", "▁": " ", "Ċ": "\n", "ĉ": "\t"}


def display_token(piece: str, wordpiece: bool = False) -> str:
    """A token as text: BPE's and SentencePiece's space marks as spaces; WordPiece's ## continuation
    dropped and its word starts given the space its decoder puts before them."""
    if wordpiece:
        if piece.startswith("##"):
            return piece[2:]
        return piece if piece.startswith("[") and piece.endswith("]") else " " + piece
    return "".join(_SPACE_MARKS.get(ch, ch) for ch in piece)


class HFTokenizer:
    """mask_id is the model's (-1 for a causal judge, which has none); vocab_size is the model's logits
    width (it may exceed the tokenizer's length: ids past it decode to '' and are never a useful proposal)."""

    kind = "tokens"  # positions are model tokens, not characters

    def __init__(self, tok, mask_id: int, vocab_size: int):
        self.tok = tok
        self.mask_id = int(mask_id)
        self.vocab_size = int(vocab_size)
        self.special_ids = sorted({int(i) for i in tok.all_special_ids if 0 <= int(i) < vocab_size} - {self.mask_id})
        eos = [tok.eos_token_id] + [tok.convert_tokens_to_ids(t) for t in ("<|eot_id|>", "<|im_end|>", "<|endoftext|>")
                                    if t in tok.get_vocab()]
        self.eos_ids = sorted({int(i) for i in eos if i is not None and 0 <= int(i) < vocab_size})
        self._glyphs = None

    def unknown_chars(self, text: str) -> list[str]:
        return []  # a subword tokenizer writes any text (unknown bytes become its [UNK] or byte tokens)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Iterable[int]) -> str:
        """Text with every [MASK] as █; the runs between masks decoded by the tokenizer (spacing right)."""
        out, run = [], []
        for i in (int(i) for i in ids):
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} outside vocabulary of {self.vocab_size}")
            if i == self.mask_id:
                out.append(self.tok.decode(run)) if run else None
                out.append(MASK_GLYPH)
                run = []
            else:
                run.append(i)
        if run:
            out.append(self.tok.decode(run))
        return "".join(out)

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        glyphs = self.glyphs()
        return [str(glyphs[int(i)]) for i in ids]

    def glyphs(self) -> np.ndarray:
        """(V,) object array: each id's display string, [MASK] as █ (computed once)."""
        if self._glyphs is None:
            pieces = [p or "" for p in self.tok.convert_ids_to_tokens(list(range(min(len(self.tok), self.vocab_size))))]
            wordpiece = any(p.startswith("##") for p in pieces)
            g = np.array([display_token(p, wordpiece) for p in pieces] + [""] * (self.vocab_size - len(pieces)),
                         dtype=object)
            if self.mask_id >= 0:
                g[self.mask_id] = MASK_GLYPH
            self._glyphs = g
        return self._glyphs

    def render_chat(self, message: str) -> str:
        """The user's `message` in the model's chat template, with the assistant's turn opened."""
        if not getattr(self.tok, "chat_template", None):
            raise ValueError("this model's tokenizer has no chat template (not an instruct model?); "
                             "use a plain prompt")
        return self.tok.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                            add_generation_prompt=True)

    def to_dict(self) -> dict:
        return {"type": "hf", "name": getattr(self.tok, "name_or_path", ""), "mask_id": self.mask_id,
                "vocab_size": self.vocab_size}

    def __repr__(self):
        return f"HFTokenizer({type(self.tok).__name__}, vocab_size={self.vocab_size}, mask_id={self.mask_id})"
