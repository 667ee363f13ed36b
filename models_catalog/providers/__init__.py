"""The provider registry: ``openai``, ``deepseek``, ``openai_compatible`` and ``demo``.

A provider is a :class:`ProviderSpec` — defaults plus one narrow ``list_models`` adapter
(and an optional chat factory). Discovery and the chat client look providers up here, so
adding one is a registration, not an edit of the callers.
"""
from __future__ import annotations

from models_catalog.errors import InvalidRequestError
from models_catalog.providers.base import Listing, ListingContext, ProviderSpec, RawModel

_REGISTRY: dict[str, ProviderSpec] = {}
_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    """Register the built-in providers on first use (importing them eagerly would make
    ``models_catalog.demo`` and this package import each other)."""
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        from models_catalog.providers import builtin  # noqa: F401  (registers on import)


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
