"""The provider registry: ``openai``, ``deepseek``, ``openai_compatible``, ``anthropic`` and ``demo``.

A provider is a :class:`ProviderSpec` — what the platform knows about it (its dialect,
output-limit field, defaults) plus one narrow ``list_models`` adapter and an optional chat
factory. Discovery, the chat client and the run loop look providers up here, so adding
one is a registration, not an edit of the callers.
"""
from __future__ import annotations

import threading

from models_catalog.errors import InvalidRequestError
from models_catalog.providers.base import ChatClient, Listing, ListingContext, ProviderSpec, RawModel
from models_catalog.providers.builtin import BUILTIN_PROVIDERS

_REGISTRY: dict[str, ProviderSpec] = {spec.name: spec for spec in BUILTIN_PROVIDERS}
_LOCK = threading.Lock()


def register_provider(spec: ProviderSpec, *, replace: bool = False) -> ProviderSpec:
    """Add ``spec`` to the registry; refuse to shadow a name unless ``replace``."""
    with _LOCK:
        if spec.name in _REGISTRY and not replace:
            raise ValueError(f"provider {spec.name!r} is already registered")
        _REGISTRY[spec.name] = spec
    return spec


def get_provider(name: str) -> ProviderSpec:
    """The spec registered under ``name``; an unknown name is the caller's mistake (400)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidRequestError(f"Unknown provider {name!r}.", code="unknown_provider") from None


def provider_is_offline(name: str) -> bool:
    """Whether ``name`` is the offline demo model (False for a name no longer registered)."""
    spec = _REGISTRY.get(name)
    return spec is not None and spec.offline


def provider_names() -> list[str]:
    return sorted(_REGISTRY)


__all__ = [
    "ChatClient", "Listing", "ListingContext", "ProviderSpec", "RawModel",
    "get_provider", "provider_is_offline", "provider_names", "register_provider",
]
