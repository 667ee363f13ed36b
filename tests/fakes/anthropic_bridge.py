"""The run-loop suites over Anthropic's wire, unchanged.

:class:`AnthropicBridge` is a strict Messages API server (the checks and error bodies of
``anthropic_rules``, the simulated prompt cache) whose *answers* come from the same
scripted handlers the OpenAI-dialect tests use. It shows the handler an OpenAI-shaped
view of each accepted request (``request.json``; the native body stays in
``request.native``) and turns the handler's OpenAI-shaped answer — a ``chat_stream``, a
``chat_completion``, an ``error`` — into the API's own typed SSE events, message JSON or
error bodies. Faults pass through (``Hang``, ``Reset``; a cut stream stays cut).

So a suite parametrized by dialect runs every one of its scenarios against both wires,
and every request the loop sends to Claude is checked by the Anthropic rules.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.fakes.anthropic import api_error, message_json, message_stream
from tests.fakes.anthropic_rules import (
    PromptCache,
    header_refusal,
    refusal,
    sign_thinking,
    size_refusal,
    text_refusal,
)
from tests.fakes.responses import JSONResponse, RecordedRequest, ResponseSpec, SSEResponse

_ERROR_KINDS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "[image]") if block.get("type") == "text" else f"[{block.get('type')}]"
                     for block in content or () if isinstance(block, dict))


def openai_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """A native Messages body as the OpenAI-shaped request the scripted handlers read."""
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _text_of(body["system"])})
    for turn in body.get("messages", []):
        blocks = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
        if turn["role"] == "user":
            texts = []
            for block in blocks:
                if block["type"] == "tool_result":
                    messages.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                                     "content": _text_of(block.get("content", ""))})
                else:
                    texts.append(_text_of([block]))
            if texts:
                messages.append({"role": "user", "content": "\n".join(texts)})
            continue
        text = "".join(block["text"] for block in blocks if block["type"] == "text") or None
        message: dict[str, Any] = {"role": "assistant", "content": text}
        calls = [{"id": b["id"], "type": "function",
                  "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
                 for b in blocks if b["type"] == "tool_use"]
        if calls:
            message["tool_calls"] = calls
        messages.append(message)
    view: dict[str, Any] = {"model": body["model"], "messages": messages, "max_tokens": body["max_tokens"],
                            "stream": body.get("stream", False)}
    if body.get("tools"):
        view["tools"] = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                                           "parameters": t.get("input_schema", NATIVE)}}
                         for t in body["tools"]]
    return view


def _assemble(chunks: Sequence[Any]) -> tuple[str, list[str], list[dict[str, Any]], dict[str, Any] | None, int]:
    """Text, reasoning pieces, tool calls and usage of OpenAI chunks (and the text pieces)."""
    text, reasoning, calls, usage, pieces = "", [], {}, None, 0
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text += delta["content"]
                pieces += 1
            if delta.get("reasoning_content"):
                reasoning.append(delta["reasoning_content"])
            for call in delta.get("tool_calls") or ():
                entry = calls.setdefault(call["index"], {"id": "", "name": "", "arguments": ""})
                entry["id"] = call.get("id") or entry["id"]
                function = call.get("function") or {}
                entry["name"] = function.get("name") or entry["name"]
                entry["arguments"] += function.get("arguments") or ""
    return text, reasoning, [calls[i] for i in sorted(calls)], usage, pieces


def _finish_reason(chunks: Sequence[Any]) -> str | None:
    """The last finish reason of OpenAI chunks."""
    reason = None
    for chunk in chunks:
        for choice in (chunk.get("choices") or ()) if isinstance(chunk, dict) else ():
            reason = choice.get("finish_reason") or reason
    return reason


def _blocks(model: str, text: str, reasoning: list[str], calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reasoning:
        thinking = "".join(reasoning)
        blocks.append({"type": "thinking", "thinking": thinking, "signature": sign_thinking(model, thinking)})
    if text:
        blocks.append({"type": "text", "text": text})
    for call in calls:
        try:
            arguments = json.loads(call["arguments"] or "{}")
        except ValueError:
            arguments = {"raw": call["arguments"]}  # the API only ever sends objects
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                       "input": arguments if isinstance(arguments, dict) else {"value": arguments}})
    return blocks


# What the handler sees of an Anthropic-defined tool (the memory tool): Anthropic gives the
# model its schema; the bridge's view only needs the name to script calls of it.
NATIVE: dict[str, Any] = {"type": "object", "description": "an Anthropic-defined tool"}


class AnthropicBridge:
    """A strict Messages API in front of an OpenAI-shaped scripted ``handler``."""

    def __init__(self, handler: Callable[[RecordedRequest], ResponseSpec], *, api_key: str | None) -> None:
        self.handler = handler
        self.api_key = api_key
        self.cache = PromptCache()
        self.rejections: list[tuple[int, str]] = []
        self.usages: list[dict[str, int]] = []

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        problem = header_refusal(request.headers, self.api_key)
        if problem is None and not (request.method == "POST" and request.path.endswith("/messages")):
            problem = (404, "not_found_error", f"{request.method} {request.path}: not found")
        if problem is None:
            problem = size_refusal(request.body) or text_refusal(request.body) or refusal(request.json, request.headers)
        if problem is not None:
            status, kind, message = problem
            self.rejections.append((status, message))
            return api_error(status, kind, message)
        native = request.json
        request.native = native
        request.json = openai_view(native)
        cached = self.cache.use(native)
        return self._translate(self.handler(request), native, cached)

    def _translate(self, spec: ResponseSpec, native: dict[str, Any], cached: dict[str, int]) -> ResponseSpec:
        model = native["model"]
        if isinstance(spec, SSEResponse):
            text, reasoning, calls, usage, pieces = _assemble(spec.events)
            blocks = _blocks(model, text, reasoning, calls)
            options: dict[str, Any] = {"delay": spec.delay}
            events_before_text = 3 + bool(reasoning) * 3  # start, ping, (thinking…), block start
            if spec.reset_after is not None:
                options["reset_after"] = events_before_text + max(spec.reset_after - 1, 0)
            if spec.close_after is not None:
                options["close_after"] = events_before_text + max(spec.close_after - 1, 0)
            if spec.hold is not None:
                options.update(hold=spec.hold, hold_after=events_before_text + max(spec.hold_after - 1, 0))
            if _finish_reason(spec.events) == "length":  # the output limit: Anthropic's stop reason
                options["stop_reason"] = "max_tokens"
            if usage and isinstance(usage.get("completion_tokens"), int):  # Anthropic's output_tokens
                options["output_tokens"] = usage["completion_tokens"]
            return message_stream(blocks, model=model, usage=self._usage(usage, cached), split=max(pieces, 1),
                                  **options)
        if isinstance(spec, JSONResponse) and spec.status == 200 and isinstance(spec.body, dict):
            choice = (spec.body.get("choices") or [{}])[0].get("message") or {}
            calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                     for c in choice.get("tool_calls") or ()]
            reasoning = [choice["reasoning_content"]] if choice.get("reasoning_content") else []
            blocks = _blocks(model, choice.get("content") or "", reasoning, calls)
            return message_json(blocks, model=model, usage=self._usage(spec.body.get("usage"), cached))
        if isinstance(spec, JSONResponse):
            error = spec.body.get("error", {}) if isinstance(spec.body, dict) else {}
            message = error.get("message", "error") if isinstance(error, dict) else str(error)
            kind = _ERROR_KINDS.get(spec.status, "api_error")
            retry_after = {k.lower(): v for k, v in spec.headers.items()}.get("retry-after")
            return api_error(spec.status, kind, message, retry_after=retry_after)
        return spec  # Hang, Reset, raw bytes: the same faults on either wire

    def _usage(self, usage: Mapping[str, Any] | None, cached: dict[str, int]) -> dict[str, int]:
        """The handler's own count when it gave one (calibration tests need it), else the cache's."""
        if usage and isinstance(usage.get("prompt_tokens"), int):
            chosen = {"input_tokens": usage["prompt_tokens"], "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}
        else:
            chosen = dict(cached)
        self.usages.append(chosen)
        return chosen
