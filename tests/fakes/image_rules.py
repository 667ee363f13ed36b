"""What the real APIs check of an image's bytes, shared by the strict fakes.

Both providers decode the base64 and look at the bytes: Anthropic refuses data that is
not the declared media type ("Image does not match the provided media type image/png"),
OpenAI bytes it cannot read as PNG, JPEG, GIF or WebP ("You uploaded an unsupported
image ..."). The type is told by the file's first bytes, as theirs is.
"""
from __future__ import annotations

import base64
import binascii

_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
          (b"GIF89a", "image/gif"))


def decoded(data: str) -> bytes | None:
    """The bytes of base64 ``data``, or None when it is not base64."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def sniffed(raw: bytes) -> str | None:
    """The image media type of ``raw`` by its first bytes, or None."""
    for magic, media in _MAGIC:
        if raw.startswith(magic):
            return media
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None
