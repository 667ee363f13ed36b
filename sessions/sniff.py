"""What an attached file is, from its bytes alone (RUN-13): never from its name or the
type a browser claimed.

Taken: PNG, JPEG, WebP and GIF images by the rules of :mod:`core.images` (bounded
from the header before decoding — 8000 pixels on a side, 48 million in all, the bytes once
decoded — then decoded whole, still, in a child process),
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

import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from core.images import (
    IMAGE_MAX_DECODED_BYTES,
    IMAGE_MAX_PIXELS,
    IMAGE_MAX_SIDE,
    IMAGE_TYPES,
    ImageTooLarge,
    Unreadable,
    image_check,
    image_header,
)
from sessions.pdf_text import pdf_read

__all__ = ["IMAGE_MAX_PIXELS", "IMAGE_MAX_SIDE", "IMAGE_TYPES", "ImageTooLarge", "Sniffed", "Unreadable",
           "Unsupported", "pdf_text", "sniff"]


class Unsupported(ValueError):
    """Not a kind of file we take; the message says what it looked like, for the person."""


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


def sniff(data: bytes, *, pdf_max_pages: int, pdf_max_seconds: float,
          image_max_decoded_bytes: int = IMAGE_MAX_DECODED_BYTES,
          around_child: Callable[[], AbstractContextManager[object]] = nullcontext) -> Sniffed:
    """What ``data`` is. Raises Unsupported or Unreadable (ImageTooLarge for an image past
    the size bounds). ``around_child`` is entered around each child process the sniffing
    starts (a PDF read, an image decoded): the web's bound on slow work."""
    for offset, magic, what in _REFUSED:
        if data[offset:offset + len(magic)] == magic:
            raise Unsupported(f"This looks like {what}.")
    if data.startswith(b"MZ") and b"\x00" in data[:64]:  # a DOS/Windows program header
        raise Unsupported("This looks like a program.")
    image = _image(data, max_decoded_bytes=image_max_decoded_bytes, around_child=around_child)
    if image is not None:
        return image
    header = data.find(b"%PDF-", 0, 1024)  # readers accept a header a little way in
    if header == 0:
        return pdf_text(data, max_pages=pdf_max_pages, max_seconds=pdf_max_seconds, around_child=around_child)
    if header > 0:
        try:
            return pdf_text(data, max_pages=pdf_max_pages, max_seconds=pdf_max_seconds, around_child=around_child)
        except Unreadable:
            pass  # text that merely mentions a PDF header
    return _text(data)


# --- images: core/images.py ---------------------------------------------------------------


def _image(data: bytes, *, max_decoded_bytes: int, around_child: Callable[[], AbstractContextManager[object]]
           ) -> Sniffed | None:
    if image_header(data) is None:
        return None
    image = image_check(data, max_decoded_bytes=max_decoded_bytes, around_decoding=around_child)
    return Sniffed(kind="image", content_type=image.content_type, width=image.width, height=image.height)


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


def pdf_text(data: bytes, *, max_pages: int, max_seconds: float,
             around_child: Callable[[], AbstractContextManager[object]] = nullcontext) -> Sniffed:
    """The text of the first ``max_pages`` pages, read in a separate process stopped after
    ``max_seconds`` (:func:`sessions.pdf_text.pdf_read`, ``around_child`` entered around
    it): the pages read by then are kept, and a PDF with none read by then is Unreadable.
    ``pages`` is the document's count, ``pages_read`` how many were read."""
    with around_child():
        found = pdf_read(data, max_pages=max_pages, max_seconds=max_seconds)
    if found.refusal:
        raise Unreadable(found.refusal)
    return Sniffed(kind="pdf", content_type="application/pdf", text=found.text,
                   pages=found.pages, pages_read=found.pages_read)
