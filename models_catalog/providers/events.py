"""The events a chat client yields, whatever the provider (re-exported by ``client``).

A call yields any number of :class:`TextDelta`, :class:`ReasoningDelta` and
:class:`ToolCallDelta`, then exactly one :class:`StreamEnd` carrying the assembled
answer: text, reasoning, complete tool calls, ``finish_reason``, ``usage`` and whether
the stream was ``cut`` (with the error that cut it). Providers that return reasoning as
signed blocks (Anthropic's ``thinking`` / ``redacted_thinking``) also hand back those
blocks, verbatim, in ``StreamEnd.thinking_blocks``: they are stored as the assistant
record's opaque ``reasoning`` so the same model can be given them back byte-identical.
"""
from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from models_catalog.errors import ProviderError


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty one (provider JSON is untrusted)."""
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class TextDelta:
    """A piece of the visible answer (LOOP-5 ``message_delta``)."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of provider reasoning (``reasoning_content`` / ``reasoning``), kept opaque."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of tool call ``index``: ``id``/``name`` once known, ``arguments`` piece."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call assembled from its deltas.

    ``complete`` is False when the stream was cut before the provider finished the
    message: its arguments may be truncated and it must never be executed (CTX-6).
    """

    id: str
    name: str
    arguments: str
    index: int = 0
    complete: bool = True

    def parsed_arguments(self) -> dict[str, Any] | None:
        """The arguments as a JSON object, or None when they are not one."""
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def to_message_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class Usage:
    """Token counts the provider reported (CTX-25 calibration), in OpenAI's terms.

    ``prompt_tokens`` is the whole input, however the provider billed it: for Anthropic it
    is uncached input + input read from the prompt cache + input written to it.
    ``cached_tokens`` is the part read from a prompt cache; ``cache_creation_tokens`` the
    part written to one (Anthropic reports it; OpenAI-style providers do not).
    ``raw`` keeps what the provider sent, plus (for providers that speak other terms) the
    OpenAI-term totals, so a stored ``raw`` reads the same for every provider.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    cache_creation_tokens: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def cache_read_tokens(self) -> int | None:
        """Input read from the provider's prompt cache (an alias of ``cached_tokens``)."""
        return self.cached_tokens

    @classmethod
    def from_anthropic(cls, data: Any) -> Usage | None:
        """Anthropic's ``usage`` (``input_tokens`` is only the *uncached* input) in OpenAI terms."""
        if not isinstance(data, dict):
            return None
        uncached = _count(data.get("input_tokens"))
        read = _count(data.get("cache_read_input_tokens")) or 0
        written = _count(data.get("cache_creation_input_tokens")) or 0
        output = _count(data.get("output_tokens"))
        prompt = None if uncached is None else uncached + read + written
        total = None if prompt is None or output is None else prompt + output
        raw = dict(data)
        raw.update({"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": total,
                    "prompt_tokens_details": {"cached_tokens": read}})
        return cls(prompt_tokens=prompt, completion_tokens=output, total_tokens=total, cached_tokens=read,
                   cache_creation_tokens=written, raw=raw)

    @classmethod
    def from_payload(cls, data: Any) -> Usage | None:
        if not isinstance(data, dict):
            return None

        def num(value: Any) -> int | None:
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        completion_details = data.get("completion_tokens_details") or {}
        prompt_details = data.get("prompt_tokens_details") or {}
        cached = num(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
        return cls(
            prompt_tokens=num(data.get("prompt_tokens")),
            completion_tokens=num(data.get("completion_tokens")),
            total_tokens=num(data.get("total_tokens")),
            reasoning_tokens=(
                num(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else None
            ),
            cached_tokens=cached if cached is not None else num(data.get("prompt_cache_hit_tokens")),
            raw=dict(data),
        )


@dataclass(frozen=True)
class StreamEnd:
    """The last event of every call: the whole answer and how it ended."""

    finish_reason: str | None
    usage: Usage | None
    cut: bool
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None
    error: ProviderError | None = None
    thinking_blocks: tuple[dict[str, Any], ...] = ()

    def assistant_message(self) -> dict[str, Any]:
        """The answer as an assistant record message (SPEC §3 record format).

        ``reasoning`` is the list of signed thinking blocks when the provider sent them
        (kept opaque and verbatim), else the reasoning text, else None.
        """
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message_dict() for call in self.tool_calls]
        if self.thinking_blocks:
            message["reasoning"] = [dict(block) for block in self.thinking_blocks]
        else:
            message["reasoning"] = self.reasoning or None
        message["partial"] = self.cut
        return message

    def raise_if_cut(self) -> StreamEnd:
        """Raise the error that cut the stream (so a retry helper can retry it)."""
        if self.cut and self.error is not None:
            raise self.error
        return self


ChatEvent = TextDelta | ReasoningDelta | ToolCallDelta | StreamEnd
# What ``stream_chat`` returns: a generator, so the reader that stops early closes it, and the
# HTTP response with it.
ChatStream = Generator[ChatEvent, None, None]
