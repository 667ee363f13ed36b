"""Images a tool server returns, held to the rules of uploaded images (TOOL-4, RUN-13).

A server says what type an image is; nothing made it true. Before an image part of a
server's result reaches a record (and from there the model and the chat), its bytes go
through the same checks as an attached image (``sessions.sniff``): the image size bound
(``AGENTLOOM_IMAGE_MAX_BYTES``), a PNG, JPEG, WebP or GIF by its first bytes, its size in
pixels from the header before anything is decoded, and then Pillow decoding all of it as
that type, one still picture. An image that passes is kept under the type its bytes say
(a PNG called a JPEG is sent as the PNG it is); one that fails becomes a text note saying
what was left out and why, so the model knows an image was there.

Here, on the run loop's floor, rather than in ``toolservers.results``: the checks live
with the upload rules in ``sessions`` (a floor above the tool servers), and this is where
a server's result becomes the content of a record.
"""
from __future__ import annotations

import base64
import binascii
from typing import Any

from django.conf import settings

from sessions.sniff import Unreadable, Unsupported, sniff

DATA_URL_PREFIX = "data:"
# The checks only need to know an image is one; bytes that are a PDF are no image either
# way, so its text is not worth reading (one page, one second, then it is refused).
PDF_PAGES, PDF_SECONDS = 1, 1.0


def _first_sentence(message: str) -> str:
    """The part of an upload refusal that says what is wrong (its advice is for a person
    attaching a file, not for the model)."""
    sentence = message.split(". ")[0].split("; ")[0].rstrip(".")
    return sentence[:1].lower() + sentence[1:] if sentence.startswith("This ") else sentence


def _note(declared: str, why: str) -> dict[str, Any]:
    return {"type": "text", "text": f"[an image the tool sent as {declared} was left out: {why}]"}


def _checked(part: dict[str, Any]) -> dict[str, Any]:
    url = str(part.get("image_url", {}).get("url", ""))
    header, comma, data = url.partition(",")
    declared = header.removeprefix(DATA_URL_PREFIX).split(";")[0] or "an unknown type"
    if not url.startswith(DATA_URL_PREFIX) or not comma or not header.endswith(";base64"):
        return _note(declared, "it was not sent as image data")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return _note(declared, "its data is not base64")
    limit = settings.AGENTLOOM_IMAGE_MAX_BYTES
    if len(raw) > limit:
        return _note(declared, f"it is {len(raw):,} bytes, more than the {limit:,} an image may be")
    try:
        found = sniff(raw, pdf_max_pages=PDF_PAGES, pdf_max_seconds=PDF_SECONDS)
    except Unsupported as exc:
        return _note(declared, f"its bytes are not an image ({_first_sentence(str(exc))})")
    except Unreadable as exc:
        return _note(declared, _first_sentence(str(exc)))
    if found.kind != "image":
        return _note(declared, f"its bytes are not an image (they read as {found.kind})")
    return {"type": "image_url", "image_url": {"url": f"data:{found.content_type};base64,{data}"}}


def server_images_check(content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A server result's content with every image part checked: kept (under its true type)
    or replaced by a note. Text is left as it is."""
    if isinstance(content, str):
        return content
    return [_checked(part) if part.get("type") == "image_url" else part for part in content]
