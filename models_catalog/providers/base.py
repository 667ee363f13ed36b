"""Shared shapes of the provider adapters: what a model list yields, what a spec holds."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, Self
from urllib.parse import urlsplit

import httpx

from models_catalog.http import HttpLimits, request_json
from models_catalog.providers.events import ChatStream


class ChatClient(Protocol):
    """What the run loop needs from any provider: one narrow method, and ``close`` (also as a
    context manager: ``with chat_client(target) as client`` closes it)."""

    def stream_chat(self, request_body: Mapping[str, Any]) -> ChatStream: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


@dataclass
class RawModel:
    """One model as a provider's list describes it; None means "the provider did not say".

    ``context_window`` is the model's own maximum (its trained window, ``max_model_len``…);
    ``server_context_window`` is what the server keeps per request when that is smaller or
    stated separately (Ollama's ``num_ctx`` or loaded context, llama.cpp's ``n_ctx``, LM
    Studio's loaded context), with ``server_context_source`` saying how it was learned.
    ``max_output_tokens`` is the provider's *maximum*, not the platform's setting (CAT-3).
    """

    id: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    max_input_tokens: int | None = None
    chat_capable: bool | None = None
    chat_reason: str | None = None
    supports_images: bool | None = None
    notes: list[str] = field(default_factory=list)
    server_context_window: int | None = None
    server_context_source: str | None = None
    # CAT-11: how many requests the server answers at once, when it says (llama.cpp's
    # total_slots) or its kind is known to answer one (llama-cpp-python), and how we know.
    concurrency: int | None = None
    concurrency_source: str | None = None


@dataclass
class Listing:
    """What a provider's list call produced, plus how the answer was recognised."""

    models: list[RawModel]
    api_shape: str
    warnings: list[str] = field(default_factory=list)
    suggested_base_url: str | None = None


@dataclass(frozen=True)
class ListingContext:
    """Everything a list call needs; ``client`` is already guarded (``http.build_client``)."""

    client: httpx.Client
    base_url: str
    api_key: str | None
    limits: HttpLimits
    label: str

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def url(self, path: str, *, root: str | None = None) -> str:
        return (root or self.base_url).rstrip("/") + "/" + path.lstrip("/")

    def get_json(self, path: str, *, root: str | None = None) -> Any:
        return request_json(
            self.client, "GET", self.url(path, root=root), headers=self.headers(),
            limits=self.limits, provider_label=self.label,
        )

    def post_json(self, path: str, body: Any, *, root: str | None = None) -> Any:
        return request_json(
            self.client, "POST", self.url(path, root=root), headers=self.headers(), json_body=body,
            limits=self.limits, provider_label=self.label,
        )


def server_root(base_url: str) -> str:
    """``http://host:11434/v1`` → ``http://host:11434``: where a local server's native API
    lives (Ollama's ``/api/*``, llama.cpp's ``/props``, LM Studio's ``/api/v0/*``)."""
    root = base_url.rstrip("/")
    for suffix in ("/v1", "/api/v0", "/api/v1", "/api"):
        if root.endswith(suffix):
            return root[: -len(suffix)]
    return root


def merge_details(listed: list[RawModel], detailed: list[RawModel]) -> list[RawModel]:
    """The ids ``/v1/models`` listed, with the figures a server's native API adds for them
    (``x`` = ``x:latest``, Ollama's default tag). Figures the list itself stated win."""
    by_name = {m.id: m for m in detailed}
    for m in detailed:
        if m.id.endswith(":latest"):
            by_name.setdefault(m.id.removesuffix(":latest"), m)
    merged: list[RawModel] = []
    for model in listed:
        found = by_name.get(model.id) or by_name.get(f"{model.id}:latest")
        if found is None:
            merged.append(model)
            continue
        merged.append(RawModel(
            id=model.id,
            context_window=model.context_window or found.context_window,
            max_output_tokens=model.max_output_tokens or found.max_output_tokens,
            max_input_tokens=model.max_input_tokens or found.max_input_tokens,
            chat_capable=found.chat_capable if model.chat_capable is None else model.chat_capable,
            chat_reason=model.chat_reason or found.chat_reason,
            supports_images=found.supports_images if model.supports_images is None else model.supports_images,
            notes=[*model.notes, *found.notes],
            server_context_window=model.server_context_window or found.server_context_window,
            server_context_source=model.server_context_source or found.server_context_source,
        ))
    return merged


ListModels = Callable[[ListingContext], Listing]
ChatFactory = Callable[..., ChatClient]


@dataclass(frozen=True)
class ProviderSpec:
    """One provider: everything the platform knows about it, in one place.

    ``list_models`` is the one narrow method discovery calls. ``chat_factory`` is None for
    providers spoken to over OpenAI-style ``/chat/completions`` by ``HttpChatClient``.
    ``dialect`` names the request rules the context engine applies (CTX-10, CTX-11:
    ``openai``, ``deepseek`` or ``anthropic``) and ``output_limit_field`` the request
    field that carries ``max_output_tokens`` (``max_completion_tokens`` for OpenAI,
    ``max_tokens`` elsewhere). ``openai`` and ``deepseek`` are chat-completions bodies
    (``context.build_request_body``); ``anthropic`` is a native Messages API body
    (``context.build_anthropic_body``, whose first stage is the engine's ``anthropic``
    rules). ``exact_tokenizer`` says the model ids name the tokenizer the provider counts
    with (OpenAI's), so tiktoken's count is the provider's own.
    ``api_path`` is the path a provider's own SDK adds to the base URL it is given
    (Anthropic's ``/v1``): a base URL typed the SDK's way lacks it, and
    :meth:`base_url_form` adds it, so discovery, the stored connection and chat all use
    the one form the API answers at.
    ``prompt_cache``: the provider reads a repeated prompt prefix from its cache
    (Anthropic's ``cache_control``, OpenAI's and DeepSeek's automatic prefix caching), so
    a summary is asked for as the action request itself plus an instruction (CTX-46).
    ``string_content``: see the field.
    Nothing outside this package compares a provider's name: it reads these fields.
    """

    name: str
    label: str
    list_models: ListModels
    default_base_url: str | None = None
    requires_api_key: bool = True
    dialect: str = "openai"
    output_limit_field: str = "max_tokens"
    exact_tokenizer: bool = False
    stream_usage_option: bool = True
    offline: bool = False
    chat_factory: ChatFactory | None = None
    api_path: str = ""
    prompt_cache: bool = False
    # Requests carry string contents and the classic roles only (``context.string_contents``):
    # the local servers behind ``openai_compatible`` render messages through chat templates
    # that fail (llama-cpp-python: 500) on a null content, ``developer`` or a list of parts.
    string_content: bool = False
    # CAT-8: a self-hosted server of this kind may publish no window; at a loopback or
    # private address, discovery asks it with one probe (``providers.window_probe``).
    window_probe: bool = False
    # Where a chat request goes under the base URL and how it carries the key: what the
    # context inspector's "copy as cURL" writes (``models_catalog.request_copy``).
    chat_path: str = "/chat/completions"
    key_header: str = "Authorization"
    key_scheme: str = "Bearer "
    chat_headers: tuple[tuple[str, str], ...] = ()
    # The headers a given body needs besides those (Anthropic's beta for its memory tool, MEM-2).
    body_headers: Callable[[Mapping[str, Any]], tuple[tuple[str, str], ...]] | None = None

    def base_url_form(self, base_url: str) -> str:
        """``base_url`` as this provider's API is called at: without trailing slashes, and
        ending with :attr:`api_path` (``https://api.anthropic.com`` → ``…/v1``)."""
        return with_api_path(base_url, self.api_path)


def with_api_path(base_url: str, api_path: str) -> str:
    """``base_url`` ending with ``api_path`` (added when its path does not already end so)."""
    base = base_url.strip().rstrip("/")
    if not api_path or not base:
        return base
    try:
        path = urlsplit(base).path.rstrip("/")
    except ValueError:  # unreadable ("http://[abc]"): left as typed, for validation to name the problem
        return base
    return base if path.endswith(api_path) else base + api_path
