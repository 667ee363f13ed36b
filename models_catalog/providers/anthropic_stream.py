"""Anthropic's Messages API stream as the platform's chat events (pure, no I/O).

The stream is a sequence of typed SSE events: ``message_start`` (the model and the
input usage), then per content block ``content_block_start`` → ``content_block_delta``
(``text_delta``, ``input_json_delta``, ``thinking_delta``, ``signature_delta``) →
``content_block_stop``, then ``message_delta`` (``stop_reason``, output usage) and
``message_stop``; ``ping`` may come at any time and ``error`` ends it. Event types the
API adds later are ignored, as its versioning policy asks.

:class:`AnthropicAssembler` yields :class:`TextDelta`, :class:`ReasoningDelta` and
:class:`ToolCallDelta` events as blocks stream in and builds the final
:class:`StreamEnd`: text, tool calls (``complete`` only when their block finished and the
answer was not cut), the *signed* thinking blocks verbatim (an unsigned, cut one is
dropped, never repaired), the stop reason in OpenAI's terms and usage with the cache
figures. :func:`events_from_message` reads a non-streamed ``message`` the same way.
"""
from __future__ import annotations

import json
from typing import Any

from context.surrogates import replace_lone_surrogate_escapes
from models_catalog.errors import ProviderError, ProviderUnavailableError, error_from_status
from models_catalog.providers.events import (
    ChatEvent,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    as_dict,
)

# stop_reason -> finish_reason (the rest of the platform speaks OpenAI's terms).
STOP_REASONS = {
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
    "refusal": "content_filter", "pause_turn": "pause_turn", "model_context_window_exceeded": "length",
}
# error.type -> the HTTP status the API uses for it, to classify errors met inside a stream.
ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
    "timeout_error": 504, "overloaded_error": 529,
}


def anthropic_error(payload: Any, *, provider_label: str = "Anthropic") -> ProviderError:
    """An ``{"type": "error", "error": {"type", "message"}}`` object as a classified error.

    The body is read to pick the class (overflow counts included) and never echoed.
    """
    kind = as_dict(as_dict(payload).get("error")).get("type")
    status = ERROR_STATUS.get(kind, 500) if isinstance(kind, str) else 500
    return error_from_status(status, body=json.dumps(payload).encode(), provider_label=provider_label)


