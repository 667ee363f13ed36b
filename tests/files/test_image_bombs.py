"""An image bomb is refused from its header, and an image is decoded in a child process,
never in the process that serves people (issue #44 item 7, RUN-13).

A PNG of a few hundred KB can claim 6900 × 6900 pixels: under the side and pixel bounds,
190 MB once decoded. The memory cases run the check in a fresh interpreter and read its
peak resident size (``ru_maxrss``) before and after: a decode in that process would raise
the peak by the decoded size; a decode in a child shows in ``RUSAGE_CHILDREN`` instead.
No timing is involved, and the margins are the decoded sizes themselves (190 MB, 95 MB)
against a bound of 32 MB.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sessions.models import SessionFile
from tests.conftest import REPO
from tests.files.makers import make_image, make_png, png_of_zeros
from tests.files.test_attachments import client_of, upload
from tests.security.conftest import assert_error_shape

GROWTH_BOUND_KB = 32 * 1024

# Checks stdin's bytes through the upload's own door and says what happened, and how much
# this process and its children held at their peak (kilobytes, Linux's ru_maxrss).
MEASURE = """
import json, resource, sys
from sessions.sniff import sniff
data = sys.stdin.buffer.read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    found = sniff(data, pdf_max_pages=1, pdf_max_seconds=5)
    outcome = {"taken": [found.width, found.height]}
except Exception as exc:
    outcome = {"refused": type(exc).__name__, "message": str(exc)}
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({**outcome, "growth_kb": after - before,
                  "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def measured(data: bytes) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE], input=data, capture_output=True, cwd=REPO, timeout=120,
                          check=True)
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_a_png_bomb_within_the_side_and_pixel_bounds_is_refused_from_its_header_without_decoding():
    bomb = png_of_zeros(6900, 6900)  # RGBA: 6900 × 6900 × 4 = 190 MB once decoded
    assert len(bomb) < 400_000
    seen = measured(bomb)
    assert seen["refused"] == "ImageTooLarge", seen
    assert seen["message"] == ("This image is 6900 × 6900 pixels, 181 MB once decoded; this server decodes at most "
                               "128 MB of an image. Attach a scaled-down copy.")
    assert seen["growth_kb"] < GROWTH_BOUND_KB, seen
    assert seen["children_kb"] == 0, seen  # no decoder was started either


def test_a_large_image_within_the_bounds_is_decoded_in_a_child_and_this_process_does_not_grow():
    large = png_of_zeros(5000, 5000, colour=2)  # RGB, held as RGBX: 95 MB once decoded
    seen = measured(large)
    assert seen.get("taken") == [5000, 5000], seen
    assert seen["growth_kb"] < GROWTH_BOUND_KB, seen
    assert seen["children_kb"] > 90 * 1024, seen  # the decoding happened, over there


def test_the_decoded_size_counts_the_bytes_a_pixel_takes_for_its_colour_type():
    from core.images import CheckedImage, ImageTooLarge, image_check

    # The same 6900 × 6900 in grey is 45 MB once decoded: taken (and decoded, in a child).
    assert image_check(png_of_zeros(6900, 6900, colour=0)) == CheckedImage("image/png", 6900, 6900)
    with pytest.raises(ImageTooLarge, match="this server decodes at most 40 MB"):
        image_check(png_of_zeros(6900, 6900, colour=0), max_decoded_bytes=40 * 1024 * 1024)


def test_image_check_takes_bytes_and_gives_the_checked_image_or_an_error():
    """The one door for an image, an upload's or a tool server's."""
    from core.images import CheckedImage, NotAnImage, Unreadable, image_check

    assert image_check(make_png(4, 3)) == CheckedImage("image/png", 4, 3)
    assert image_check(make_image("WEBP", 7, 5)) == CheckedImage("image/webp", 7, 5)
    with pytest.raises(NotAnImage):
        image_check(b"<svg xmlns='http://www.w3.org/2000/svg'/>")
    with pytest.raises(Unreadable, match="PNG image is cut short or damaged"):
        image_check(make_png(40, 30)[:-30])


def test_a_decoder_that_needs_more_memory_than_its_child_may_take_is_refused_in_words(monkeypatch):
    from core import images
    from core.images import Unreadable, image_check

    monkeypatch.setattr(images, "MAX_MEMORY_BYTES", 128 * 1024 * 1024)
    with pytest.raises(Unreadable) as caught:  # 160 MB once decoded, under a bound raised for the case
        image_check(png_of_zeros(7000, 6000, colour=2), max_decoded_bytes=256 * 1024 * 1024)
    assert str(caught.value) == images.TOO_BIG


@pytest.mark.django_db
def test_an_uploaded_bomb_is_413_and_nothing_is_stored(alice, make_session):
    response = upload(client_of(alice), make_session(alice).pk, "innocent.png", png_of_zeros(6900, 6900))
    body = assert_error_shape(response, 413)
    assert body["code"] == "image_too_large"
    assert "6900 × 6900 pixels, 181 MB once decoded" in body["message"]
    assert not SessionFile.objects.exists()
