"""Model discovery (CAT-1 … CAT-4): list a provider's models with trustworthy figures.

``discover_models(provider=..., base_url=..., api_key=...)`` asks the provider's list
adapter (registry) for its models and gives each one

* ``context_window`` and the provider's maximum output, from the first source that has
  them: ``provider`` (the list said so) → ``official_manifest`` (exact id, official
  endpoint) → ``platform_default`` (32,768 / 4,096, flagged for the admin to check).
  Where a local server keeps less than the model supports (Ollama's ``num_ctx``, loaded
  context or default, llama.cpp's ``n_ctx``, LM Studio's loaded context), the window is
  what the server keeps: ``model_context_window`` and ``server_context_window`` (with
  ``server_context_source``) show both figures, so requests never rely on more;
* ``max_output_tokens`` — the platform setting: 4,096 to start with, never above the
  provider's known maximum (CAT-3), never more than half a small window;
* ``chat_capable`` — False for models known not to chat (embeddings, audio, image,
  moderation, rerank, Responses-only…), True otherwise, with a note when unverified;
* ``note`` — everything the admin should know: platform defaults, a disagreement between
  the provider's figure and the manifest (the provider's figure is kept), Ollama caveats.

Pure adapter code: no Django, no storage. The key is used for the list call and
forgotten; it is never part of the result, an error or a log line.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from models_catalog.discovery_attempts import Attempts
from models_catalog.errors import AuthenticationError, InvalidRequestError, ProviderError
from models_catalog.http import DISCOVERY_LIMITS, AllowPrivate, HttpLimits, Resolver, build_client
from models_catalog.manifest import Manifest, ManifestEntry, load_manifest, normalise_base_url
from models_catalog.providers import ListingContext, RawModel, get_provider
from models_catalog.providers.local_servers import LLAMACPP_PROPS
from models_catalog.providers.model_lists import LMSTUDIO_LOADED
from models_catalog.providers.ollama import SOURCE_DEFAULT as OLLAMA_DEFAULT
from models_catalog.providers.ollama import SOURCE_LOADED as OLLAMA_LOADED
from models_catalog.providers.ollama import SOURCE_NUM_CTX as OLLAMA_NUM_CTX
from models_catalog.providers.window_probe import (
    PROBE_LIMITS,
    PROBE_REFUSAL,
    PROBE_TRUNCATION,
    is_private_endpoint,
    probe_unknown_window,
)
from models_catalog.url_syntax import MalformedURL, url_parse

PLATFORM_DEFAULT_CONTEXT_WINDOW = 32_768
PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS = 4_096
START_MAX_OUTPUT_TOKENS = 4_096  # CAT-3: where max_output_tokens starts
SOURCE_PROVIDER = "provider"
SOURCE_MANIFEST = "official_manifest"
SOURCE_DEFAULT = "platform_default"
SOURCE_SERVER = "server"  # CAT-8: what the server itself keeps per request, as it said it
_RANK = {SOURCE_DEFAULT: 0, SOURCE_MANIFEST: 1, SOURCE_PROVIDER: 2, SOURCE_SERVER: 2}

# How a server's kept context was learned; stored with a connection, shown to the admin.
SERVER_CONTEXT_SOURCES = {
    OLLAMA_NUM_CTX: "Ollama: the model's num_ctx parameter",
    OLLAMA_LOADED: "Ollama /api/ps: the context of the loaded model",
    OLLAMA_DEFAULT: "Ollama's default context, as no num_ctx is set and the model is not loaded",
    LLAMACPP_PROPS: "llama.cpp /props: n_ctx",
    LMSTUDIO_LOADED: "LM Studio: the loaded context length",
    PROBE_REFUSAL: "the server's refusal of a prompt longer than its window (one probe)",
    PROBE_TRUNCATION: "the server's usage figures: it cut a prompt longer than its window to its window (one probe)",
}

UNVERIFIED_NOTE = "Chat compatibility of this model is unverified: try it before relying on it."

# CAT-4: id patterns of models known not to be chat-completions models.
_NON_CHAT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (r"embed|(^|[-_/.])(bge|e5|gte)([-_.]|$)|all-minilm", "an embedding model"),
        (r"rerank", "a reranking model"),
        (r"moderation|llama-guard|prompt-guard|shieldgemma|safeguard", "a moderation / safety classifier"),
        (r"whisper|transcribe|(^|[-_])tts([-_]|$)|speech|audio|realtime|voice", "an audio or speech model"),
        (r"dall-e|gpt-image|(^|[-_])image([-_]|$)|imagen|stable-diffusion|sdxl|(^|[-_])flux|sora|(^|[-_])veo",
         "an image or video generation model"),
        (r"(^|[-_])ocr([-_]|$)", "a document OCR model"),
        (r"^gpt-3\.5-turbo-instruct|^(davinci|babbage)-00\d|^text-(davinci|curie|babbage|ada)",
         "a legacy completions-only model"),
        (r"^(o1-pro|o3-pro|computer-use|codex-mini)|deep-research|^gpt-5(\.\d+)?-(pro|codex)",
         "available only through the Responses API, not chat completions"),
    )
)


@dataclass(frozen=True)
class DiscoveredModel:
    """One model as the admin form shows it. ``source`` is the weaker of the two sources."""

    id: str
    context_window: int
    max_output_tokens: int
    context_window_source: str
    max_output_tokens_source: str
    chat_capable: bool
    provider_max_output_tokens: int | None = None
    max_input_tokens: int | None = None
    supports_images: bool | None = None
    manifest_version: str | None = None
    notes: tuple[str, ...] = ()
    model_context_window: int | None = None
    server_context_window: int | None = None
    server_context_source: str | None = None
    concurrency: int | None = None  # CAT-11: requests the server answers at once (None: unknown)
    concurrency_source: str | None = None

    @property
    def source(self) -> str:
        return min(self.context_window_source, self.max_output_tokens_source, key=lambda s: _RANK.get(s, 0))

    @property
    def note(self) -> str | None:
        return " ".join(self.notes) or None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["source"] = self.source
        data["note"] = self.note
        return data


@dataclass(frozen=True)
class DiscoveryResult:
    """All models of one provider endpoint, and how the answer was read."""

    provider: str
    base_url: str
    api_shape: str
    models: tuple[DiscoveredModel, ...]
    manifest_version: str | None = None
    warnings: tuple[str, ...] = ()
    suggested_base_url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "base_url": self.base_url,
            "api_shape": self.api_shape,
            "manifest_version": self.manifest_version,
            "warnings": list(self.warnings),
            "suggested_base_url": self.suggested_base_url,
            "models": [m.to_dict() for m in self.models],
        }


def discover_models(
    *,
    provider: str,
    base_url: str | None = None,
    api_key: str | None = None,
    allow_private: AllowPrivate = False,
    transport: httpx.BaseTransport | None = None,
    resolver: Resolver | None = None,
    limits: HttpLimits | None = None,
    manifest: Manifest | None = None,
    probe: bool = True,
    probe_model: str | None = None,
    probe_limits: HttpLimits | None = None,
) -> DiscoveryResult:
    """List ``provider``'s models at ``base_url`` with figures, sources and notes.

    ``allow_private`` is the operator's "self-hosted endpoints" switch. ``transport`` and
    ``resolver`` replace the network and DNS (tests, benchmarks); the URL guard still runs.
    ``probe`` (CAT-8): a model whose window would be the platform default, served by a
    self-hosted kind of server at a loopback or private address, has its window asked of
    the server with one probe — ``probe_model``'s when it is one of them, else the first.
    Raises a :class:`~models_catalog.errors.ProviderError` when the list cannot be read.
    """
    spec = get_provider(provider)
    entered = (base_url or spec.default_base_url or "").strip()
    if not entered:
        raise InvalidRequestError("A base URL is required for this provider.", code="base_url_required")
    if not spec.offline:
        try:
            url_parse(entered)
        except MalformedURL as exc:  # read whole before any part of it is used
            raise InvalidRequestError(f"The base URL is not valid: {exc.message}.", code="invalid_url") from None
    # The form the API answers at: Anthropic's SDK form (no /v1) is listed, stored and
    # called with /v1, and the admin is told so (a connection saved from this keeps it).
    base = spec.base_url_form(entered)
    completed = normalise_base_url(base) != normalise_base_url(entered)
    if spec.requires_api_key and not api_key:
        raise AuthenticationError(f"An API key is required for {spec.label}.")
    manifest = manifest or load_manifest()
    official = manifest.endpoint_provider(base) is not None
    limits = limits or DISCOVERY_LIMITS
    trace = Attempts(limits=limits, base_url=base)
    with build_client(allow_private=allow_private, limits=limits, transport=transport, resolver=resolver) as client:
        client.event_hooks = {"request": [trace.on_request], "response": [trace.on_response]}
        ctx = ListingContext(client=client, base_url=base.rstrip("/"), api_key=api_key, limits=limits, label=spec.label)
        try:
            listing = spec.list_models(ctx)
        except ProviderError as exc:
            raise trace.explained(exc) from exc
        if probe and spec.window_probe and allow_private and is_private_endpoint(base, resolver=resolver):
            probe_unknown_window(ctx, listing.models, prefer=probe_model, limits=probe_limits or PROBE_LIMITS,
                                 unknown=lambda raw: manifest.lookup(base_url=base, model_id=raw.id) is None
                                 and raw.chat_capable is not False and non_chat_reason(raw.id) is None)
    models = [
        resolve_figures(raw, entry=manifest.lookup(base_url=base, model_id=raw.id), manifest_version=manifest.version)
        for raw in listing.models
    ]
    models.sort(key=lambda m: (not m.chat_capable, m.id))
    warnings = list(listing.warnings)
    if completed:
        warnings.insert(0, f"{spec.label}'s API answers under {normalise_base_url(base)}, the base URL as entered "
                           f"with the API version: a connection saved from this discovery keeps that base URL.")
    return DiscoveryResult(
        provider=provider,
        base_url=normalise_base_url(base),
        api_shape=listing.api_shape,
        models=tuple(models),
        manifest_version=manifest.version if official else None,
        warnings=tuple(warnings),
        suggested_base_url=listing.suggested_base_url,  # what to enter instead; a completed form needs nothing
    )


def resolve_figures(raw: RawModel, *, entry: ManifestEntry | None, manifest_version: str | None) -> DiscoveredModel:
    """Pick each figure's source, apply CAT-3 and CAT-4, and explain it in notes (pure)."""
    notes: list[str] = list(raw.notes)
    used_manifest = False
    if raw.context_window:
        window, window_source = raw.context_window, SOURCE_PROVIDER
        if entry and entry.context_window != raw.context_window:
            notes.append(_disagreement("context window", raw.context_window, entry.context_window, manifest_version))
    elif raw.server_context_window:
        window, window_source = raw.server_context_window, SOURCE_SERVER
        if raw.server_context_source in (PROBE_REFUSAL, PROBE_TRUNCATION):
            notes.insert(0, f"The server said its window is {raw.server_context_window:,} tokens "
                            f"({server_context_label(raw.server_context_source)}). Check it before saving.")
    elif entry:
        window, window_source, used_manifest = entry.context_window, SOURCE_MANIFEST, True
    else:
        window, window_source = PLATFORM_DEFAULT_CONTEXT_WINDOW, SOURCE_DEFAULT
        notes.append(
            f"No window figure is known for this model: the platform default "
            f"{PLATFORM_DEFAULT_CONTEXT_WINDOW:,} / {PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS:,} is used. "
            "Please check it and override it if needed."
        )
    model_window = raw.context_window or (entry.context_window if entry else None)
    served = raw.server_context_window
    if served and model_window and served < model_window:
        # What the server keeps bounds every request, whatever the model could take.
        window, window_source = served, SOURCE_SERVER
        notes.insert(0, f"The server keeps {served:,} of the {model_window:,} tokens this model supports "
                        f"({server_context_label(raw.server_context_source)}): the window is {served:,}.")
    provider_max: int | None
    if raw.max_output_tokens:
        provider_max, output_source = raw.max_output_tokens, SOURCE_PROVIDER
        if entry and entry.max_output_tokens != raw.max_output_tokens:
            notes.append(
                _disagreement("maximum output", raw.max_output_tokens, entry.max_output_tokens, manifest_version)
            )
    elif entry:
        provider_max, output_source, used_manifest = entry.max_output_tokens, SOURCE_MANIFEST, True
    else:
        provider_max, output_source = None, SOURCE_DEFAULT
    max_input = raw.max_input_tokens or (entry.max_input_tokens if entry else None)
    if entry and entry.max_input_tokens and not raw.max_input_tokens:
        used_manifest = True

    # CAT-3: start at 4,096, never above the provider's maximum; keep room for input.
    max_output = START_MAX_OUTPUT_TOKENS
    if provider_max is not None:
        max_output = min(max_output, provider_max)
    if max_output > window // 2:
        max_output = max(1, window // 2)
        notes.append(f"The output reserve is reduced to {max_output:,} to leave room for input in this small window.")
    if max_input and window > max_input + max_output:
        official_window = window
        window = max_input + max_output
        notes.append(
            f"Input is limited to {max_input:,} tokens within the {official_window:,}-token window, so the "
            f"window used for budgeting is {window:,} (input limit + output reserve)."
        )

    chat_capable, chat_note = classify_chat(raw.id, hint=raw.chat_capable, hint_reason=raw.chat_reason,
                                            known_chat=entry is not None)
    if chat_note:
        notes.append(chat_note)
    supports_images = raw.supports_images
    if supports_images is None and entry is not None:
        supports_images = entry.supports_images
    if entry and entry.note:
        notes.append(entry.note)
    return DiscoveredModel(
        id=raw.id,
        context_window=window,
        max_output_tokens=max_output,
        context_window_source=window_source,
        max_output_tokens_source=output_source,
        chat_capable=chat_capable,
        provider_max_output_tokens=provider_max,
        max_input_tokens=max_input,
        supports_images=supports_images,
        manifest_version=manifest_version if used_manifest else None,
        notes=tuple(notes),
        model_context_window=model_window,
        server_context_window=served,
        server_context_source=raw.server_context_source if served else None,
        concurrency=raw.concurrency, concurrency_source=raw.concurrency_source if raw.concurrency else None,
    )


def server_context_label(source: str | None) -> str:
    """The admin's words for how a server's kept context was learned."""
    return SERVER_CONTEXT_SOURCES.get(source or "", source or "the server")


def non_chat_reason(model_id: str) -> str | None:
    """Why ``model_id`` is known not to be a chat model, or None (CAT-4)."""
    lowered = model_id.lower()
    candidates = {lowered, lowered.rsplit("/", 1)[-1]}
    for pattern, reason in _NON_CHAT:
        if any(pattern.search(candidate) for candidate in candidates):
            return reason
    return None


def classify_chat(
    model_id: str, *, hint: bool | None = None, hint_reason: str | None = None, known_chat: bool = False
) -> tuple[bool, str | None]:
    """``(chat_capable, note)``: the provider's own flag wins, then the manifest, then
    the id patterns; an unknown model is offered with the "unverified" note."""
    if hint is False:
        return False, f"Not offered for chat: {hint_reason or 'the provider says it is not a chat model'}."
    if hint is True or known_chat:
        return True, None
    reason = non_chat_reason(model_id)
    if reason:
        return False, f"Not offered for chat: {reason}."
    return True, UNVERIFIED_NOTE


def _disagreement(what: str, provider_value: int, manifest_value: int, version: str | None) -> str:
    return (
        f"The provider reports a {what} of {provider_value:,} tokens but the official manifest "
        f"(version {version}) says {manifest_value:,}; the provider's figure is used. Please check."
    )


__all__ = [
    "DiscoveredModel", "DiscoveryResult", "PLATFORM_DEFAULT_CONTEXT_WINDOW", "PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS",
    "SERVER_CONTEXT_SOURCES", "START_MAX_OUTPUT_TOKENS", "classify_chat", "discover_models", "non_chat_reason",
    "resolve_figures", "server_context_label",
]
