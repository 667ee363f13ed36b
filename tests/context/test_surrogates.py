"""Lone surrogates replaced with U+FFFD (``context.surrogates``): literal cases and properties.

A JSON ``\\ud800`` escape decodes to a lone surrogate, which no page, API answer or request
body can encode to UTF-8 (issue #44 item 4). Pairs of surrogate code points are joined into
the character they encode, as a JSON decoder joins an escaped pair.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context.surrogates import (
    json_loads_clean,
    may_hold_surrogates,
    replace_lone_surrogate_escapes,
    replace_lone_surrogates,
)

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
# Text that mixes every plane with surrogate code points, alone and in pairs.
ANY_TEXT = st.text(st.one_of(st.characters(), SURROGATES), max_size=40)
CLEAN_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def json_like(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text)
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(text, inner, max_size=4)),
        max_leaves=20)


def surrogate_free(value: Any) -> bool:
    """Whether every string in ``value`` (keys too) encodes to UTF-8: the renderers' need."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


@pytest.mark.parametrize("given_text, expected", [
    ("a\ud800b", "a\ufffdb"),
    ("\udc00", "\ufffd"),
    ("\ud83d\ude00", "😀"),  # a pair of code points: joined, as a JSON decoder joins an escaped pair
    ("\ude00\ud83d", "\ufffd\ufffd"),  # a low one before a high one is no pair
    ("\ud83d\ud83d\ude00", "\ufffd😀"),
    ("x\ud800", "x\ufffd"),  # a high one at the very end
    ("Grüße 😀 안녕", "Grüße 😀 안녕"),
])
def test_each_lone_surrogate_becomes_one_replacement_character(given_text, expected):
    assert replace_lone_surrogates(given_text) == expected


def test_keys_and_values_at_any_depth_and_the_clean_parts_are_not_copied():
    clean = {"kept": ["as", "it", "was"]}
    value = {"a\ud800": [{"b": "\udfff"}, clean], "n": 1, "t": ("\ud800", None)}
    assert replace_lone_surrogates(value) == {"a\ufffd": [{"b": "\ufffd"}, clean], "n": 1, "t": ("\ufffd", None)}
    assert replace_lone_surrogates(value)["a\ufffd"][1] is clean
    assert replace_lone_surrogates(clean) is clean


def test_a_value_deeper_than_the_interpreter_stack_is_walked():
    deep: list[Any] = ["\ud800"]
    for _ in range(5_000):
        deep = [deep]
    out = replace_lone_surrogates(deep)
    for _ in range(5_000):
        out = out[0]
    assert out == ["\ufffd"]


@given(ANY_TEXT)
def test_any_text_encodes_afterwards_and_keeps_its_valid_characters(text):
    out = replace_lone_surrogates(text)
    out.encode("utf-8")
    assert out.replace("\ufffd", "") == "".join(ch for ch in out if ch != "\ufffd")
    if not has_surrogate(text):
        assert out is text
    # Each surrogate code point is either one half of a joined pair or one U+FFFD.
    joined = len(text) - len(out)
    replaced = out.count("\ufffd") - text.count("\ufffd")
    assert 2 * joined + replaced == sum(1 for ch in text if 0xD800 <= ord(ch) <= 0xDFFF)


@given(json_like(ANY_TEXT))
def test_any_json_value_encodes_afterwards(value):
    assert surrogate_free(replace_lone_surrogates(value))


@given(json_like(CLEAN_TEXT))
def test_a_value_with_no_surrogate_comes_back_as_the_same_object(value):
    assert replace_lone_surrogates(value) is value


def code_units(text: str) -> str:
    """``text`` with each astral character written as its two UTF-16 surrogate code points."""
    return "".join(
        chr(0xD800 + ((ord(ch) - 0x10000) >> 10)) + chr(0xDC00 + ((ord(ch) - 0x10000) & 0x3FF))
        if ord(ch) >= 0x10000 else ch for ch in text)


@given(CLEAN_TEXT)
def test_valid_pairs_are_joined_into_the_characters_they_encode(text):
    assert replace_lone_surrogates(code_units(text)) == text


@given(json_like(ANY_TEXT))
def test_the_hint_never_misses_a_surrogate_in_json_text_or_in_a_pickle(value):
    holds = not surrogate_free(value)
    if holds:
        assert may_hold_surrogates(json.dumps(value))  # ASCII: every surrogate an escape
        assert may_hold_surrogates(json.dumps(value, ensure_ascii=False))
        assert may_hold_surrogates(json.dumps(value).encode())
        assert may_hold_surrogates(pickle.dumps(value))  # how the encrypted columns store values
    assert json_loads_clean(json.dumps(value)) == json.loads(json.dumps(replace_lone_surrogates(value)))


@pytest.mark.parametrize("raw", ['{"a": "plain"}', '{"a": "\\u00e9\\ud7ff"}', b'{"a": "\xed\x9f\xbf"}', "안녕"])
def test_the_hint_stays_quiet_on_text_that_cannot_hold_one(raw):
    assert not may_hold_surrogates(raw)


@pytest.mark.parametrize("text, expected", [
    ('{"q": "\\ud800"}', '{"q": "\\ufffd"}'),
    ('{"q": "\\uDFFF!"}', '{"q": "\\ufffd!"}'),
    ('{"q": "\\ud83d\\ude00"}', '{"q": "\\ud83d\\ude00"}'),  # an escaped pair is one valid character
    ('{"q": "\\udc00\\udc01"}', '{"q": "\\ufffd\\ufffd"}'),
    ('{"q": "\\\\ud800"}', '{"q": "\\\\ud800"}'),  # an escaped backslash, then plain text
    ('{"q": "\\\\\\ud800"}', '{"q": "\\\\\\ufffd"}'),
    ('{"q": "\\ud800', '{"q": "\\ufffd'),  # cut arguments are kept as they came (CTX-6), escapes replaced
    ('{"q": "\ud800"}', '{"q": "\ufffd"}'),  # the code point itself
])
def test_escapes_in_json_text_are_replaced_and_the_rest_kept_byte_for_byte(text, expected):
    assert replace_lone_surrogate_escapes(text) == expected


@given(json_like(ANY_TEXT))
def test_json_text_decodes_to_valid_text_once_its_escapes_are_replaced(value):
    text = json.dumps(value)
    out = replace_lone_surrogate_escapes(text)
    assert surrogate_free(json.loads(out))
    if surrogate_free(value):
        assert out is text
