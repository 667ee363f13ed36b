"""Whether untrusted bytes are an image a model can be sent (RUN-13; tool results, TOOL-4).

:func:`image_check` is the one door: bytes in, a :class:`CheckedImage` (type and size) or
an error out — an attached file and an image a tool server returned go through it alike.

Taken: PNG, JPEG, WebP and GIF images that Pillow decodes whole as the type their first
bytes claim, still (one frame; an MPO is a JPEG whose first picture every reader shows),
and for JPEG in a form models read (8-bit Huffman: baseline, extended or progressive).

**Bounded before decoding.** The header says how large the picture is, and a tiny file
can claim a huge one: a PNG of 139 KB of compressed zeros is 6900 × 6900 pixels, 190 MB
once decoded, and twenty of them decoded at once grew a web process by 2.5 GB. So the
size is read from the header and refused before anything is decoded: more than
``IMAGE_MAX_SIDE`` pixels on a side (what Anthropic takes), more than
``IMAGE_MAX_PIXELS`` in all, or more than ``max_decoded_bytes`` once decoded — width ×
height × the bytes Pillow holds per pixel for the header's colour type (4 for colour,
with or without alpha; 1 for grey or a palette; 2 for 16-bit grey). Refused as
:class:`ImageTooLarge`, with the figures and what to do.

**Decoded elsewhere.** What passes is decoded in a child process
(:mod:`core.image_decode`, run by :mod:`core.child_process`) with an address
space of ``MAX_MEMORY_BYTES`` and a deadline: whatever the decoder takes is given back to
the system when the child ends, never kept by the web process or a worker. A caller that
serves many people enters ``around_decoding`` around the child (the web's bound on slow
work, ``core/slow_work.py``).

Plain Python, no Django, no Pillow in this process.
"""
from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from core.child_process import child_run

IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
# Anthropic refuses an image wider or taller than this; OpenAI scales larger ones down.
IMAGE_MAX_SIDE = 8000
# A 4:3 picture at the largest side; only grey and palette images reach it under the
# decoded bound below.
IMAGE_MAX_PIXELS = 8000 * 6000
# What one image may take once decoded: a colour picture of 33 million pixels (an 8K
# screenshot, 7680 × 4320, is 133 MB). Models see far less (Anthropic scales past 1568
# pixels on the long side), so a larger copy gains a person nothing.
IMAGE_MAX_DECODED_BYTES = 128 * 1024 * 1024
IMAGE_MAX_SECONDS = 10.0  # a decode past this is stopped, the image refused
MAX_MEMORY_BYTES = 1024 * 1024 * 1024  # address space of the decoding process
_DECODER = Path(__file__).resolve().with_name("image_decode.py")

_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
# What Pillow must find, per sniffed type; MPO is a JPEG with further pictures (phones' depth
# maps, stereo cameras) that every reader shows as its first, ordinary JPEG picture.
_FORMATS = {"image/png": ("PNG",), "image/jpeg": ("JPEG", "MPO"), "image/gif": ("GIF",), "image/webp": ("WEBP",)}

TOO_SLOW = "This image took too long to read. Save it again as an ordinary PNG or JPEG and attach the copy."
TOO_BIG = "This image needs too much memory to read. Attach a scaled-down copy."
ANIMATED = "This image is animated; animated images cannot be sent to a model: attach a still image."


class Unreadable(ValueError):
    """A kind we take, but this one cannot be read or sent to a model (a truncated or
    animated image, one too large, a locked PDF); the message says what to do instead."""


class ImageTooLarge(Unreadable):
    """An image larger than this server reads (its header said so; nothing was decoded)."""


class NotAnImage(Unreadable):
    """Bytes that are not a PNG, JPEG, WebP or GIF image, whatever they were called."""


@dataclass(frozen=True)
class ImageHeader:
    """What an image's first bytes claim: its type, its size and the bytes a pixel takes
    once decoded."""

    content_type: str
    width: int
    height: int
    pixel_bytes: int = 4

    @property
    def decoded_bytes(self) -> int:
        return self.width * self.height * self.pixel_bytes


@dataclass(frozen=True)
class CheckedImage:
    content_type: str
    width: int
    height: int


def image_check(data: bytes, *, max_decoded_bytes: int = IMAGE_MAX_DECODED_BYTES,
                max_seconds: float = IMAGE_MAX_SECONDS,
                around_decoding: Callable[[], AbstractContextManager[object]] = nullcontext) -> CheckedImage:
    """The image ``data`` is, once its header's size is within the bounds and Pillow has
    decoded all of it (in a child process, ``around_decoding`` entered around it) as the
    type its first bytes claim, a single still picture: what both providers read.

    Raises NotAnImage (not one of the four types), ImageTooLarge (from the header, before
    any decoding) or Unreadable (damaged, animated, a JPEG form models cannot read, too
    slow or too large to decode); each message is for the person.
    """
    header = image_header(data)
    if header is None:
        raise NotAnImage("This is not a PNG, JPEG, WebP or GIF image.")
    image_bounds_check(header, max_decoded_bytes=max_decoded_bytes)
    formats = _FORMATS[header.content_type]
    command = [sys.executable, "-P", "-s", str(_DECODER), ",".join(formats), str(header.width), str(header.height),
               str(math.ceil(max_seconds) + 1), str(MAX_MEMORY_BYTES)]
    with around_decoding():
        output = child_run(command, data, max_seconds=max_seconds, max_output_bytes=4096)
    outcome = output.records[0] if output.records and not output.malformed else {}
    if outcome.get("ok") is True:
        return CheckedImage(content_type=header.content_type, width=header.width, height=header.height)
    refused = outcome.get("refused")
    if refused == "animated":
        raise Unreadable(ANIMATED)
    if refused == "memory":
        raise Unreadable(TOO_BIG)
    if not output.finished and not output.malformed and not output.records:
        raise Unreadable(TOO_SLOW)
    raise _damaged(header.content_type)


