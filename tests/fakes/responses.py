"""Response specs and helpers of the fake provider (see ``tests.fakes.fake_provider``)."""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    json: Any = None
    native: Any = None  # a bridged request's own body, when ``json`` is its OpenAI-shaped view


@dataclass
class JSONResponse:
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RawResponse:
    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    content_length: bool = True  # False: no Content-Length, body ends at close


HOLD_SECONDS = 60.0
# What a helper building an ``SSEResponse`` passes on to it rather than to its events.
STREAM_OPTIONS = ("reset_after", "close_after", "delay", "headers", "hold", "hold_after")


@dataclass
class SSEResponse:
    events: Sequence[Any]  # dict → "data: <json>", str → "data: <str>", bytes → written verbatim
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    done: bool = True
    delay: float = 0.0
    reset_after: int | None = None
    close_after: int | None = None
    # The answer stops after ``hold_after`` events until ``hold`` is set (at most
    # HOLD_SECONDS), then goes on: a test reads the page while the answer is certainly
    # still streaming, and releases it, instead of streaming slowly and hoping.
    hold: threading.Event | None = None
    hold_after: int = 1


@dataclass
class Hang:
    seconds: float = 30.0


@dataclass
class Reset:
    pass


ResponseSpec = JSONResponse | RawResponse | SSEResponse | Hang | Reset
Handler = Callable[[RecordedRequest], ResponseSpec]



def encode_event(event: Any) -> bytes:
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        return f"data: {event}\n\n".encode()
    return f"data: {json.dumps(event)}\n\n".encode()


def route(table: Mapping[str, ResponseSpec | Handler]) -> Handler:
    """A handler from ``{"METHOD /path": spec or handler}``; anything else is a 404."""

    def handler(request: RecordedRequest) -> ResponseSpec:
        target = table.get(f"{request.method} {request.path}")
        if target is None:
            return error(404, f"no route for {request.method} {request.path}")
        return target(request) if callable(target) else target

    return handler


def sequence(*specs: ResponseSpec) -> Handler:
    """A handler answering the n-th call with ``specs[n]`` (the last one repeats)."""
    calls = iter(range(10**9))

    def handler(request: RecordedRequest) -> ResponseSpec:  # noqa: ARG001
        return specs[min(next(calls), len(specs) - 1)]

    return handler


def models_list(models: Iterable[str | Mapping[str, Any]], *, owned_by: str = "system") -> JSONResponse:
    """``GET /v1/models``: ids become ``{"id", "object", "owned_by"}``; dicts pass as they are."""
    data = [
        {"id": m, "object": "model", "created": 1700000000, "owned_by": owned_by} if isinstance(m, str) else dict(m)
        for m in models
    ]
    return JSONResponse({"object": "list", "data": data})


def chat_chunks(
    text: Sequence[str] = (),
    *,
    reasoning: Sequence[str] = (),
    tool_calls: Sequence[Mapping[str, Any]] = (),
    split: int = 3,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str = "fake-model",
) -> list[dict[str, Any]]:
    """Chat-completion chunks. ``tool_calls`` are ``{"id", "name", "arguments"}``; each
    call's id+name come in one chunk and its arguments in ``split`` further chunks."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning_content": piece}) for piece in reasoning]
    chunks += [chunk({"content": piece}) for piece in text]
    for index, call in enumerate(tool_calls):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": call["name"], "arguments": ""}}]}))
        args = call.get("arguments", "")
        step = max(1, -(-len(args) // split))
        for start in range(0, len(args), step):
            piece = args[start:start + step]
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    finish = finish_reason or ("tool_calls" if tool_calls else "stop")
    chunks.append(chunk({}, finish))
    if usage is not None:
        chunks.append({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                       "choices": [], "usage": dict(usage)})
    return chunks


def chat_stream(text: Sequence[str] = (), **kwargs: Any) -> SSEResponse:
    """A streamed answer (see :func:`chat_chunks`), ending with ``[DONE]``."""
    sse_options = {k: kwargs.pop(k) for k in (*STREAM_OPTIONS, "done") if k in kwargs}
    return SSEResponse(events=chat_chunks(text, **kwargs), **sse_options)


def chat_completion(
    text: str | None = "",
    *,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    reasoning: str | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str = "fake-model",
) -> JSONResponse:
    """A non-streamed ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c.get("arguments", "")}}
            for c in tool_calls
        ]
    body = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}]}
    if usage is not None:
        body["usage"] = dict(usage)
    return JSONResponse(body)


def error(status: int, message: str = "error", *, code: str | None = None, type: str | None = None,  # noqa: A002
          retry_after: str | float | None = None, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """An OpenAI-style error body ``{"error": {"message", "type", "code"}}``."""
    extra = dict(headers or {})
    if retry_after is not None:
        extra["Retry-After"] = str(retry_after)
    body = {"error": {"message": message, "type": type or "error", "code": code}}
    return JSONResponse(body, status=status, headers=extra)


def redirect(location: str, status: int = 302) -> RawResponse:
    return RawResponse(b"", status=status, headers={"Location": location})


def ollama_tags(names: Iterable[str]) -> JSONResponse:
    """``GET /api/tags``."""
    return JSONResponse({"models": [
        {"name": n, "model": n, "modified_at": "2026-01-01T00:00:00Z", "size": 1, "digest": "0" * 64,
         "details": {"format": "gguf", "family": "llama"}} for n in names]})


def ollama_show(
    *, architecture: str = "llama", context_length: int | None = 131072,
    capabilities: Sequence[str] = ("completion", "tools"), parameters: str | None = None,
) -> JSONResponse:
    """``POST /api/show`` for one model."""
    info: dict[str, Any] = {"general.architecture": architecture, "general.parameter_count": 8_000_000_000}
    if context_length is not None:
        info[f"{architecture}.context_length"] = context_length
    body: dict[str, Any] = {"modelfile": "", "template": "", "details": {"family": architecture},
                            "model_info": info, "capabilities": list(capabilities)}
    if parameters is not None:
        body["parameters"] = parameters
    return JSONResponse(body)


def ollama_ps(loaded: Mapping[str, int | None]) -> JSONResponse:
    """``GET /api/ps``: the loaded models and the context each is kept with (None: a server
    from before ``context_length`` was reported)."""
    models = []
    for name, context in loaded.items():
        entry: dict[str, Any] = {
            "name": name, "model": name, "size": 6_591_830_464, "digest": "a" * 64,
            "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                        "parameter_size": "8.0B", "quantization_level": "Q4_K_M"},
            "expires_at": "2026-12-01T16:47:07.93355-07:00", "size_vram": 5_333_539_264,
        }
        if context is not None:
            entry["context_length"] = context
        models.append(entry)
    return JSONResponse({"models": models})


def ollama_version(version: str = "0.12.6") -> JSONResponse:
    """``GET /api/version``."""
    return JSONResponse({"version": version})


def ollama_error(status: int, message: str) -> JSONResponse:
    """Ollama's own error body: ``{"error": "<text>"}`` (e.g. 404 "model 'x' not found")."""
    return JSONResponse({"error": message}, status=status)
