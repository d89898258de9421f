"""Data: the char tokenizer with [MASK], the synthetic pattern generator, text corpora."""
from .corpus import (SHAKESPEARE_SHA256, SHAKESPEARE_URL, CorpusError, PatternCorpus, TextCorpus,
                     load_corpus, word_set)
from .patterns import generate_patterns, pattern_tokenizer
from .tokenizer import MASK_GLYPH, CharTokenizer, UnknownCharacterError

__all__ = ["CharTokenizer", "UnknownCharacterError", "MASK_GLYPH", "generate_patterns", "pattern_tokenizer",
           "TextCorpus", "PatternCorpus", "load_corpus", "CorpusError", "word_set",
           "SHAKESPEARE_URL", "SHAKESPEARE_SHA256"]
