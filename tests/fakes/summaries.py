"""Telling summary requests apart, as a fake provider must: both forms of CTX-34/46.

A summary request in the transcript form starts with the summarizer's system message and
carries the conversation as notes in its last message; one in the cached form (CTX-46) is
the action request itself followed by the summarizing instruction. ``summary_input`` is
what a summarizer reads in either form (OpenAI-shaped messages: the Anthropic bridge
hands its handlers that shape too).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from context.compaction import SUMMARIZER_SYSTEM
from context.compaction.prompt import CACHED_SUMMARY_HEADER


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return ""


def is_cached_summary(messages: Sequence[Mapping[str, Any]]) -> bool:
    """The cached form: its last message is the summarizing instruction."""
    return bool(messages) and messages[-1].get("role") == "user" and (
        CACHED_SUMMARY_HEADER in _text(messages[-1].get("content")))


def is_summary(messages: Sequence[Mapping[str, Any]]) -> bool:
    """A summary request in either form."""
    return bool(messages) and (messages[0].get("content") == SUMMARIZER_SYSTEM or is_cached_summary(messages))


def summary_input(messages: Sequence[Mapping[str, Any]]) -> str:
    """The conversation a summary request asks about, as text."""
    if is_cached_summary(messages):
        return "\n\n".join(_text(m.get("content")) for m in messages[1:-1])
    return _text(messages[-1].get("content")) if messages else ""
