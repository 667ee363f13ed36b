"""What the real APIs check of an image's bytes, shared by the strict fakes.

Both providers decode the base64 and look at the bytes: Anthropic refuses data that is
not the declared media type ("Image does not match the provided media type image/png"),
OpenAI bytes it cannot read as PNG, JPEG, GIF or WebP ("You uploaded an unsupported
image ..."). The type is told by the file's first bytes, as theirs is.

They also bound what one request carries (``dimensions`` reads an image's size from its
header, as cheaply as they do): Anthropic an image of 5 MB of base64 and 8000 px a side
(2000 px once a request has more than 20 images), 100 images and a 32 MB body; OpenAI an
image of 20 MB, 500 images and 50 MB of images in one request.
"""
from __future__ import annotations

import base64
import binascii
import struct

MB = 1024 * 1024
ANTHROPIC_IMAGE_BASE64 = 5 * MB  # measured on the base64 string
ANTHROPIC_SIDE, ANTHROPIC_MANY_SIDE, ANTHROPIC_MANY = 8000, 2000, 20
ANTHROPIC_IMAGES = 100  # per request, models with a 200k-token window
ANTHROPIC_REQUEST_BYTES = 32 * 1000 * 1000  # "32 MB", the body as sent
OPENAI_IMAGE_BYTES, OPENAI_IMAGES, OPENAI_REQUEST_IMAGE_BYTES = 20 * MB, 500, 50 * MB

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


def dimensions(raw: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from an image's header (PNG, GIF, JPEG, WebP), or None."""
    media = sniffed(raw)
    if media == "image/png" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return int(width), int(height)
    if media == "image/gif" and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return int(width), int(height)
    if media == "image/webp":
        chunk = raw[12:16]
        if chunk == b"VP8X" and len(raw) >= 30:
            return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
        if chunk == b"VP8L" and len(raw) >= 25:
            bits = int.from_bytes(raw[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        if chunk == b"VP8 " and len(raw) >= 30:
            width, height = struct.unpack("<HH", raw[26:30])
            return int(width) & 0x3FFF, int(height) & 0x3FFF
        return None
    if media == "image/jpeg":
        at = 2
        while at + 9 <= len(raw) and raw[at] == 0xFF:
            marker = raw[at + 1]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", raw[at + 5:at + 9])
                return int(width), int(height)
            at += 2 + int.from_bytes(raw[at + 2:at + 4], "big")
    return None
