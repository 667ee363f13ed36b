"""Server-Sent Events decoding and chat-completion chunk assembly (pure, no I/O).

``SSEDecoder`` turns raw bytes into SSE messages (any chunking, ``\\r\\n`` or ``\\n``,
comments such as OpenRouter's ``: PROCESSING`` ignored, multi-line ``data`` joined).
``StreamAssembler`` turns chat-completion chunks into events and keeps the running
answer, assembling tool calls whose id, name and arguments arrive in separate chunks.
The same assembler reads a non-streamed completion, so both paths yield the same events.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from context.surrogates import json_loads_clean, replace_lone_surrogate_escapes
from models_catalog.errors import ProviderError, ProviderUnavailableError, ResponseTooLargeError, error_from_payload
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


@dataclass(frozen=True)
class SSEMessage:
    event: str
    data: str


class SSEDecoder:
    """Incremental SSE parser with a bound on one event's size."""

    def __init__(self, *, max_event_bytes: int = 4 * 1024 * 1024) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._data_size = 0
        self._event = ""
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        self._buffer += chunk
        messages: list[SSEMessage] = []
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                break
            line, self._buffer = self._buffer[:newline], self._buffer[newline + 1:]
            message = self._line(line.rstrip(b"\r"))
            if message is not None:
                messages.append(message)
        if len(self._buffer) > self._max:
            raise ResponseTooLargeError("A single event of the answer stream is larger than the limit.")
        return messages

    def flush(self) -> list[SSEMessage]:
        """Dispatch what is pending at end of stream (a last event without a blank line)."""
        messages = self.feed(b"\n") if self._buffer else []
        last = self._line(b"")
        return messages + ([last] if last else [])

    def _line(self, line: bytes) -> SSEMessage | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            data = b"\n".join(self._data)
            event, self._event, self._data, self._data_size = self._event or "message", "", [], 0
            try:
                return SSEMessage(event=event, data=data.decode("utf-8"))
            except UnicodeDecodeError:
                raise ProviderUnavailableError("The answer stream contained bytes that are not UTF-8.") from None
        if line.startswith(b":"):
            return None  # comment / keep-alive
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data_size += len(value)
            if self._data_size > self._max:
                raise ResponseTooLargeError("A single event of the answer stream is larger than the limit.")
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", errors="replace")
        elif name == b"error":
            # Not an SSE field: llama.cpp's server writes a streamed request's refusal (a prompt
            # over its context size, say) as ``error: {...}`` after its 200, then ``data: [DONE]``.
            # Ignored, as the standard says, that refusal would read as an empty answer.
            self._event = "error"
            self._data_size += len(value)
            self._data.append(value)
        return None  # id, retry and unknown fields are irrelevant here


def iter_sse(
    chunks: Iterable[bytes], *, max_bytes: int, deadline: float, provider_label: str = "The model provider"
) -> Iterator[SSEMessage]:
    """The SSE messages of a streamed body, read within ``max_bytes`` and before
    ``deadline`` (a ``time.monotonic()`` value): a huge or trickling stream cannot hold a
    worker or its memory. A last event without its blank line is still delivered."""
    decoder = SSEDecoder()
    received = 0
    for chunk in chunks:
        received += len(chunk)
        if received > max_bytes:
            raise ResponseTooLargeError(f"The answer stream exceeded the {max_bytes:,}-byte limit.")
        if time.monotonic() > deadline:
            raise ProviderUnavailableError(f"{provider_label} took longer than the time limit to answer.")
        yield from decoder.feed(chunk)
    yield from decoder.flush()


def parse_chunk(data: str, event: str = "message", *, provider_label: str = "The model provider") -> dict[str, Any]:
    """A data payload as a JSON object; garbage is a (transient) provider fault."""
    try:
        payload = json_loads_clean(data)  # every delta's text, tool name, id and arguments piece
    except ValueError:
        raise ProviderUnavailableError(f"{provider_label} sent a malformed chunk in the answer stream.") from None
    if not isinstance(payload, dict):
        raise ProviderUnavailableError(f"{provider_label} sent a malformed chunk in the answer stream.")
    if event == "error" or payload.get("error") is not None:
        # llama.cpp's ``error:`` line carries the error object itself, not {"error": {...}}
        wrapped = payload if payload.get("error") is not None or payload.get("type") == "error" else {"error": payload}
        raise error_from_payload(wrapped, provider_label=provider_label)
    return payload