class AnthropicAssembler:
    """Keeps the running answer of one Messages API call and yields events per SSE event."""

    def __init__(self, *, provider_label: str = "Anthropic") -> None:
        self._label = provider_label
        self._blocks: dict[int, dict[str, Any]] = {}
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.model: str | None = None
        self.stopped = False  # message_stop seen
        self.emitted = False

    @property
    def finish_reason(self) -> str | None:
        if self.stop_reason is None:
            return None
        return STOP_REASONS.get(self.stop_reason, self.stop_reason)

    def feed(self, payload: dict[str, Any], event: str = "message") -> list[ChatEvent]:
        """Events for one decoded SSE event (its ``type`` wins over the SSE event name)."""
        kind = payload.get("type") if isinstance(payload.get("type"), str) else event
        if kind == "error":
            raise anthropic_error(payload, provider_label=self._label)
        events: list[ChatEvent] = []
        if kind == "message_start":
            message = as_dict(payload.get("message"))
            if isinstance(message.get("model"), str):
                self.model = message["model"]
            self._usage.update(as_dict(message.get("usage")))
        elif kind == "content_block_start":
            events = self._start(payload.get("index"), as_dict(payload.get("content_block")))
        elif kind == "content_block_delta":
            events = self._delta(self._block(payload.get("index")), as_dict(payload.get("delta")))
        elif kind == "content_block_stop":
            block = self._block(payload.get("index"))
            if block is not None:
                block["done"] = True
        elif kind == "message_delta":
            reason = as_dict(payload.get("delta")).get("stop_reason")
            if isinstance(reason, str):
                self.stop_reason = reason
            self._usage.update(as_dict(payload.get("usage")))
        elif kind == "message_stop":
            self.stopped = True
        self.emitted = self.emitted or bool(events)
        return events

    def _block(self, index: Any) -> dict[str, Any] | None:
        """The block an event names by its index (an int, as _start stored it), if it started."""
        return self._blocks.get(index) if isinstance(index, int) else None

    def _start(self, index: Any, block: dict[str, Any]) -> list[ChatEvent]:
        if not isinstance(index, int) or isinstance(index, bool):
            raise ProviderUnavailableError(f"{self._label} sent a content block without an index.")
        kind = block.get("type")
        slot: dict[str, Any] = {"type": kind, "done": False}
        self._blocks[index] = slot
        if kind == "text":
            return self._delta(slot, {"type": "text_delta", "text": block.get("text")})
        if kind == "tool_use":
            slot.update(id=block.get("id"), name=block.get("name"), arguments=[],
                        ordinal=sum(1 for b in self._blocks.values() if b["type"] == "tool_use") - 1)
            given = block.get("input")
            piece = json.dumps(given) if isinstance(given, dict) and given else ""  # a non-streamed answer
            return [self._tool_piece(slot, piece)]
        if kind == "thinking":
            signature = block.get("signature")
            slot.update(thinking=[], signature=signature if isinstance(signature, str) else "")
            return self._delta(slot, {"type": "thinking_delta", "thinking": block.get("thinking")})
        if kind == "redacted_thinking":
            slot["data"] = block.get("data")
        return []

    def _tool_piece(self, slot: dict[str, Any], piece: str) -> ToolCallDelta:
        slot["arguments"].append(piece)
        return ToolCallDelta(index=slot["ordinal"], id=slot["id"], name=slot["name"], arguments=piece)

    def _delta(self, slot: dict[str, Any] | None, delta: dict[str, Any]) -> list[ChatEvent]:
        if slot is None:
            return []  # a delta for a block that never started: nothing to attach it to
        kind = delta.get("type")
        if kind == "text_delta" and slot["type"] == "text":
            text = delta.get("text")
            if isinstance(text, str) and text:
                self._text.append(text)
                return [TextDelta(text)]
        elif kind == "input_json_delta" and slot["type"] == "tool_use":
            piece = delta.get("partial_json")
            return [self._tool_piece(slot, piece)] if isinstance(piece, str) and piece else []
        elif kind == "thinking_delta" and slot["type"] == "thinking":
            text = delta.get("thinking")
            if isinstance(text, str) and text:
                slot["thinking"].append(text)
                self._reasoning.append(text)
                return [ReasoningDelta(text)]
        elif kind == "signature_delta" and slot["type"] == "thinking" and isinstance(delta.get("signature"), str):
            slot["signature"] += delta["signature"]
        return []

    def _complete_call(self, slot: dict[str, Any], *, cut: bool) -> bool:
        """A call may run only if its block finished in an answer that was not cut and, when
        the output limit stopped the answer, its input still parses."""
        if cut or not slot["done"] or not slot["name"] or not slot["id"]:
            return False
        try:
            value = json.loads("".join(slot["arguments"]) or "{}")
        except ValueError:
            return False
        return isinstance(value, dict)

    def thinking_blocks(self) -> tuple[dict[str, Any], ...]:
        """The finished, signed thinking blocks, in order, exactly as the API sent them."""
        blocks: list[dict[str, Any]] = []
        for _, slot in sorted(self._blocks.items()):
            if slot["type"] == "thinking" and slot["done"] and slot["signature"]:
                blocks.append({"type": "thinking", "thinking": "".join(slot["thinking"]),
                               "signature": slot["signature"]})
            elif slot["type"] == "redacted_thinking" and slot["done"] and isinstance(slot.get("data"), str):
                blocks.append({"type": "redacted_thinking", "data": slot["data"]})
        return tuple(blocks)

    def finish(self, *, cut: bool, error: ProviderError | None = None) -> StreamEnd:
        calls = tuple(
            ToolCall(id=slot["id"] or f"call_{slot['ordinal']}", name=slot["name"] or "",
                     # An escape can be split across ``partial_json`` pieces: judged whole.
                     arguments=replace_lone_surrogate_escapes("".join(slot["arguments"])) or "{}",
                     index=slot["ordinal"],
                     complete=self._complete_call(slot, cut=cut))
            for _, slot in sorted(self._blocks.items()) if slot["type"] == "tool_use"
        )
        return StreamEnd(
            finish_reason=self.finish_reason,
            usage=Usage.from_anthropic(self._usage) if self._usage else None,
            cut=cut,
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=calls,
            model=self.model,
            error=error,
            # A cut answer is saved as partial; its thinking cannot be vouched for.
            thinking_blocks=() if cut else self.thinking_blocks(),
        )


def events_from_message(payload: Any, *, provider_label: str = "Anthropic") -> list[ChatEvent]:
    """A non-streamed ``message`` body as the same events a stream yields."""
    if not isinstance(payload, dict):
        raise ProviderUnavailableError(f"{provider_label} sent an answer that is not a JSON object.")
    if payload.get("type") == "error":
        raise anthropic_error(payload, provider_label=provider_label)
    content = payload.get("content")
    if payload.get("type") != "message" or not isinstance(content, list):
        raise ProviderUnavailableError(f"{provider_label} sent an answer that is not a message.")
    assembler = AnthropicAssembler(provider_label=provider_label)
    events = assembler.feed({"type": "message_start", "message": {**payload, "content": []}})
    for index, block in enumerate(content):
        events += assembler.feed({"type": "content_block_start", "index": index, "content_block": as_dict(block)})
        events += assembler.feed({"type": "content_block_stop", "index": index})
    events += assembler.feed({"type": "message_delta", "delta": {"stop_reason": payload.get("stop_reason")}})
    events += assembler.feed({"type": "message_stop"})
    return [*events, assembler.finish(cut=False)]
