"""Files made in the test: a PDF with text objects and a PNG byte by byte, other images by Pillow."""
from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


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


def make_image(fmt: str, width: int = 30, height: int = 20, *, mode: str = "RGB", frames: int = 1,
               **options) -> bytes:
    """A real image saved by Pillow in ``fmt`` (``"JPEG"``, ``"WEBP"``, ``"GIF"``, ``"MPO"``…);
    ``frames`` > 1 saves that many frames of different colours (an animation, or an MPO's pictures)."""
    pictures = [Image.new(mode, (width, height), (40 * i % 256, 120, 200, 128)[:len(mode)]) for i in range(frames)]
    out = io.BytesIO()
    if frames > 1:
        options.update(save_all=True, append_images=pictures[1:], duration=100, loop=0)
    pictures[0].save(out, fmt, **options)
    return out.getvalue()


def png_of_zeros(width: int, height: int, *, colour: int = 6) -> bytes:
    """A real, valid PNG of ``width`` × ``height`` black pixels (``colour``: 0 grey, 2 RGB,
    6 RGBA) that is small however large its pixels are: a decompression bomb.

    Made in milliseconds: one row is compressed once, ending in a full flush (so it refers
    to nothing before it), and that block repeated for every row; the checksum is the
    Adler-32 of the rows, the stream ends with an empty final block."""
    row = bytes(1 + width * {0: 1, 2: 3, 6: 4}[colour])
    packer = zlib.compressobj(9)
    first = packer.compress(row) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(row) + packer.flush(zlib.Z_FULL_FLUSH)
    assert first[2:] == again  # after the two-byte zlib header, each row's block is the same
    checksum = 1
    for _ in range(height):
        checksum = zlib.adler32(row, checksum)
    body = first + again * (height - 1) + b"\x03\x00" + struct.pack(">I", checksum)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0))
            + _chunk(b"IDAT", body) + _chunk(b"IEND", b""))
