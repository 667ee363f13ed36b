"""The provider registry: ``openai``, ``deepseek``, ``openai_compatible``, ``anthropic`` and ``demo``.

A provider is a :class:`ProviderSpec` — what the platform knows about it (its dialect,
output-limit field, defaults) plus one narrow ``list_models`` adapter and an optional chat
factory. Discovery, the chat client, the run loop and the connection forms, serializers
and validation look providers up here (the choices a form offers are
:func:`provider_choices`, read when the form is used), so adding one is a registration:
no edit of the callers and no migration.
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


def unregister_provider(name: str) -> None:
    """Remove ``name`` from the registry (a provider registered for a while, a test's)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def find_provider(name: object) -> ProviderSpec | None:
    """The spec registered under ``name``, or None for any other value (a non-string too)."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def provider_is_offline(name: str) -> bool:
    """Whether ``name`` is the offline demo model (False for a name no longer registered)."""
    spec = find_provider(name)
    return spec is not None and spec.offline


def provider_names() -> list[str]:
    """Every registered name, sorted: what an unknown name's error lists."""
    return sorted(_REGISTRY)


def provider_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every registered provider, in registration order: the choices of
    every provider select and field, asked each time they are shown or checked."""
    return [(spec.name, spec.label) for spec in list(_REGISTRY.values())]


def provider_label(name: str) -> str:
    """The label of ``name``, or the name itself once it is no longer registered."""
    spec = find_provider(name)
    return spec.label if spec is not None else name


__all__ = [
    "ChatClient", "Listing", "ListingContext", "ProviderSpec", "RawModel",
    "find_provider", "get_provider", "provider_choices", "provider_is_offline", "provider_label", "provider_names",
    "register_provider", "unregister_provider",
]
