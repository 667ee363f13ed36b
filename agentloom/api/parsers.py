"""The API's JSON parser: DRF's, bounded in depth.

Python's JSON decoder recurses once per nesting level, so 200 KB of ``[`` raises
``RecursionError`` (not the ``ValueError`` DRF turns into a 400), and a body nested a few
hundred levels deep parses but breaks whatever walks it later (pickling for encryption,
serializers, redaction). Bodies are therefore refused past ``MAX_JSON_DEPTH`` levels —
far more than any request of this API has (an imported transcript is about six deep).
"""
from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_JSON_DEPTH = 64


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
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


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep.") from None
        if json_depth_exceeds(data, MAX_JSON_DEPTH):
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep.")
        return data
