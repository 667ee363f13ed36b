"""A server tool's result as a tool result record (TOOL-4, TOOL-6).

Pure: it reads the protocol's JSON of a ``CallToolResult`` (as the SDK dumps it) and
returns what the record keeps. Text stays text; images become the OpenAI-style
``image_url`` parts the engine already places for every wire (CTX-8 trims them only for a
tool marked ``observes_screen``); audio, resource links and embedded resources become
text that names their URI; ``structuredContent`` is kept beside the content. Nothing in
a result is ever read as an instruction: it is data the model reads (TOOL-6).
"""
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class ConvertedResult:
    is_error: bool
    content: str | list[dict[str, Any]]
    structured: dict[str, Any] | None = None


def _size(data: str) -> int | None:
    """Decoded size of base64 ``data``, or None when it is not base64."""
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _image(part: Mapping[str, Any]) -> dict[str, Any]:
    mime = str(part.get("mimeType") or "")
    data = part.get("data")
    size = _size(data) if isinstance(data, str) else None
    if mime not in IMAGE_TYPES or size is None:
        return {"type": "text", "text": f"[an image of type {mime or 'unknown'} that cannot be shown]"}
    if size > MAX_IMAGE_BYTES:
        return {"type": "text", "text": f"[an image of {size:,} bytes, larger than the {MAX_IMAGE_BYTES:,}-byte "
                                        "limit, was left out]"}
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def _named(uri: Any, mime: Any) -> str:
    return f"<{uri}>" + (f" ({mime})" if mime else "")


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "image":
        return _image(part)
    if kind == "audio":
        size = _size(part["data"]) if isinstance(part.get("data"), str) else None
        about = f", {size:,} bytes" if size is not None else ""
        return {"type": "text", "text": f"[audio ({part.get('mimeType') or 'unknown type'}{about}) that the model "
                                        "cannot hear]"}
    if kind == "resource_link":
        description = f" — {part['description']}" if part.get("description") else ""
        return {"type": "text", "text": f"[resource link: {part.get('name', '')} "
                                        f"{_named(part.get('uri'), part.get('mimeType'))}{description}]"}
    if kind == "resource":
        resource = part.get("resource")
        if not isinstance(resource, Mapping):
            resource = {}
        where = _named(resource.get("uri"), resource.get("mimeType"))
        if isinstance(resource.get("text"), str):
            return {"type": "text", "text": f"[resource {where}]\n{resource['text']}"}
        size = _size(resource["blob"]) if isinstance(resource.get("blob"), str) else None
        about = f"{size:,} bytes of " if size is not None else ""
        return {"type": "text", "text": f"[resource {where}: {about}binary content, not shown]"}
    return {"type": "text", "text": f"[{kind or 'unknown'} content that AgentLoom does not read]"}


def result_content(result: Mapping[str, Any]) -> ConvertedResult:
    """``content`` (text when there is no image, else parts), ``isError`` and
    ``structuredContent`` of a ``tools/call`` result."""
    parts = [_part(p) for p in result.get("content") or [] if isinstance(p, Mapping)]
    structured = result.get("structuredContent")
    structured = dict(structured) if isinstance(structured, Mapping) else None
    if not parts and structured is not None:
        # A server may answer with structured content only; the model reads it as JSON.
        parts = [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]
    if any(p["type"] != "text" for p in parts):
        content: str | list[dict[str, Any]] = parts
    else:
        content = "\n".join(p["text"] for p in parts)
    return ConvertedResult(is_error=bool(result.get("isError")), content=content, structured=structured)
