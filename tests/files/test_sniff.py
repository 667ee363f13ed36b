"""Sniffing by content (RUN-13): literal bytes in, what they are out."""
from __future__ import annotations

import pytest

from sessions.sniff import Unreadable, Unsupported, sniff
from tests.files.makers import make_image, make_pdf, make_png

BOUNDS = {"pdf_max_pages": 200, "pdf_max_seconds": 20}


def test_it_reads_a_png_size_from_its_header():
    found = sniff(make_png(800, 600), **BOUNDS)
    assert (found.kind, found.content_type, found.width, found.height) == ("image", "image/png", 800, 600)


@pytest.mark.parametrize("fmt, options, content_type", [
    ("JPEG", {}, "image/jpeg"), ("JPEG", {"progressive": True}, "image/jpeg"), ("GIF", {}, "image/gif"),
    ("WEBP", {}, "image/webp"), ("WEBP", {"lossless": True}, "image/webp"),
])
def test_it_reads_each_kind_made_by_pillow_with_its_size(fmt, options, content_type):
    found = sniff(make_image(fmt, 31, 17, **options), **BOUNDS)
    assert (found.kind, found.content_type, found.width, found.height) == ("image", content_type, 31, 17)


def test_a_webp_with_an_extended_header_is_read_too():
    data = make_image("WEBP", 640, 480, mode="RGBA")
    assert data[12:16] == b"VP8X"
    assert (sniff(data, **BOUNDS).width, sniff(data, **BOUNDS).height) == (640, 480)


def test_a_truncated_png_is_unreadable_not_text():
    with pytest.raises(Unreadable):
        sniff(b"\x89PNG\r\n\x1a\n\x00\x00", **BOUNDS)


@pytest.mark.parametrize("data, encoding, text", [
    ("naïve café\n".encode(), "utf-8", "naïve café\n"),
    (b"\xef\xbb\xbfwith bom", "utf-8", "with bom"),
    (b"\xff\xfe" + "h\u00e9llo".encode("utf-16-le"), "utf-16-le", "h\u00e9llo"),
    (b"\xfe\xff" + "h\u00e9llo".encode("utf-16-be"), "utf-16-be", "h\u00e9llo"),
    (b"caf\xe9 \x80 10", "cp1252", "caf\u00e9 \u20ac 10"),
    (b"\x1b[31mred\x1b[0m\tlog\r\n", "utf-8", "\x1b[31mred\x1b[0m\tlog\r\n"),
    (b"<svg onload='x'></svg>", "utf-8", "<svg onload='x'></svg>"),
])
def test_text_is_decoded_and_its_encoding_recorded(data, encoding, text):
    found = sniff(data, **BOUNDS)
    assert (found.kind, found.content_type, found.encoding, found.text) == ("text", "text/plain", encoding, text)


@pytest.mark.parametrize("data", [
    b"PK\x03\x04rest of a zip", b"\x7fELF\x02\x01\x01", b"MZ\x90\x00\x03\x00\x00\x00", b"\xcf\xfa\xed\xfe\x07",
    b"\x1f\x8b\x08\x00", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", b"\x00" * 257 + b"ustar\x00",
    b"text with a \x00 NUL", b"bell \x07 in text", b"\xff\xfe\x00\x00utf-32", b"\x81\x8d\x8f\x90\x9d",
])
def test_archives_programs_and_binary_are_refused(data):
    with pytest.raises(Unsupported):
        sniff(data, **BOUNDS)


def test_text_that_starts_with_mz_is_still_text():
    assert sniff(b"MZ is the airport code.", **BOUNDS).kind == "text"


def test_a_pdf_is_read_page_by_page_up_to_the_page_bound():
    found = sniff(make_pdf(["First page", "Second page", "Third page"]), pdf_max_pages=2, pdf_max_seconds=20)
    assert (found.kind, found.content_type, found.pages, found.pages_read) == ("pdf", "application/pdf", 3, 2)
    assert found.text == "First page\n\nSecond page"


def test_a_damaged_pdf_is_unreadable():
    with pytest.raises(Unreadable):
        sniff(b"%PDF-1.4\n1 0 obj garbage", **BOUNDS)


def test_a_pdf_locked_by_a_password_is_unreadable_with_a_next_step():
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["secret"]))))
    writer.encrypt(user_password="pw", owner_password="owner", algorithm="AES-128")
    locked = io.BytesIO()
    writer.write(locked)
    with pytest.raises(Unreadable, match="password"):
        sniff(locked.getvalue(), **BOUNDS)


def test_text_that_mentions_a_pdf_header_is_text_and_a_pdf_a_little_way_in_is_a_pdf():
    assert sniff(b"Each file starts with %PDF-1.4 and a version.\n", **BOUNDS).kind == "text"
    assert sniff(b"junk\n" + make_pdf(["late header"]), **BOUNDS).kind == "pdf"
