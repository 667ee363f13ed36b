"""A strict fake of Anthropic's API for the loopback :class:`FakeProvider`.

Give :class:`AnthropicFake` to a ``FakeProvider`` as its handler (or to ``route``)::

    strict = AnthropicFake(api_key="sk-ant-test", replies=[Reply(text="Hello")])
    with FakeProvider(strict) as fake:
        client = get_chat_client(provider="anthropic", base_url=fake.base_url, api_key="sk-ant-test",
                                 allow_private=True)

It serves ``GET /v1/models`` (paginated with ``limit`` / ``after_id``, answering
``data``, ``has_more``, ``first_id``, ``last_id``) and ``POST /v1/messages``, which it
checks with ``anthropic_rules`` and refuses with the API's own 400/401 error bodies
(every refusal is kept in ``rejections``). An accepted request goes through the
simulated prompt cache, and the answer (the next :class:`Reply`) streams as the API's
typed SSE events, or comes back as one JSON message when ``"stream": false``. Thinking
blocks it returns are signed for the model that was asked.

The builders (:func:`message_events`, :func:`message_stream`, :func:`message_json`,
:func:`api_error`) also serve tests that hand-craft answers and faults.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any
from urllib.parse import unquote

from tests.fakes.anthropic_rules import PromptCache, header_refusal, redacted_data, refusal, sign_thinking, size_refusal
from tests.fakes.responses import STREAM_OPTIONS, JSONResponse, RecordedRequest, ResponseSpec, SSEResponse

DEFAULT_MODELS = (
    {"id": "claude-opus-5", "max_input_tokens": 1_000_000, "max_tokens": 128_000},
    {"id": "claude-haiku-4-5-20251001", "max_input_tokens": 200_000, "max_tokens": 64_000},
)


@dataclass
class Reply:
    """One answer of the fake: thinking (signed), text, tool calls ``{"id", "name", "input"}``."""

    text: str = "ok"
    tool_calls: Sequence[Mapping[str, Any]] = ()
    thinking: str | None = None
    redacted: bool = False
    stop_reason: str | None = None
    output_tokens: int = 7


def api_error(status: int, kind: str, message: str, *, retry_after: str | float | None = None) -> JSONResponse:
    """The API's error body ``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    headers = {"request-id": "req_fake"}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"},
                        status=status, headers=headers)


