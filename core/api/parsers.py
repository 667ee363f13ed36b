"""How deep request JSON may nest, wherever it is decoded: DRF's JSON parser, JSON text in
form and multipart fields, JSON text inside a value (an imported transcript).

Python's JSON decoder recurses once per nesting level, so 200 KB of ``[`` raises
``RecursionError`` (not the ``ValueError`` DRF turns into a 400), and a body nested a few
hundred levels deep parses but breaks whatever walks it later (pickling for encryption,
serializers, redaction). Nesting is therefore refused past ``MAX_JSON_DEPTH`` levels —
far more than any request of this API has (an imported transcript is about six deep).

A form or multipart body has no nesting of its own, but a JSON field of a serializer
decodes its text (``context_policy=[[[…``): :class:`core.api.fields.BoundedJSONField`
decodes it with :func:`json_loads_bounded`, as a service does with JSON text it is handed.

Both also replace lone surrogates (``context.surrogates``): JSON's ``\\ud800`` escape
decodes to one, which no page, answer or request body can encode. A form's own text
cannot hold one (Django decodes it from UTF-8 bytes, invalid ones replaced).
"""
from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from context.surrogates import may_hold_surrogates, replace_lone_surrogates

MAX_JSON_DEPTH = 64
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"


class JSONTooDeep(ValueError):
    """JSON text or a decoded value nested past the bound (a ValueError, as any bad JSON is)."""


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def json_check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> Any:
    """``value`` itself, or JSONTooDeep when it nests more than ``limit`` levels."""
    if json_depth_exceeds(value, limit):
        raise JSONTooDeep(TOO_DEEP)
    return value


def json_loads_bounded(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting past ``limit`` with JSONTooDeep (a ValueError),
    never a RecursionError, and never returns a value too deep to store or walk."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONTooDeep(TOO_DEEP) from None
    json_check_depth(value, limit)
    return replace_lone_surrogates(value) if may_hold_surrogates(text) else value


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        # Read whole (as the JSON decoder does anyway) so that the raw text can say whether
        # the value may hold a surrogate: a body with no ``\u`` escape needs no walk.
        raw = stream.read() if stream is not None else b""
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - {TOO_DEEP}.") from None
        if json_depth_exceeds(data, MAX_JSON_DEPTH):
            raise ParseError(f"JSON parse error - {TOO_DEEP}.")
        return replace_lone_surrogates(data) if may_hold_surrogates(raw) else data
