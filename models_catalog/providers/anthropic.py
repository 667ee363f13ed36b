"""The native Anthropic provider (CAT-7): model list and Messages API chat.

**Base URL.** Like the other providers, the base URL ends with the API version:
``https://api.anthropic.com/v1`` by default. Chat posts ``{base_url}/messages`` and
discovery reads ``{base_url}/models``, so a gateway that serves Anthropic's API under
its own prefix is ``https://gateway.example/anthropic/v1``. A base URL typed the way
Anthropic's SDKs and ``ANTHROPIC_BASE_URL`` take it (without ``/v1``; the SDK adds
``/v1/messages``) is the same endpoint: the spec's ``api_path`` makes discovery, the
stored connection and chat use the ``/v1`` form (``ProviderSpec.base_url_form``), and
discovery says which base URL a saved connection keeps.

**Headers.** ``x-api-key: <key>`` and ``anthropic-version: 2023-06-01`` on every request;
the key is sent nowhere else and appears in no error, ``repr`` or log line.

**Discovery.** ``GET {base}/models?limit=1000``, following ``has_more`` / ``last_id``
(``after_id``) page by page (at most :data:`MAX_PAGES`). Each model's
``max_input_tokens`` / ``max_tokens`` are the provider's figures (CAT-2); where the
list lacks them, the official manifest has the known Claude models, at the official
endpoint only.

**Chat.** :class:`AnthropicChatClient` takes a native Messages body (made by
``context.anthropic.build_anthropic_body``), streams it and yields the same events as
every other client (see ``anthropic_stream``). Errors: 401/403 are permanent and clear;
429 (with ``retry-after``) and 529 ``overloaded_error`` are transient, retried by
``client.call_with_retries``; 400 "prompt is too long: N tokens > M maximum" is a
:class:`~models_catalog.errors.ContextOverflowError` carrying both counts. A 200 whose stream
ends before its first event is asked once more without streaming (LOOP-3, as every client).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import httpx

from context.anthropic_validate import BODY_FIELDS, CLIENT_TOOL_TYPES
from context.surrogates import json_loads_clean
from models_catalog.errors import (
    AuthenticationError,
    InvalidRequestError,
    ProviderUnavailableError,
)
from models_catalog.http import HttpLimits, Resolver, request_json
from models_catalog.private_hosts import AllowPrivate
from models_catalog.providers.anthropic_stream import AnthropicAssembler, events_from_message
from models_catalog.providers.base import Listing, ListingContext, ProviderSpec, RawModel, with_api_path
from models_catalog.providers.chat_http import GuardedChatClient
from models_catalog.providers.events import ChatEvent, ChatStream, as_dict
from models_catalog.providers.model_lists import positive_int
from models_catalog.providers.streaming import SSEMessage

ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
API_PATH = "/v1"  # what Anthropic's SDKs add to ANTHROPIC_BASE_URL before /messages
ANTHROPIC_VERSION = "2023-06-01"
MEMORY_BETA = "context-management-2025-06-27"  # the memory tool's beta (``memory_20250818``)
LABEL = "Anthropic"
MAX_PAGES = 20  # 20 pages of 1,000 models: far beyond any real list, and a bound on a looping server
PAGE_SIZE = 1000


def anthropic_headers(api_key: str | None, *, accept: str = "application/json",
                      body: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The headers of every Anthropic request (the key only when there is one), and the
    beta a body's tools need (``anthropic_betas``)."""
    headers = {"Accept": accept, "anthropic-version": ANTHROPIC_VERSION}
    betas = anthropic_betas(body)
    if betas:
        headers["anthropic-beta"] = ",".join(betas)
    if api_key:
        headers["x-api-key"] = api_key
    return headers


def anthropic_betas(body: Mapping[str, Any] | None) -> list[str]:
    """The ``anthropic-beta`` values a body needs: the memory tool's (MEM-2)."""
    tools = body.get("tools") if body is not None else None
    if isinstance(tools, list) and any(isinstance(tool, Mapping) and tool.get("type") in CLIENT_TOOL_TYPES
                                       for tool in tools):
        return [MEMORY_BETA]
    return []