def image_bounds_check(header: ImageHeader, *, max_decoded_bytes: int = IMAGE_MAX_DECODED_BYTES) -> None:
    """ImageTooLarge when the header's size is past a bound (no decoding: only the header
    was read), Unreadable when it has none."""
    width, height = header.width, header.height
    if width <= 0 or height <= 0:
        raise Unreadable("This image has no size in its header; it is damaged. "
                         "Save it again and attach the copy.")
    if width > IMAGE_MAX_SIDE or height > IMAGE_MAX_SIDE:
        raise ImageTooLarge(f"This image is {width} × {height} pixels; models take at most {IMAGE_MAX_SIDE} "
                            "pixels on a side. Attach a scaled-down copy.")
    if width * height > IMAGE_MAX_PIXELS:
        raise ImageTooLarge(f"This image is {width} × {height} pixels, more than the "
                            f"{IMAGE_MAX_PIXELS // 1_000_000} million this server reads. Attach a scaled-down copy.")
    if header.decoded_bytes > max_decoded_bytes:
        raise ImageTooLarge(f"This image is {width} × {height} pixels, {_mb(header.decoded_bytes)} once decoded; "
                            f"this server decodes at most {_mb(max_decoded_bytes)} of an image. "
                            "Attach a scaled-down copy.")


def _mb(size: int) -> str:
    return f"{size // (1024 * 1024)} MB" if size >= 1024 * 1024 else f"{size // 1024} KB"


def image_header(data: bytes) -> ImageHeader | None:
    """The header of ``data`` when its first bytes are a PNG, JPEG, GIF or WebP signature,
    else None. Unreadable when the header of the type they claim is cut short or damaged,
    or is a JPEG form models cannot read."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        if data[12:16] != b"IHDR" or len(data) < 24:
            raise _damaged("image/png")
        width, height = struct.unpack(">II", data[16:24])
        return ImageHeader("image/png", width, height, _png_pixel_bytes(data))
    if data.startswith(b"\xff\xd8\xff"):
        width, height, components = _jpeg_size(data)
        return ImageHeader("image/jpeg", width, height, 1 if components == 1 else 4)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        if len(data) < 10:
            raise _damaged("image/gif")
        width, height = struct.unpack("<HH", data[6:10])
        return ImageHeader("image/gif", width, height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        width, height = _webp_size(data)
        return ImageHeader("image/webp", width, height)
    return None


def _damaged(content_type: str) -> Unreadable:
    return Unreadable(f"This {_NAMES[content_type]} image is cut short or damaged. "
                      "Open it, save it again and attach the copy, or attach a screenshot of it.")


def _png_pixel_bytes(data: bytes) -> int:
    """Pillow's bytes a pixel for the IHDR's bit depth and colour type: grey and palette
    images one (two for 16-bit grey), every other type four (RGB is held as RGBX)."""
    if len(data) < 26:
        return 4  # no colour type: the largest; the decoder finds such a header damaged anyway
    depth, colour = data[24], data[25]
    if colour == 0:
        return 2 if depth == 16 else 1
    return 1 if colour == 3 else 4


# Start-of-frame markers carry the size; C4 (Huffman tables), C8 and CC do not. Models read
# 8-bit baseline, extended and progressive Huffman JPEGs (C0–C2) only.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_READ = frozenset({0xC0, 0xC1, 0xC2})


def _jpeg_size(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of colour components of a JPEG's first frame."""
    index = 2
    while index + 4 <= len(data):
        if data[index] != 0xFF:
            break
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            index += 2
            continue
        (length,) = struct.unpack(">H", data[index + 2:index + 4])
        if marker in _JPEG_SOF:
            if index + 9 > len(data):
                break
            precision, height, width = struct.unpack(">BHH", data[index + 4:index + 9])
            if marker not in _JPEG_READ or precision != 8:
                raise Unreadable("This JPEG is saved in a lossless, arithmetic-coded or 12-bit form that "
                                 "models cannot read. Save it again as an ordinary JPEG or as PNG and attach "
                                 "the copy.")
            components = data[index + 9] if index + 9 < len(data) else 3
            return width, height, components
        if length < 2:
            break
        index += 2 + length
    raise _damaged("image/jpeg")


def _webp_size(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    raise _damaged("image/webp")
