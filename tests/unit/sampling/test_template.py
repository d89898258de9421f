"""Template notation: █ and [___] mark positions to generate; a plain prompt has a masked tail."""
from __future__ import annotations

import pytest

from explorer.data.tokenizer import CharTokenizer
from explorer.sampling import blank_canvas, parse_template

TOK = CharTokenizer("abcdefghijklmnopqrstuvwxyz ,")
M = TOK.mask_id


def test_blanks_and_glyphs():
    c = parse_template("to [___] or█", TOK)
    assert c.length == 3 + 5 + 3 + 1 and c.n_generate == 6
    assert c.fixed.tolist() == [True] * 3 + [False] * 5 + [True] * 3 + [False]
    assert c.tokens[:3].tolist() == TOK.encode("to ") and (c.tokens[~c.fixed] == M).all()
    assert not c.is_prefix


def test_plain_prompt_is_padded_to_the_context_or_length():
    c = parse_template("abc", TOK, context=10)
    assert c.length == 10 and c.n_generate == 7 and c.is_prefix
    assert parse_template("abc", TOK, length=5, context=10).length == 5
    assert parse_template("a█c", TOK, context=10).length == 3  # gaps given: used as written
    assert parse_template("a█c", TOK, length=6, context=10).fixed.tolist() == [True, False, True] + [False] * 3


@pytest.mark.parametrize("template, kw, needle", [
    ("", {}, "empty"),
    ("abc", {"length": 3}, "nothing to generate"),
    ("abc", {}, "nothing to generate"),  # no context known, no length: nothing to pad
    ("a█" * 6, {"context": 10}, "context is 10"),
    ("abc", {"context": 2}, "context"),
    ("abcdef█", {"length": 4}, "length is 4"),
    ("hello World€!█", {}, "3 character"),
    ("a█", {"length": 0}, "positive integer"),
])
def test_errors_say_what_is_wrong(template, kw, needle):
    with pytest.raises(ValueError, match=needle):
        parse_template(template, TOK, **kw)


def test_unknown_characters_are_named_once_each():
    with pytest.raises(ValueError) as info:
        parse_template("HELLO █", TOK)
    assert "'H', 'E', 'L', 'O'" in str(info.value)


def test_blank_canvas():
    c = blank_canvas(4, M, context=8)
    assert c.n_generate == 4 and (c.tokens == M).all()
    with pytest.raises(ValueError, match="context of 8"):
        blank_canvas(9, M, context=8)
