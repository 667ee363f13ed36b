"""What a run streamed into its main answer, read back from its events (the chat's
``/chat/runs/{id}/text`` fragment): display, never projection."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def text_from_deltas(events: Iterable[tuple[str, dict[str, Any]]]) -> str:
    """The text a stretch of events streamed into the main instance's answer.

    ``message_delta`` events append; a ``run_error`` (stored as ``error`` before it was
    renamed) marked ``reset`` (a retried attempt)
    discards what the failed attempt had streamed, as the browser does live.
    Sub-instances' deltas are not the main answer.
    """
    parts: list[str] = []
    for type_, data in events:
        if (data.get("instance") or "main") != "main":
            continue
        if type_ == "message_delta":
            parts.append(str(data.get("text", "")))
        elif type_ in ("run_error", "error") and data.get("reset"):
            parts = []
    return "".join(parts)