def anthropic_body_headers(body: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The ``anthropic-beta`` header ``body`` needs, as the context inspector's copy writes it."""
    betas = anthropic_betas(body)
    return (("anthropic-beta", ",".join(betas)),) if betas else ()


def parse_model_info(item: Any) -> RawModel | None:
    """One ``ModelInfo`` of the list → :class:`RawModel` (its figures when stated)."""
    if not isinstance(item, Mapping) or not isinstance(item.get("id"), str) or not item["id"].strip():
        return None
    window = positive_int(item.get("max_input_tokens"))
    model = RawModel(id=item["id"].strip(), context_window=window, max_input_tokens=window,
                     max_output_tokens=positive_int(item.get("max_tokens")), chat_capable=True)
    image = as_dict(as_dict(item.get("capabilities")).get("image_input"))
    if isinstance(image.get("supported"), bool):
        model.supports_images = image["supported"]
    return model


def _pages(ctx: ListingContext, base: str) -> tuple[list[RawModel], list[str]]:
    models: list[RawModel] = []
    seen: set[str] = set()
    after: str | None = None
    for _ in range(MAX_PAGES):
        query = {"limit": PAGE_SIZE, **({"after_id": after} if after else {})}
        payload = request_json(ctx.client, "GET", f"{base}/models?{urlencode(query)}",
                               headers=anthropic_headers(ctx.api_key), limits=ctx.limits, provider_label=ctx.label)
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise ProviderUnavailableError(f"{ctx.label} answered the model list in an unknown shape. "
                                           "Check the base URL.")
        for item in data:
            model = parse_model_info(item)
            if model is not None and model.id not in seen:
                seen.add(model.id)
                models.append(model)
        last = payload.get("last_id")
        if payload.get("has_more") is not True or not isinstance(last, str) or not last or last == after:
            return models, []
        after = last
    return models, [f"The model list has more than {MAX_PAGES * PAGE_SIZE:,} entries; only those were read."]


def list_anthropic(ctx: ListingContext) -> Listing:
    """``GET {base}/models``, every page (discovery gives the base in its ``/v1`` form)."""
    models, warnings = _pages(ctx, ctx.base_url)
    return Listing(models=models, api_shape="anthropic", warnings=warnings)


class AnthropicChatClient(GuardedChatClient):
    """``POST {base_url}/messages`` over the guarded HTTP client (SSE, or JSON when asked)."""

    provider = "anthropic"
    label = LABEL

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        allow_private: AllowPrivate = False,
        limits: HttpLimits | None = None,
        transport: httpx.BaseTransport | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        if not api_key:
            raise AuthenticationError(f"An API key is required for {LABEL}.")
        # A connection saved before base URLs were stored in their /v1 form is called there too.
        super().__init__(base_url=with_api_path(base_url or ANTHROPIC_BASE_URL, API_PATH), api_key=api_key,
                         allow_private=allow_private, limits=limits, transport=transport, resolver=resolver)

    def __repr__(self) -> str:
        return f"AnthropicChatClient(base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}/messages"

    def stream_chat(self, request_body: Mapping[str, Any]) -> ChatStream:
        """Send a native Messages body and yield its events; ``"stream": false`` uses JSON.

        A body with fields the Messages API does not have (a chat-completions body handed
        over by mistake) is refused here, before anything is sent.
        """
        body = dict(request_body)  # never mutate the caller's dict
        foreign = sorted(set(body) - BODY_FIELDS)
        if foreign:
            raise InvalidRequestError(f"The request is not an Anthropic Messages body (fields {foreign}); "
                                      "nothing was sent.", code="invalid_request")

        def json_events(payload: Any) -> list[ChatEvent]:
            return events_from_message(payload, provider_label=LABEL)

        if body.get("stream", True) is False:
            return self._post_json(self.url, body, headers=anthropic_headers(self._key(), body=body),
                                   json_events=json_events)
        body["stream"] = True
        assembler = AnthropicAssembler(provider_label=LABEL)

        def read(message: SSEMessage) -> tuple[list[ChatEvent], bool]:
            return assembler.feed(_event(message.data), message.event), assembler.stopped

        def unstreamed() -> ChatStream:
            # Anthropic itself refuses before the stream begins and opens every stream with
            # message_start; a 200 that ends before any event comes from what stands in
            # between (a gateway, a local server speaking the Messages API). Asked plainly,
            # the same request says why — a "prompt is too long" refusal is how the window
            # is learned (CAT-3) — or simply answers.
            plain = body | {"stream": False}
            return self._post_json(self.url, plain, headers=anthropic_headers(self._key(), body=plain),
                                   json_events=json_events, fresh=True)

        streamed = anthropic_headers(self._key(), accept="text/event-stream", body=body)
        return self._post_stream(self.url, body, headers=streamed,
                                 assembler=assembler, read=read, ended=lambda: assembler.stop_reason is not None,
                                 json_events=json_events, unstreamed=unstreamed)


def _event(data: str) -> dict[str, Any]:
    """One SSE data payload; an ``error`` event is classified by the assembler, by its type."""
    try:
        payload = json_loads_clean(data)  # every delta's text, thinking, tool name, id and input piece
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise ProviderUnavailableError(f"{LABEL} sent a malformed event in the answer stream.")
    return payload


ANTHROPIC = ProviderSpec(
    name="anthropic", label=LABEL, list_models=list_anthropic, default_base_url=ANTHROPIC_BASE_URL,
    output_limit_field="max_tokens", stream_usage_option=False, chat_factory=AnthropicChatClient,
    dialect="anthropic", api_path=API_PATH, prompt_cache=True,
    chat_path="/messages", key_header="x-api-key", key_scheme="",
    chat_headers=(("anthropic-version", ANTHROPIC_VERSION),), body_headers=anthropic_body_headers,
)
