"""What an attached file is, from its bytes alone (RUN-13): never from its name or the
type a browser claimed.

Taken: PNG, JPEG, WebP and GIF images that Pillow decodes whole as the type their first
bytes claim, still (one frame), at most 8000 pixels on a side (size checked from the header
before decoding), and for JPEG in a form models read (8-bit Huffman: baseline, extended or
progressive),
PDF (its text extracted by pypdf in a separate process, bounded in pages, time and memory:
:mod:`sessions.pdf_text`) and text — UTF-8,
UTF-16 with a byte-order mark, or else Windows-1252 (a single-byte encoding), each only
when the decoded text holds no NUL or other control character but tab, line breaks,
form feed and escape (coloured logs). SVG and HTML are text like any other markup: stored
and shown to the model as ``text/plain``, downloaded as an attachment, never rendered.

Refused (``Unsupported``): archives (zip — and with it every office document, jar and
apk — gzip, bzip2, xz, 7z, rar, zstd, tar), executables (ELF, PE, Mach-O, WebAssembly),
old office files, and anything else that is not text by the rule above.

Plain Python, no Django: content in, :class:`Sniffed` or an exception out.
"""
from __future__ import annotations

import io
import re
import struct
from dataclasses import dataclass

from PIL import Image

from sessions.pdf_text import pdf_read


class Unsupported(ValueError):
    """Not a kind of file we take; the message says what it looked like, for the person."""


class Unreadable(ValueError):
    """A kind we take, but this one cannot be read or sent to a model (a truncated or
    animated image, one too large, a locked PDF); the message says what to do instead."""


@dataclass(frozen=True)
class Sniffed:
    kind: str  # "text", "pdf", "image"
    content_type: str
    encoding: str = ""
    text: str = ""
    pages: int | None = None
    pages_read: int | None = None
    width: int | None = None
    height: int | None = None


IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")