class StreamAssembler:
    """Keeps the running answer of one call and yields events for each chunk."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.emitted = False

    def feed(self, chunk: dict[str, Any]) -> list[ChatEvent]:
        events: list[ChatEvent] = []
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        usage = chunk.get("usage")
        if usage is None and isinstance(chunk.get("x_groq"), dict):
            usage = chunk["x_groq"].get("usage")  # Groq puts stream usage there
        parsed = Usage.from_payload(usage)
        if parsed is not None:
            self.usage = parsed
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return events
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is never requested; ignore other choices
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = as_dict(choice.get("message"))
            events.extend(self._delta(delta))
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        self.emitted = self.emitted or bool(events)
        return events

    def _delta(self, delta: dict[str, Any]) -> list[ChatEvent]:
        events: list[ChatEvent] = []
        for key in ("reasoning_content", "reasoning"):
            piece = delta.get(key)
            if isinstance(piece, str) and piece:
                self._reasoning.append(piece)
                events.append(ReasoningDelta(piece))
                break
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            events.append(TextDelta(content))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for position, call in enumerate(tool_calls):
                if isinstance(call, dict):
                    events.append(self._tool_delta(position, call))
        return events

    def _tool_delta(self, position: int, call: dict[str, Any]) -> ToolCallDelta:
        index = call.get("index")
        if not isinstance(index, int):
            index = self._index_without_index(position, call.get("id"))
        slot = self._calls.setdefault(index, {"id": None, "name": None, "arguments": []})
        if isinstance(call.get("id"), str) and call["id"] and not slot["id"]:
            slot["id"] = call["id"]
        function = as_dict(call.get("function"))
        name = function.get("name")
        if isinstance(name, str) and name and not slot["name"]:
            slot["name"] = name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send an object, not a string
            arguments = json.dumps(arguments)
        piece = arguments if isinstance(arguments, str) else ""
        slot["arguments"].append(piece)
        return ToolCallDelta(index=index, id=slot["id"], name=slot["name"], arguments=piece)

    def _complete(self, slot: dict[str, Any], *, cut: bool) -> bool:
        """A call may run only if the message finished and, when the output limit stopped
        it (``length``), its arguments still parse: otherwise they were truncated."""
        if cut or not slot["name"]:
            return False
        if self.finish_reason == "length":
            try:
                json.loads("".join(slot["arguments"]) or "{}")
            except ValueError:
                return False
        return True

    def _index_without_index(self, position: int, call_id: Any) -> int:
        """Servers that omit ``index``: a known id continues its call, a new id opens one,
        no id continues the latest call (or the one at this position in a full message)."""
        if isinstance(call_id, str) and call_id:
            for index, slot in self._calls.items():
                if slot["id"] == call_id:
                    return index
            return max(self._calls, default=-1) + 1
        if not self._calls:
            return position
        return max(self._calls)

    def finish(self, *, cut: bool, error: ProviderError | None = None) -> StreamEnd:
        calls = tuple(
            ToolCall(
                id=slot["id"] or f"call_{index}",
                name=slot["name"] or "",
                # An escape can be split across pieces: only the whole text can be judged.
                arguments=replace_lone_surrogate_escapes("".join(slot["arguments"])),
                index=index,
                complete=self._complete(slot, cut=cut),
            )
            for index, slot in sorted(self._calls.items())
        )
        return StreamEnd(
            finish_reason=self.finish_reason,
            usage=self.usage,
            cut=cut,
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=calls,
            model=self.model,
            error=error,
        )


def events_from_completion(payload: Any, *, provider_label: str = "The model provider") -> list[ChatEvent]:
    """A non-streamed ``chat.completion`` body as the same events a stream yields."""
    if not isinstance(payload, dict):
        raise ProviderUnavailableError(f"{provider_label} sent an answer that is not a JSON object.")
    if payload.get("error") is not None:
        raise error_from_payload(payload, provider_label=provider_label)
    assembler = StreamAssembler()
    events = assembler.feed(payload)
    if not isinstance(payload.get("choices"), list) or not payload["choices"]:
        raise ProviderUnavailableError(f"{provider_label} sent an answer without choices.")
    return [*events, assembler.finish(cut=False)]
