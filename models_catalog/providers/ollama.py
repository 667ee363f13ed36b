"""Ollama's native API: ``GET /api/tags`` lists models, ``POST /api/show`` describes one.

Ollama's OpenAI-compatible ``/v1/models`` carries no figures, so for an
``openai_compatible`` connection that looks like Ollama (port 11434, "ollama" in the
host) or whose ``/models`` has no figures or fails, discovery asks the native API at the
server root (the base URL without ``/v1``). From ``/api/show`` we read

* ``model_info["<general.architecture>.context_length"]`` — the model's trained window;
* ``num_ctx`` in ``parameters`` — the window Ollama actually serves, when set;
* ``capabilities`` — no ``completion`` (or ``embedding``) means not a chat model,
  ``vision`` means it takes images.

Caveat the notes tell the admin about: without ``num_ctx`` Ollama serves a model with its
server default context (``OLLAMA_CONTEXT_LENGTH``), which may be far smaller than the
trained window, and it truncates longer prompts silently.
"""
from __future__ import annotations

import re
from typing import Any

import httpx

from models_catalog.errors import AuthenticationError, ProviderError, UnsafeURLError
from models_catalog.providers.base import Listing, ListingContext, RawModel
from models_catalog.providers.events import as_dict
from models_catalog.providers.model_lists import positive_int

OLLAMA_PORT = 11434
MAX_SHOW_CALLS = 64  # one /api/show per model; a bound so a huge library cannot stall discovery
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def looks_like_ollama(base_url: str) -> bool:
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    return url.port == OLLAMA_PORT or "ollama" in (url.host or "").lower()


def ollama_root(base_url: str) -> str:
    """``http://host:11434/v1`` → ``http://host:11434`` (the native API lives at the root)."""
    root = base_url.rstrip("/")
    for suffix in ("/v1", "/api"):
        if root.endswith(suffix):
            return root[: -len(suffix)]
    return root


def parse_show(name: str, payload: Any) -> RawModel:
    """One ``/api/show`` answer → :class:`RawModel` (figures and chat capability)."""
    model = RawModel(id=name)
    if not isinstance(payload, dict):
        return model
    info = as_dict(payload.get("model_info"))
    arch = info.get("general.architecture")
    trained = positive_int(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None
    if trained is None:  # no architecture key: take any "<x>.context_length"
        trained = next((positive_int(v) for k, v in info.items() if k.endswith(".context_length")), None)
    params = payload.get("parameters")
    match = _NUM_CTX.search(params) if isinstance(params, str) else None
    served = positive_int(match.group(1)) if match else None
    if served:
        model.context_window = min(served, trained) if trained else served
        if trained and served < trained:
            model.notes.append(
                f"Ollama serves this model with num_ctx {served:,} (the model supports {trained:,})."
            )
    elif trained:
        model.context_window = trained
        model.notes.append(
            f"{trained:,} is the model's trained window. Ollama uses its server default context "
            "(OLLAMA_CONTEXT_LENGTH) unless num_ctx is set, and silently truncates longer prompts: "
            "set num_ctx or OLLAMA_CONTEXT_LENGTH to at least this window, or lower it here."
        )
    caps = payload.get("capabilities")
    if isinstance(caps, list) and caps:
        is_chat = "completion" in caps and "embedding" not in caps
        model.chat_capable = is_chat
        if not is_chat:
            model.chat_reason = "Ollama lists its capabilities as " + ", ".join(map(str, caps))
        model.supports_images = "vision" in caps
    return model


def list_ollama(ctx: ListingContext, *, root: str | None = None) -> Listing | None:
    """The native listing, or None when the server does not speak Ollama's API."""
    root = root or ollama_root(ctx.base_url)
    try:
        tags = ctx.get_json("/api/tags", root=root)
    except (AuthenticationError, UnsafeURLError):
        raise
    except ProviderError:
        return None  # 404, HTML, garbage: not Ollama, and that is fine
    if not isinstance(tags, dict) or not isinstance(tags.get("models"), list):
        return None
    models: list[RawModel] = []
    warnings: list[str] = []
    for index, item in enumerate(tags["models"]):
        if not isinstance(item, dict):
            continue
        name = item.get("model") or item.get("name")
        if not isinstance(name, str) or not name:
            continue
        if index >= MAX_SHOW_CALLS:
            models.append(RawModel(id=name))
            continue
        try:
            show = ctx.post_json("/api/show", {"model": name}, root=root)
        except AuthenticationError:
            raise
        except ProviderError:
            warnings.append(f"Ollama could not describe {name}; its figures are platform defaults.")
            models.append(RawModel(id=name))
            continue
        models.append(parse_show(name, show))
    if len(tags["models"]) > MAX_SHOW_CALLS:
        warnings.append(f"Only the first {MAX_SHOW_CALLS} Ollama models were described.")
    return Listing(models=models, api_shape="ollama", warnings=warnings)


def merge_ollama(listed: list[RawModel], native: list[RawModel]) -> list[RawModel]:
    """Figures from the native API for the ids ``/v1/models`` listed (``x`` = ``x:latest``)."""
    by_name = {m.id: m for m in native}
    for m in native:
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
        ))
    return merged
