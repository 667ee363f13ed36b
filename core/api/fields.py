"""Serializer fields shared by the API."""
from __future__ import annotations

from rest_framework import serializers

from core.api.parsers import MAX_JSON_DEPTH, JSONTooDeep, json_depth_exceeds, json_loads_bounded

# The largest id a database column holds (signed 64 bits). SQLite cannot even bind a larger
# Python int, so a bigger number typed by a client is refused as input, never sent.
MAX_ID = 2**63 - 1
_MAX_ID_DIGITS = len(str(MAX_ID))


def id_from_text(raw: str) -> int | None:
    """A non-negative id typed as text, or None. ASCII digits only: ``"²".isdigit()`` is True;
    and short enough to convert, since ``int()`` refuses more than 4,300 digits with a ValueError."""
    if not raw.isascii() or not raw.isdigit():
        return None
    digits = raw.lstrip("0") or "0"
    if len(digits) > _MAX_ID_DIGITS:
        return None
    value = int(digits)
    return value if value <= MAX_ID else None


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers, booleans and objects instead of stringifying them."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class BoundedJSONField(serializers.JSONField):
    """A JSONField whose value nests at most ``MAX_JSON_DEPTH`` levels, however it came:
    decoded here from a form or multipart field's text, or already parsed from a JSON body.
    Past the bound it is a validation error naming the field, never a RecursionError."""

    default_error_messages = {"too_deep": f"Must be JSON nested at most {MAX_JSON_DEPTH} levels deep."}

    def to_internal_value(self, data):
        if self.binary or getattr(data, "is_json_string", False):
            try:
                return json_loads_bounded(data.decode() if isinstance(data, bytes) else data)
            except JSONTooDeep:
                self.fail("too_deep")
            except (TypeError, ValueError):
                self.fail("invalid")
        if json_depth_exceeds(data, MAX_JSON_DEPTH):
            self.fail("too_deep")
        return super().to_internal_value(data)
