"""Serializer fields shared by the API."""
from __future__ import annotations

from rest_framework import serializers

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
