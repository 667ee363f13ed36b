"""The provider registry: ``openai``, ``deepseek``, ``openai_compatible`` and ``demo``.

A provider is a :class:`ProviderSpec` — defaults plus one narrow ``list_models`` adapter
(and an optional chat factory). Discovery and the chat client look providers up here, so
adding one is a registration, not an edit of the callers.
"""
from __future__ import annotations

import threading

from models_catalog.errors import InvalidRequestError
from models_catalog.providers.base import Listing, ListingContext, ProviderSpec, RawModel

_REGISTRY: dict[str, ProviderSpec] = {}
_BUILTINS_LOADED = False
_LOADING = False
# Worker threads make their first model calls at the same moment: without the lock one
# thread could see the "loaded" flag while another is still registering the built-ins,
# and fail a run with "unknown provider" (found by the load run).
_LOCK = threading.RLock()


def _ensure_builtins() -> None:
    """Register the built-in providers on first use (importing them eagerly would make
    ``models_catalog.demo`` and this package import each other)."""
    global _BUILTINS_LOADED, _LOADING
    if _BUILTINS_LOADED:
        return
    with _LOCK:
        if _BUILTINS_LOADED or _LOADING:  # done, or this thread is inside the import below
            return
        _LOADING = True
        try:
            from models_catalog.providers import builtin  # noqa: F401  (registers on import)
        finally:
            _LOADING = False
        _BUILTINS_LOADED = True


def register_provider(spec: ProviderSpec, *, replace: bool = False) -> ProviderSpec:
    """Add ``spec`` to the registry; refuse to shadow a name unless ``replace``."""
    _ensure_builtins()
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"provider {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def get_provider(name: str) -> ProviderSpec:
    """The spec registered under ``name``; an unknown name is the caller's mistake (400)."""
    _ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidRequestError(f"Unknown provider {name!r}.", code="unknown_provider") from None


def provider_names() -> list[str]:
    _ensure_builtins()
    return sorted(_REGISTRY)


__all__ = [
    "Listing", "ListingContext", "ProviderSpec", "RawModel",
    "get_provider", "provider_names", "register_provider",
]
