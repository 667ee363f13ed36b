"""Images are decoded whole before they are stored (RUN-13): an image is re-sent with every
later question of its conversation, so one a provider would refuse is refused at upload."""
from __future__ import annotations

import base64
import io
import random
import struct

import pytest
from django.conf import settings as django_settings
from PIL import Image

from sessions.models import SessionFile
from sessions.sniff import IMAGE_MAX_PIXELS, Unreadable, sniff
from tests.files.makers import make_image, make_png
from tests.files.test_attachments import client_of, upload
from tests.security.conftest import assert_error_shape

BOUNDS = {"pdf_max_pages": 200, "pdf_max_seconds": 20}
ANIMATED = "animated images cannot be sent to a model: attach a still image"


def refusal(data: bytes) -> str:
    with pytest.raises(Unreadable) as caught:
        sniff(data, **BOUNDS)
    return str(caught.value)


def png_header(width: int, height: int) -> bytes:
    """The signature and an IHDR chunk claiming ``width`` × ``height``, with no image data."""
    return make_png(1, 1)[:16] + struct.pack(">II", width, height) + make_png(1, 1)[24:33]


def test_a_png_cut_after_its_header_is_refused():
    assert "cut short or damaged" in refusal(png_header(8, 6))


def test_a_24_byte_png_header_claiming_a_huge_size_is_refused():
    data = png_header(100_000, 100_000)[:24]
    assert len(data) == 24
    assert "100000 × 100000 pixels; models take at most 8000 pixels on a side" in refusal(data)


def test_an_image_wider_than_8000_pixels_is_refused_with_what_to_do():
    assert refusal(make_png(9000, 10)) == ("This image is 9000 × 10 pixels; models take at most 8000 pixels on a "
                                           "side. Attach a scaled-down copy.")


def test_the_pixel_bound_is_checked_from_the_header_before_any_decoding():
    assert IMAGE_MAX_PIXELS == 48_000_000
    # No image data at all: refused for its size, not found damaged by a decoder.
    assert "7000 × 7000 pixels, more than the 48 million this server reads" in refusal(png_header(7000, 7000))


def test_a_gif_header_followed_by_html_is_refused():
    data = b"GIF89a" + struct.pack("<HH", 31, 17) + b"\x00\x00\x00<html><script>alert(1)</script></html>"
    assert "GIF image is cut short or damaged" in refusal(data)


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_animated_images_are_refused_with_words(fmt):
    assert ANIMATED in refusal(make_image(fmt, 20, 20, frames=3))


@pytest.mark.parametrize("marker", [0xC3, 0xC9, 0xCA, 0xCB, 0xC5])  # lossless, arithmetic, hierarchical
def test_jpeg_kinds_the_providers_cannot_read_are_refused(marker):
    data = make_image("JPEG")
    start = data.index(b"\xff\xc0")
    assert "lossless, arithmetic-coded or 12-bit form" in refusal(data[:start + 1] + bytes([marker])
                                                                  + data[start + 2:])


def test_a_12_bit_jpeg_is_refused():
    data = bytearray(make_image("JPEG"))
    data[data.index(b"\xff\xc0") + 4] = 12  # the sample precision
    assert "12-bit form" in refusal(bytes(data))


def test_a_jpeg_cut_short_or_with_a_corrupted_scan_is_refused():
    data = make_image("JPEG", 64, 64)
    scan = data.index(b"\xff\xda")
    corrupted = data[:scan + 30] + b"\xff\xd8" + data[scan + 32:]  # a stray start-of-image in the scan
    for damaged in (data[:scan + (len(data) - scan) // 2], corrupted):
        assert "JPEG image is cut short or damaged" in refusal(damaged)


@pytest.mark.parametrize("fmt, options, content_type", [
    ("PNG", {}, "image/png"), ("JPEG", {}, "image/jpeg"), ("WEBP", {}, "image/webp"), ("GIF", {}, "image/gif"),
    ("MPO", {"frames": 2}, "image/jpeg"),  # a phone's JPEG with a second picture: its first is read
])
def test_still_images_made_by_pillow_are_taken_with_their_size(fmt, options, content_type):
    found = sniff(make_image(fmt, 33, 21, **options), **BOUNDS)
    assert (found.kind, found.content_type, found.width, found.height) == ("image", content_type, 33, 21)


def test_the_default_image_bound_fits_anthropics_base64_limit():
    bound = django_settings.AGENTLOOM_IMAGE_MAX_BYTES
    assert bound == 3_750_000
    assert len(base64.b64encode(b"\x00" * bound)) == 5_000_000 <= 5 * 1024 * 1024


@pytest.mark.django_db
def test_a_4_mb_image_is_413_under_the_default_bound(alice, make_session):
    out = io.BytesIO()  # noise does not compress: a 1160 × 1160 PNG of it is over 4 MB
    Image.frombytes("RGB", (1160, 1160), random.Random(28).randbytes(1160 * 1160 * 3)).save(out, "PNG")
    png = out.getvalue()
    assert 4_000_000 <= len(png) < django_settings.AGENTLOOM_FILE_MAX_BYTES
    response = upload(client_of(alice), make_session(alice).pk, "photo.png", png)
    assert assert_error_shape(response, 413)["code"] == "file_too_large"
    assert not SessionFile.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("data", [make_image("GIF", 20, 20, frames=3), png_header(8, 6)])
def test_a_refused_image_is_415_with_what_to_do_and_nothing_is_stored(alice, make_session, data):
    response = upload(client_of(alice), make_session(alice).pk, "picture.gif", data)
    body = assert_error_shape(response, 415)
    assert body["code"] == "unsupported_file_type"
    assert any(words in body["message"] for words in ("attach a still image", "save it again and attach the copy"))
    assert not SessionFile.objects.exists()


@pytest.mark.django_db
def test_an_image_larger_in_pixels_than_the_server_reads_is_413_with_what_to_do(alice, make_session):
    """Past the size limit (RUN-13: 413), not a type the server does not take: the chat
    says "too large" for it, with the figures."""
    response = upload(client_of(alice), make_session(alice).pk, "wide.png", make_png(9000, 10))
    body = assert_error_shape(response, 413)
    assert body["code"] == "image_too_large"
    assert "9000 × 10 pixels" in body["message"] and "Attach a scaled-down copy" in body["message"]
    assert not SessionFile.objects.exists()

