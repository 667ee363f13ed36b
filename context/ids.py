"""CTX-5: call ids every supported provider accepts, unique across one view."""

from __future__ import annotations

import re

# The strictest common pattern among the providers we send to (Anthropic-style ids are
# the narrowest); an id outside it is rewritten, never passed through.
PORTABLE_ID_RE = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")


def is_portable_id(value: object) -> bool:
    """True when ``value`` is a string every supported provider accepts as a call id."""
    return isinstance(value, str) and PORTABLE_ID_RE.fullmatch(value) is not None


class IdAllocator:
    """Hands out ``call_1``, ``call_2``, ... in view order.

    Numbering by position (rather than hashing the original id) keeps ids unique even when
    the records reuse one id many times, and keeps them stable from step to step as long as
    the start of the view does not change -- which is what provider prompt caches reward.
    """

    __slots__ = ("_next", "_prefix")

    def __init__(self, prefix: str = "call_", *, start: int = 0) -> None:
        self._prefix = prefix
        self._next = start  # ids already handed out by an earlier, settled part of the view

    @property
    def count(self) -> int:
        """How many ids have been handed out, counting ``start``."""
        return self._next

    def allocate(self) -> str:
        """Return the next fresh id."""
        self._next += 1
        return f"{self._prefix}{self._next}"