def sse(kind: str, payload: Mapping[str, Any]) -> bytes:
    """One typed SSE event as the API writes it."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()


def _pieces(text: str, split: int) -> list[str]:
    step = max(1, -(-len(text) // split))
    return [text[i:i + step] for i in range(0, len(text), step)] or [""]


def reply_blocks(reply: Reply, *, model: str) -> list[dict[str, Any]]:
    """The content blocks of ``reply`` as the API returns them (thinking signed for ``model``)."""
    blocks: list[dict[str, Any]] = []
    if reply.thinking is not None:
        blocks.append({"type": "thinking", "thinking": reply.thinking,
                       "signature": sign_thinking(model, reply.thinking)})
    if reply.redacted:
        blocks.append({"type": "redacted_thinking", "data": redacted_data(model, 1)})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": dict(c.get("input") or {})}
               for c in reply.tool_calls]
    return blocks


def message_events(blocks: Sequence[Mapping[str, Any]], *, model: str = "claude-opus-5",
                   usage: Mapping[str, int] | None = None, stop_reason: str | None = None,
                   output_tokens: int = 7, split: int = 3) -> list[bytes]:
    """A whole streamed answer: message_start, a ping, each block in deltas, message_delta, message_stop."""
    usage = dict(usage or {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
    start = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    events = [sse("message_start", {"message": start}), sse("ping", {})]
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "thinking":
            events.append(sse("content_block_start", {"index": index, "content_block":
                                                      {"type": "thinking", "thinking": "", "signature": ""}}))
            events += [sse("content_block_delta", {"index": index, "delta": {"type": "thinking_delta", "thinking": p}})
                       for p in _pieces(block["thinking"], split)]
            events.append(sse("content_block_delta", {"index": index, "delta": {"type": "signature_delta",
                                                                                "signature": block["signature"]}}))
        elif kind == "text":
            events.append(sse("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}))
            events += [sse("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": p}})
                       for p in _pieces(block["text"], split)]
        elif kind == "tool_use":
            events.append(sse("content_block_start", {"index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            events += [sse("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                             "partial_json": p}})
                       for p in _pieces(json.dumps(block["input"]), split)]
        else:
            events.append(sse("content_block_start", {"index": index, "content_block": dict(block)}))
        events.append(sse("content_block_stop", {"index": index}))
    reason = stop_reason or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    events.append(sse("message_delta", {"delta": {"stop_reason": reason, "stop_sequence": None},
                                        "usage": {"output_tokens": output_tokens}}))
    events.append(sse("message_stop", {}))
    return events


def message_stream(blocks: Sequence[Mapping[str, Any]], **kwargs: Any) -> SSEResponse:
    """:func:`message_events` as a response; ``reset_after`` / ``close_after`` cut it."""
    options = {k: kwargs.pop(k) for k in STREAM_OPTIONS if k in kwargs}
    return SSEResponse(events=message_events(blocks, **kwargs), done=False, **options)


def message_json(blocks: Sequence[Mapping[str, Any]], *, model: str = "claude-opus-5",
                 usage: Mapping[str, int] | None = None, stop_reason: str | None = None,
                 output_tokens: int = 7) -> JSONResponse:
    """A non-streamed answer (``"stream": false``)."""
    usage = dict(usage or {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
    reason = stop_reason or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    return JSONResponse({"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                         "content": [dict(b) for b in blocks], "stop_reason": reason, "stop_sequence": None,
                         "usage": {**usage, "output_tokens": output_tokens}})


@dataclass
class AnthropicFake:
    """The strict server (a handler for ``FakeProvider``); see the module docstring.

    ``replies`` is a list (the n-th accepted call gets the n-th reply, the last repeats) or
    a function of the accepted body. ``models`` are ``ModelInfo`` dicts (an ``id`` is
    enough); ``page_size`` caps a page below the request's ``limit``.
    """

    api_key: str | None = "sk-ant-test"
    replies: Sequence[Reply] | Callable[[dict[str, Any]], Reply] = (Reply(),)
    models: Sequence[Mapping[str, Any]] = DEFAULT_MODELS
    page_size: int | None = None
    cache: PromptCache = field(default_factory=PromptCache)
    rejections: list[tuple[int, str]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    usages: list[dict[str, int]] = field(default_factory=list)
    _calls: Any = field(default_factory=count)

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        problem = header_refusal(request.headers, self.api_key)
        if problem is None and request.method == "GET" and request.path == "/v1/models":
            return self._models(request)
        if problem is None and request.method == "POST" and request.path == "/v1/messages":
            problem = size_refusal(request.body) or refusal(request.json, request.headers)
            if problem is None:
                return self._answer(request.json)
        if problem is None:
            problem = (404, "not_found_error", f"{request.method} {request.path}: not found")
        status, kind, message = problem
        self.rejections.append((status, message))
        return api_error(status, kind, message)

    def _models(self, request: RecordedRequest) -> JSONResponse:
        limit = int((request.query.get("limit") or ["20"])[0])
        limit = min(limit, self.page_size or limit)
        after = unquote((request.query.get("after_id") or [""])[0])
        ids = [m["id"] for m in self.models]
        start = ids.index(after) + 1 if after in ids else 0
        page = [{"type": "model", "display_name": m["id"], "created_at": "2026-01-01T00:00:00Z", **m}
                for m in self.models[start:start + limit]]
        return JSONResponse({"data": page, "has_more": start + limit < len(ids),
                             "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None})

    def _answer(self, body: dict[str, Any]) -> ResponseSpec:
        self.accepted.append(body)
        usage = self.cache.use(body)
        self.usages.append(usage)
        number = next(self._calls)
        if callable(self.replies):
            reply = self.replies(body)
        else:
            reply = self.replies[min(number, len(self.replies) - 1)]
        blocks = reply_blocks(reply, model=body["model"])
        options = {"model": body["model"], "usage": usage, "stop_reason": reply.stop_reason,
                   "output_tokens": reply.output_tokens}
        if body.get("stream") is True:
            return message_stream(blocks, **options)
        return message_json(blocks, **options)
