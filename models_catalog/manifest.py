"""The official manifest: verified limits of exact model ids on official endpoints (CAT-2).

OpenAI's and DeepSeek's ``/models`` lists carry no window figures, so the platform keeps a
small, versioned table (``manifest.json``) of exact ids with a source link and a check
date. Two rules keep it honest:

* **exact id only** — ``gpt-4o-2024-99-99`` is *not* ``gpt-4o``; a new snapshot gets
  figures only after someone checks and adds it (a prefix guess is how budgets break);
* **official endpoints only** — a proxy or a custom server that serves a model called
  ``gpt-4o`` may put any window behind it, so a custom ``base_url`` never gets manifest
  figures.

Every figure handed out carries the manifest ``version`` so a stored connection can say
which edition of the table its numbers came from.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from models_catalog.url_syntax import MalformedURL, url_parse

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
_VERSION_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\.\d+$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class ManifestFormatError(ValueError):
    """The manifest file is malformed; raised at load time so a bad edit fails loudly."""


@dataclass(frozen=True)
class ManifestEntry:
    """Official limits of one exact model id."""

    id: str
    provider: str
    context_window: int
    max_output_tokens: int
    source_url: str
    checked: str
    max_input_tokens: int | None = None
    supports_images: bool | None = None
    note: str | None = None


@dataclass(frozen=True)
class Manifest:
    """The whole table: ``version``, official endpoints per provider, and the entries."""

    version: str
    endpoints: dict[str, tuple[str, ...]]
    entries: dict[tuple[str, str], ManifestEntry]

    def endpoint_provider(self, base_url: str | None) -> str | None:
        """The provider whose official endpoint ``base_url`` is, or None for a custom URL."""
        if not base_url:
            return None
        normalised = normalise_base_url(base_url)
        for provider, urls in self.endpoints.items():
            if normalised in urls:
                return provider
        return None

    def lookup(self, *, base_url: str | None, model_id: str) -> ManifestEntry | None:
        """The entry for ``model_id`` served at ``base_url``; exact id, official endpoint only."""
        provider = self.endpoint_provider(base_url)
        if provider is None:
            return None
        return self.entries.get((provider, model_id))


def normalise_base_url(url: str) -> str:
    """Canonical form for comparing base URLs: lower-case scheme and host, no default
    port, no trailing slashes, no query or fragment. The path keeps its case."""
    text = url.strip()
    if text.startswith("demo://"):
        return text.rstrip("/")
    try:
        parsed = url_parse(text)
    except MalformedURL:  # compared as typed: it equals no endpoint, and validation names the problem
        return text.rstrip("/")
    scheme = parsed.scheme.lower()
    host = (parsed.host or "").lower().rstrip(".")
    port = parsed.port
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port in (None, default) else f"{host}:{port}"
    if ":" in host and not host.startswith("["):
        netloc = f"[{host}]" if port in (None, default) else f"[{host}]:{port}"
    path = parsed.path.rstrip("/")
    return f"{scheme}://{netloc}{path}"


def parse_manifest(data: Any) -> Manifest:
    """Validate the JSON document and build a :class:`Manifest`."""
    if not isinstance(data, dict):
        raise ManifestFormatError("manifest must be a JSON object")
    version = data.get("version")
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ManifestFormatError("manifest 'version' must look like 2026-11-30.1")
    raw_endpoints = data.get("endpoints")
    if not isinstance(raw_endpoints, dict):
        raise ManifestFormatError("manifest 'endpoints' must be an object")
    endpoints = {p: tuple(normalise_base_url(u) for u in urls) for p, urls in raw_endpoints.items()}
    entries: dict[tuple[str, str], ManifestEntry] = {}
    for raw in data.get("models") or []:
        entry = _parse_entry(raw, endpoints)
        key = (entry.provider, entry.id)
        if key in entries:
            raise ManifestFormatError(f"duplicate manifest entry {key}")
        entries[key] = entry
    return Manifest(version=version, endpoints=endpoints, entries=entries)


def _parse_entry(raw: Any, endpoints: dict[str, tuple[str, ...]]) -> ManifestEntry:
    if not isinstance(raw, dict):
        raise ManifestFormatError("each manifest model must be an object")
    model_id = raw.get("id")
    provider = raw.get("provider")
    if not isinstance(model_id, str) or not model_id or model_id != model_id.strip():
        raise ManifestFormatError(f"bad model id {model_id!r}")
    if provider not in endpoints:
        raise ManifestFormatError(f"{model_id}: provider {provider!r} has no official endpoint")
    window = raw.get("context_window")
    output = raw.get("max_output_tokens")
    max_input = raw.get("max_input_tokens")
    if not _positive_int(window) or not _positive_int(output):
        raise ManifestFormatError(f"{model_id}: context_window and max_output_tokens must be positive integers")
    assert isinstance(window, int) and isinstance(output, int)
    if output > window:
        raise ManifestFormatError(f"{model_id}: max_output_tokens exceeds context_window")
    if max_input is not None and (not isinstance(max_input, int) or not 0 < max_input <= window):
        raise ManifestFormatError(f"{model_id}: max_input_tokens must be within context_window")
    source_url, checked = raw.get("source_url"), raw.get("checked")
    if not isinstance(source_url, str) or not source_url:
        raise ManifestFormatError(f"{model_id}: source_url is required")
    if not isinstance(checked, str) or not _DATE_RE.match(checked):
        raise ManifestFormatError(f"{model_id}: checked must be a YYYY-MM-DD date")
    return ManifestEntry(
        id=model_id,
        provider=provider,
        context_window=window,
        max_output_tokens=output,
        max_input_tokens=max_input,
        supports_images=raw.get("supports_images"),
        source_url=source_url,
        checked=checked,
        note=raw.get("note"),
    )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def load_manifest(path: str | Path | None = None) -> Manifest:
    """Load and validate a manifest file (the packaged one by default, cached)."""
    if path is None:
        return _packaged_manifest()
    return parse_manifest(json.loads(Path(path).read_text(encoding="utf-8")))


@lru_cache(maxsize=1)
def _packaged_manifest() -> Manifest:
    return parse_manifest(json.loads(MANIFEST_PATH.read_text(encoding="utf-8")))


def manifest_lookup(*, base_url: str | None, model_id: str, manifest: Manifest | None = None) -> ManifestEntry | None:
    """Shortcut for ``load_manifest().lookup(...)``."""
    return (manifest or load_manifest()).lookup(base_url=base_url, model_id=model_id)
