"""The chat-completions client: one narrow method, ``stream_chat(request_body)``.

``get_chat_client(provider=..., ...)`` looks the provider up in the registry and returns
an object with ``stream_chat(body) -> ChatStream``: :class:`HttpChatClient` for
providers spoken to over OpenAI-style ``POST {base_url}/chat/completions`` (OpenAI,
DeepSeek, every compatible server) and ``demo.DemoChatClient`` for the offline demo.
The body is a ready dict (``context.build_body`` makes it, ``stream_options`` included
where the provider reads it); the client only sets ``stream`` and never rewrites
messages, so the call log holds what the provider received.

Errors (LOOP-3): a failure before any content raises a :class:`ProviderError`; a failure
after content arrived ends the iteration with ``StreamEnd(cut=True, error=...)`` so the
partial answer is not lost (CTX-6) — call ``end.raise_if_cut()`` to retry it. A 200 whose
stream ends before its first data event (an empty body, or only ``: ping`` comments) is
asked once more without streaming, to learn why, before it counts as a fault. Only
transient errors are retried, by :func:`call_with_retries`.

The key is sent as ``Authorization: Bearer <key>`` and appears nowhere else: not in
errors (they are built from the status only), not in ``repr``, not in logs.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import httpx

from models_catalog.errors import (
    AuthenticationError,
    InvalidRequestError,
    ProviderError,
    ProviderUnavailableError,
)
from models_catalog.http import HttpLimits, Resolver
from models_catalog.private_hosts import AllowPrivate
from models_catalog.providers import ChatClient, ProviderSpec, get_provider
from models_catalog.providers.chat_http import GuardedChatClient
from models_catalog.providers.events import (
    ChatEvent,
    ChatStream,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from models_catalog.providers.streaming import SSEMessage, StreamAssembler, events_from_completion, parse_chunk

__all__ = [
    "ChatClient", "ChatEvent", "HttpChatClient", "ReasoningDelta", "StreamEnd", "TextDelta", "ToolCall",
    "ToolCallDelta", "Usage", "call_with_retries", "collect", "get_chat_client",
]

T = TypeVar("T")


def get_chat_client(
    *,
    provider: str,
    base_url: str | None = None,
    api_key: str | None = None,
    allow_private: AllowPrivate = False,
    limits: HttpLimits | None = None,
    transport: httpx.BaseTransport | None = None,
    resolver: Resolver | None = None,
) -> ChatClient:
    """The chat client of ``provider`` (registry lookup). Use it as a context manager."""
    spec = get_provider(provider)
    if spec.chat_factory is not None:
        return spec.chat_factory(base_url=base_url, api_key=api_key, allow_private=allow_private,
                                 limits=limits, transport=transport, resolver=resolver)
    base = base_url or spec.default_base_url
    if not base:
        raise InvalidRequestError("A base URL is required for this provider.", code="base_url_required")
    if spec.requires_api_key and not api_key:
        raise AuthenticationError(f"An API key is required for {spec.label}.")
    return HttpChatClient(spec=spec, base_url=base, api_key=api_key, allow_private=allow_private,
                          limits=limits, transport=transport, resolver=resolver)


class HttpChatClient(GuardedChatClient):
    """OpenAI-style ``/chat/completions`` over the guarded HTTP client (SSE or JSON)."""

    def __init__(
        self,
        *,
        spec: ProviderSpec,
        base_url: str,
        api_key: str | None,
        allow_private: AllowPrivate = False,
        limits: HttpLimits | None = None,
        transport: httpx.BaseTransport | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        super().__init__(base_url=base_url, api_key=api_key, allow_private=allow_private, limits=limits,
                         transport=transport, resolver=resolver)
        self.provider = spec.name
        self.label = spec.label
        self._spec = spec

    def __repr__(self) -> str:
        return f"HttpChatClient(provider={self.provider!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}{self._spec.chat_path}"

    def _headers(self, *, stream: bool) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json", **dict(self._spec.chat_headers)}
        if self._key():
            headers[self._spec.key_header] = f"{self._spec.key_scheme}{self._key()}"
        return headers

    def stream_chat(self, request_body: Mapping[str, Any]) -> ChatStream:
        """Send ``request_body`` and yield its events; ``"stream": false`` uses plain JSON."""
        body = dict(request_body)  # never mutate the caller's dict
        label = self.label

        def json_events(payload: Any) -> list[ChatEvent]:
            return events_from_completion(payload, provider_label=label)

        if body.get("stream", True) is False:
            return self._post_json(self.url, body, headers=self._headers(stream=False), json_events=json_events)
        body["stream"] = True  # ``stream_options`` is the body's own (``context.build_body``)
        assembler = StreamAssembler()

        def read(message: SSEMessage) -> tuple[list[ChatEvent], bool]:
            if message.data.strip() == "[DONE]":
                return [], True
            return assembler.feed(parse_chunk(message.data, message.event, provider_label=label)), False

        def unstreamed() -> ChatStream:
            # A 200 that ended before its first data event: llama.cpp's server answers a
            # streamed prompt over its window with an empty body, llama-cpp-python's with a
            # ": ping" comment and a cut connection. Ask once without streaming to learn why
            # (both then refuse with the figures, CAT-3) before this counts as a provider fault.
            plain = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
            return self._post_json(self.url, plain, headers=self._headers(stream=False), json_events=json_events,
                                   fresh=True)

        return self._post_stream(self.url, body, headers=self._headers(stream=True), assembler=assembler, read=read,
                                 ended=lambda: assembler.finish_reason is not None, json_events=json_events,
                                 unstreamed=unstreamed)


def collect(events: Iterator[ChatEvent]) -> StreamEnd:
    """Drain ``events`` and return the final :class:`StreamEnd`."""
    end: StreamEnd | None = None
    for event in events:
        if isinstance(event, StreamEnd):
            end = event
    if end is None:
        raise ProviderUnavailableError("The answer ended without a final event.")
    return end


def call_with_retries(
    fn: Callable[[], T],
    *,
    max_attempts: int = 4,
    base_delay: float = 1.0,
    max_delay: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    jitter: float = 0.0,
    rand: Callable[[], float] = random.random,
    on_retry: Callable[[int, ProviderError, float], None] | None = None,
) -> T:
    """Call ``fn``; retry transient :class:`ProviderError` with bounded back-off (LOOP-3).

    The n-th wait is ``min(max_delay, base_delay * 2**(n-1))``, stretched to the
    provider's ``Retry-After`` when that is longer. A ``Retry-After`` beyond
    ``max_delay`` is honoured by *not* retrying here: the error is raised with its
    ``retry_after`` so the caller can reschedule instead of holding a worker.
    ``jitter`` (a fraction, e.g. 0.1) spreads retries of many workers; tests pass 0.
    Permanent errors and anything that is not a ProviderError propagate at once.
    """
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    attempt = 1
    while True:
        try:
            return fn()
        except ProviderError as err:
            if err.permanent or attempt >= max_attempts:
                raise
            delay = min(max_delay, base_delay * (2 ** (attempt - 1)))
            if err.retry_after is not None:
                if err.retry_after > max_delay:
                    raise
                delay = max(delay, err.retry_after)
            if jitter:
                delay = min(max_delay, delay * (1 + jitter * rand()))
            if on_retry is not None:
                on_retry(attempt, err, delay)
            sleep(delay)
            attempt += 1
