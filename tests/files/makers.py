"""Files made in the test, byte by byte: a PDF with text objects, a PNG, a JPEG header."""
from __future__ import annotations

import struct
import zlib


def make_pdf(pages: list[str]) -> bytes:
    """A valid PDF with one text object per page (Helvetica), offsets and xref exact."""
    return make_pdf_of_streams([f"BT /F1 12 Tf 20 50 Td ({text}) Tj ET".encode() for text in pages], packed=False)


def make_pdf_of_streams(contents: list[bytes], *, packed: bool = True) -> bytes:
    """A valid PDF with one page a content stream, Flate-compressed when ``packed``."""
    count = len(contents)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, content in enumerate(contents):
        body, fields = (zlib.compress(content, 9), b" /Filter /FlateDecode") if packed else (content, b"")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {5 + 2 * index} 0 R >>".encode())
        objects.append(b"<< /Length %d%s >>\nstream\n" % (len(body), fields) + body + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def slow_page(operators: int = 400_000) -> bytes:
    """A page's content stream of ``operators`` tiny text-show operators: a few KB packed,
    seconds of pypdf's time (under its limit of tokens a stream)."""
    return b"BT /F1 12 Tf 20 50 Td " + b"(a) Tj " * operators + b"ET"


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def make_png(width: int, height: int) -> bytes:
    """A real RGB PNG of ``width`` × ``height`` grey pixels."""
    rows = b"".join(b"\x00" + b"\x80\x80\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b""))


def make_jpeg_header(width: int, height: int) -> bytes:
    """The start of a baseline JPEG: SOI, an APP0 (JFIF) segment, then SOF0 with the size."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"