_REFUSED: tuple[tuple[int, bytes, str], ...] = (
    (0, b"PK\x03\x04", "a zip archive (office documents are zip archives too)"),
    (0, b"PK\x05\x06", "a zip archive"),
    (0, b"PK\x07\x08", "a zip archive"),
    (0, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old office document"),
    (0, b"\x7fELF", "a program"),
    (0, b"\xfe\xed\xfa\xce", "a program"),
    (0, b"\xfe\xed\xfa\xcf", "a program"),
    (0, b"\xce\xfa\xed\xfe", "a program"),
    (0, b"\xcf\xfa\xed\xfe", "a program"),
    (0, b"\xca\xfe\xba\xbe", "a program"),
    (0, b"\x00asm", "a program"),
    (0, b"\x1f\x8b", "a compressed archive"),
    (0, b"BZh", "a compressed archive"),
    (0, b"\xfd7zXZ\x00", "a compressed archive"),
    (0, b"7z\xbc\xaf\x27\x1c", "a compressed archive"),
    (0, b"Rar!\x1a\x07", "a compressed archive"),
    (0, b"\x28\xb5\x2f\xfd", "a compressed archive"),
    (257, b"ustar", "a tar archive"),
)

# C0 controls but tab, LF, VT, FF, CR (0x09–0x0d) and ESC (0x1b); and DEL.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")


def sniff(data: bytes, *, pdf_max_pages: int, pdf_max_seconds: float) -> Sniffed:
    """What ``data`` is. Raises Unsupported or Unreadable."""
    for offset, magic, what in _REFUSED:
        if data[offset:offset + len(magic)] == magic:
            raise Unsupported(f"This looks like {what}.")
    if data.startswith(b"MZ") and b"\x00" in data[:64]:  # a DOS/Windows program header
        raise Unsupported("This looks like a program.")
    image = _image(data)
    if image is not None:
        return image
    header = data.find(b"%PDF-", 0, 1024)  # readers accept a header a little way in
    if header == 0:
        return pdf_text(data, max_pages=pdf_max_pages, max_seconds=pdf_max_seconds)
    if header > 0:
        try:
            return pdf_text(data, max_pages=pdf_max_pages, max_seconds=pdf_max_seconds)
        except Unreadable:
            pass  # text that merely mentions a PDF header
    return _text(data)


# --- images -------------------------------------------------------------------------------------

# Anthropic refuses an image wider or taller than this; OpenAI scales larger ones down.
IMAGE_MAX_SIDE = 8000
# Checked from the header before any decoding (no decompression bomb): a 4:3 photo at the
# largest side, at most ~190 MB while decoded. Pillow's own guard is set to the same bound.
IMAGE_MAX_PIXELS = 8000 * 6000
Image.MAX_IMAGE_PIXELS = IMAGE_MAX_PIXELS

_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
# What Pillow must find, per sniffed type; MPO is a JPEG with further pictures (phones' depth
# maps, stereo cameras) that every reader shows as its first, ordinary JPEG picture.
_FORMATS = {"image/png": ("PNG",), "image/jpeg": ("JPEG", "MPO"), "image/gif": ("GIF",), "image/webp": ("WEBP",)}


def _image(data: bytes) -> Sniffed | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        if data[12:16] != b"IHDR" or len(data) < 24:
            raise _damaged("image/png")
        width, height = struct.unpack(">II", data[16:24])
        return _picture(data, "image/png", width, height)
    if data.startswith(b"\xff\xd8\xff"):
        width, height = _jpeg_size(data)
        return _picture(data, "image/jpeg", width, height)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        if len(data) < 10:
            raise _damaged("image/gif")
        width, height = struct.unpack("<HH", data[6:10])
        return _picture(data, "image/gif", width, height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        width, height = _webp_size(data)
        return _picture(data, "image/webp", width, height)
    return None


def _damaged(content_type: str) -> Unreadable:
    return Unreadable(f"This {_NAMES[content_type]} image is cut short or damaged. "
                      "Open it, save it again and attach the copy, or attach a screenshot of it.")


def _picture(data: bytes, content_type: str, width: int, height: int) -> Sniffed:
    """The image once its header's size is within bounds and Pillow has decoded all of it
    as the type its first bytes claim, a single still picture: what both providers read."""
    if width <= 0 or height <= 0:
        raise Unreadable("This image has no size in its header; it is damaged. "
                         "Save it again and attach the copy.")
    if width > IMAGE_MAX_SIDE or height > IMAGE_MAX_SIDE:
        raise Unreadable(f"This image is {width} × {height} pixels; models take at most {IMAGE_MAX_SIDE} "
                         "pixels on a side. Attach a scaled-down copy.")
    if width * height > IMAGE_MAX_PIXELS:
        raise Unreadable(f"This image is {width} × {height} pixels, more than the "
                         f"{IMAGE_MAX_PIXELS // 1_000_000} million this server reads. Attach a scaled-down copy.")
    formats = _FORMATS[content_type]
    try:
        with Image.open(io.BytesIO(data), formats=formats[:1]) as image:
            image.verify()  # checksums and structure, without decoding (PNG's chunk CRCs)
        with Image.open(io.BytesIO(data), formats=formats[:1]) as image:
            if image.format not in formats or image.size != (width, height):
                raise _damaged(content_type)
            if image.format != "MPO" and getattr(image, "n_frames", 1) > 1:
                raise Unreadable("This image is animated; animated images cannot be sent to a model: "
                                 "attach a still image.")
            image.load()
    except Unreadable:
        raise
    except Exception as exc:  # untrusted bytes: whatever the decoder trips on, the image is unreadable
        raise _damaged(content_type) from exc
    return Sniffed(kind="image", content_type=content_type, width=width, height=height)


# Start-of-frame markers carry the size; C4 (Huffman tables), C8 and CC do not. Models read
# 8-bit baseline, extended and progressive Huffman JPEGs (C0–C2) only.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_READ = frozenset({0xC0, 0xC1, 0xC2})


def _jpeg_size(data: bytes) -> tuple[int, int]:
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
            return width, height
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


# --- text ---------------------------------------------------------------------------------------

_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def _text(data: bytes) -> Sniffed:
    decoded: tuple[str, str] | None = None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                decoded = data[len(bom):].decode(encoding), encoding
            except UnicodeDecodeError:
                raise Unsupported("This file is not text, nor a PDF or an image.") from None
            break
    if decoded is None:
        try:
            decoded = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            try:
                decoded = data.decode("cp1252"), "cp1252"
            except UnicodeDecodeError:
                raise Unsupported("This file is not text, nor a PDF or an image.") from None
    text, encoding = decoded
    if _CONTROL.search(text):
        raise Unsupported("This file is not text, nor a PDF or an image.")
    return Sniffed(kind="text", content_type="text/plain", encoding=encoding, text=text)


# --- PDF ----------------------------------------------------------------------------------------


def pdf_text(data: bytes, *, max_pages: int, max_seconds: float) -> Sniffed:
    """The text of the first ``max_pages`` pages, read in a separate process stopped after
    ``max_seconds`` (:func:`sessions.pdf_text.pdf_read`): the pages read by then are kept,
    and a PDF with none read by then is Unreadable. ``pages`` is the document's count,
    ``pages_read`` how many were read."""
    found = pdf_read(data, max_pages=max_pages, max_seconds=max_seconds)
    if found.refusal:
        raise Unreadable(found.refusal)
    return Sniffed(kind="pdf", content_type="application/pdf", text=found.text,
                   pages=found.pages, pages_read=found.pages_read)
