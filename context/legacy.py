"""CTX-40: the character-threshold policy of versions published before context_policy.

Old versions keep running and resuming exactly as before: the view keeps the leading
system messages and then the newest *whole* groups -- a user message, or an assistant
message with all of its tool results -- whose characters fit under a limit. A group is
never split, so the kept view is as valid as the one it came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context.records import is_text_part

DEFAULT_LEGACY_CHAR_LIMIT = 60_000


def _chars(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    size = len(content) if isinstance(content, str) else 0
    if isinstance(content, list):
        size += sum(len(p["text"]) for p in content if is_text_part(p))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        size += len(function.get("name") or "") + len(function.get("arguments") or "")
    return size


def message_groups(messages: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Split a view into groups: each tool message joins the assistant message before it."""
    groups: list[list[Mapping[str, Any]]] = []
    for message in messages:
        if message.get("role") == "tool" and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


@dataclass(frozen=True)
class LegacyCharPolicy:
    """Keep the newest whole groups under ``char_limit`` characters of text."""

    char_limit: int = DEFAULT_LEGACY_CHAR_LIMIT

    def __post_init__(self) -> None:
        if isinstance(self.char_limit, bool) or not isinstance(self.char_limit, int) or self.char_limit < 1:
            raise ValueError("char_limit must be a positive integer")

    def select(self, messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """Return the leading system messages plus the newest groups that fit.

        The newest group is always kept, even alone over the limit: dropping the current
        question would be worse than an oversized request, which the hard limit (CTX-39)
        stops before anything is sent.
        """
        lead = 0
        while lead < len(messages) and messages[lead].get("role") in ("system", "developer"):
            lead += 1
        groups = message_groups(messages[lead:])
        kept: list[list[Mapping[str, Any]]] = []
        used = 0
        for group in reversed(groups):
            size = sum(_chars(m) for m in group)
            if kept and used + size > self.char_limit:
                break
            kept.append(group)
            used += size
        return [*messages[:lead], *(m for group in reversed(kept) for m in group)]
