"""A PDF's text is read in a child process with a hard deadline and a memory bound (RUN-13):
a page that keeps pypdf busy is stopped, not waited for, and no reading process is left."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from sessions.models import SessionFile
from sessions.pdf_text import DAMAGED, LOCKED, TOO_BIG, TOO_SLOW, pdf_read
from sessions.sniff import Unreadable, sniff
from tests.conftest import token_for
from tests.files.makers import make_pdf, make_pdf_of_streams, slow_page
from tests.security.conftest import assert_error_shape


def readers_left() -> list[int]:
    """This process's children that are, or were and are not reaped, PDF readers."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == me and (b"sessions.pdf_text" in command or state == "Z"):
            found.append(int(entry.name))
    return found


def is_gone(pid: int) -> bool:
    try:
        return b"sessions.pdf_text" not in (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return True


def test_a_page_that_keeps_the_reader_busy_is_stopped_at_the_deadline_and_refused():
    found = pdf_read(make_pdf_of_streams([slow_page()]), max_pages=200, max_seconds=1)
    assert (found.refusal, found.text, found.pages_read) == (TOO_SLOW, "", 0)
    assert is_gone(found.pid) and readers_left() == []


def test_the_pages_read_by_the_deadline_are_kept():
    pages = [b"BT /F1 12 Tf 20 50 Td (one) Tj ET", b"BT /F1 12 Tf 20 50 Td (two) Tj ET"] + [slow_page()] * 10
    found = pdf_read(make_pdf_of_streams(pages), max_pages=200, max_seconds=4)
    assert found.refusal == "" and found.pages == 12 and 2 <= found.pages_read < 12
    assert found.text.startswith("one\n\ntwo")
    assert is_gone(found.pid) and readers_left() == []


def test_a_normal_pdf_reads_whole_and_its_reader_exits():
    found = pdf_read(make_pdf(["First page", "Second page", "Third page"]), max_pages=2, max_seconds=20)
    assert (found.refusal, found.text, found.pages, found.pages_read) == ("", "First page\n\nSecond page", 3, 2)
    assert is_gone(found.pid) and readers_left() == []


def test_a_pdf_that_needs_more_memory_than_the_bound_is_refused():
    huge = b"BT /F1 12 Tf 20 50 Td (" + b"x" * 60_000_000 + b") Tj ET"  # 60 MB of text, packed to ~60 KB
    found = pdf_read(make_pdf_of_streams([huge]), max_pages=200, max_seconds=60, max_memory_bytes=256 * 1024 * 1024)
    assert found.refusal == TOO_BIG
    assert pdf_read(make_pdf(["small"]), max_pages=200, max_seconds=20,
                    max_memory_bytes=256 * 1024 * 1024).text == "small"


def test_what_makes_pypdf_raise_is_damaged_and_a_locked_pdf_says_so():
    import io

    from pypdf import PdfReader, PdfWriter

    assert pdf_read(b"%PDF-1.4\n1 0 obj garbage", max_pages=200, max_seconds=20).refusal == DAMAGED
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["secret"]))))
    writer.encrypt(user_password="pw", owner_password="owner", algorithm="AES-128")
    locked = io.BytesIO()
    writer.write(locked)
    assert pdf_read(locked.getvalue(), max_pages=200, max_seconds=20).refusal == LOCKED
    with pytest.raises(Unreadable, match="took too long"):
        sniff(make_pdf_of_streams([slow_page()]), pdf_max_pages=200, pdf_max_seconds=1)


def upload(user, session_id: int, name: str, data: bytes):
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    return client.post(f"/api/v1/sessions/{session_id}/files", {"file": SimpleUploadedFile(name, data)})


@pytest.mark.django_db
def test_an_upload_of_a_slow_pdf_is_415_within_the_bound_and_nothing_is_stored(alice, make_session, settings):
    settings.AGENTLOOM_PDF_MAX_SECONDS = 1
    session = make_session(alice)
    slow = make_pdf_of_streams([slow_page()])
    assert len(slow) < 8 * 1024
    response = upload(alice, session.pk, "report.pdf", slow)
    body = assert_error_shape(response, 415)
    assert body["code"] == "unsupported_file_type" and body["message"] == TOO_SLOW
    assert not SessionFile.objects.filter(session=session).exists()
    assert readers_left() == []


@pytest.mark.django_db
def test_an_upload_of_a_pdf_pypdf_cannot_read_is_415_and_a_normal_one_is_taken(alice, make_session):
    session = make_session(alice)
    damaged = upload(alice, session.pk, "broken.pdf", b"%PDF-1.4\n1 0 obj garbage")
    assert assert_error_shape(damaged, 415)["message"] == DAMAGED
    assert not SessionFile.objects.filter(session=session).exists()
    taken = upload(alice, session.pk, "fine.pdf", make_pdf(["Invoice total 42"]))
    assert taken.status_code == 201
    assert SessionFile.objects.get(session=session).text == "Invoice total 42"
    assert readers_left() == []
