"""A model request as something to run again by hand (the context inspector's "copy as
JSON / cURL"): the body exactly as sent, and a cURL command that posts it to the
provider's chat endpoint.

The command never holds the key. It reads it from the shell's ``$API_KEY`` (the first
line says so), in the header the provider expects; the stored key is write-only and is
never read here. Pure code: no Django, no network.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from models_catalog.providers import find_provider

KEY_PLACEHOLDER = "$API_KEY"
KEY_NOTE = "# The key is not in this command: set it first, e.g. export API_KEY='…' (the console never shows it)."


@dataclass(frozen=True)
class ChatEndpoint:
    url: str
    headers: tuple[tuple[str, str], ...]  # the key, when sent, as KEY_PLACEHOLDER


def chat_endpoint(*, provider: str, base_url: str, with_key: bool,
                  body: Mapping[str, Any] | None = None) -> ChatEndpoint | None:
    """Where ``provider``'s chat requests go from ``base_url`` (its default when blank),
    and their headers — with those ``body`` needs (the memory tool's beta on Anthropic's
    wire); None for a provider with no endpoint (the offline demo) or no base."""
    spec = find_provider(provider)
    if spec is None or spec.offline:
        return None
    base = spec.base_url_form((base_url or spec.default_base_url or "").strip())
    if not base:
        return None
    headers = [("Content-Type", "application/json"), *spec.chat_headers]
    if body is not None and spec.body_headers is not None:
        headers.extend(spec.body_headers(body))
    if with_key:
        headers.append((spec.key_header, f"{spec.key_scheme}{KEY_PLACEHOLDER}"))
    return ChatEndpoint(url=base.rstrip("/") + spec.chat_path, headers=tuple(headers))


def body_json(body: dict[str, Any]) -> str:
    """The body as JSON for people: indented, characters as they are."""
    return json.dumps(body, ensure_ascii=False, indent=2)


def curl_command(endpoint: ChatEndpoint, body: dict[str, Any]) -> str:
    """A POSIX shell command that sends ``body`` to ``endpoint``: the URL and the body
    single-quoted (nothing in them is expanded), each header double-quoted so that only
    ``$API_KEY`` is read from the shell. ``-N`` shows a streamed answer as it comes."""
    lines = [KEY_NOTE, f"curl -sS -N -X POST {shlex.quote(endpoint.url)} \\"]
    for name, value in endpoint.headers:
        # Header names and values are the registry's constants and the placeholder: no
        # quote, backslash or backtick to escape inside the double quotes.
        lines.append(f'  -H "{name}: {value}" \\')
    lines.append(f"  --data-binary {shlex.quote(json.dumps(body, ensure_ascii=False))}")
    return "\n".join(lines)
