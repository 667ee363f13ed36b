"""Attachments through the API (RUN-13): upload, sniff, refuse, attach to a question, download."""
from __future__ import annotations

import base64

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from core.spaces.services import membership_remove
from sessions.models import AccessAudit, Run, SessionFile, SessionMessage
from tests.conftest import token_for
from tests.files.makers import make_pdf, make_png
from tests.security.conftest import assert_error_shape

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")


def upload(client: Client, session_id: int, name: str, data: bytes):
    return client.post(f"/api/v1/sessions/{session_id}/files", {"file": SimpleUploadedFile(name, data)})


def ask(client: Client, session_id: int, content: str, files: list) -> object:
    return client.post(f"/api/v1/sessions/{session_id}/questions", {"content": content, "files": files},
                       content_type="application/json")


def question_message(session) -> dict:
    return SessionMessage.objects.get(session=session, kind="user").message


def test_each_kind_is_taken_and_the_question_record_carries_it(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    log = ("2026-12-02 13:00:00 INFO request served in 12 ms\n" * 43_000)[:2 * 1024 * 1024].encode()
    pdf, png = make_pdf(["Invoice total 42", "Paid in full"]), make_png(8, 6)
    answers = [upload(client, session.pk, "app.log", log), upload(client, session.pk, "contract.pdf", pdf),
               upload(client, session.pk, "screen.png", png)]
    assert [a.status_code for a in answers] == [201, 201, 201]
    ids = [a.json()["id"] for a in answers]
    assert answers[0].json() == {"id": ids[0], "name": "app.log", "content_type": "text/plain", "size": len(log),
                                 "url": f"/api/v1/files/{ids[0]}"}
    assert [a.json()["content_type"] for a in answers[1:]] == ["application/pdf", "image/png"]

    response = ask(client, session.pk, "What went wrong?", ids)
    assert response.status_code == 202, response.content
    assert question_message(session) == {"role": "user", "content": "What went wrong?", "attachments": [
        {"id": ids[0], "name": "app.log", "content_type": "text/plain", "size": len(log), "kind": "text",
         "encoding": "utf-8", "text": log.decode()},
        {"id": ids[1], "name": "contract.pdf", "content_type": "application/pdf", "size": len(pdf), "kind": "pdf",
         "pages": 2, "pages_read": 2, "text": "Invoice total 42\n\nPaid in full"},
        {"id": ids[2], "name": "screen.png", "content_type": "image/png", "size": len(png), "kind": "image",
         "width": 8, "height": 6, "data": base64.b64encode(png).decode()},
    ]}
    seq = SessionMessage.objects.get(session=session, kind="user").seq
    assert set(SessionFile.objects.values_list("question_seq", flat=True)) == {seq}


def test_a_question_without_files_is_stored_as_before(alice, make_session):
    session = make_session(alice)
    response = client_of(alice).post(f"/api/v1/sessions/{session.pk}/questions", {"content": "Hi"},
                                     content_type="application/json")
    assert response.status_code == 202
    assert question_message(session) == {"role": "user", "content": "Hi"}


def test_the_type_comes_from_the_content_not_the_name(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    png_as_txt = upload(client, session.pk, "notes.txt", make_png(2, 2)).json()
    text_as_png = upload(client, session.pk, "photo.png", b"just some words\n").json()
    # The name ends with what the bytes are: never an extension that would open them as another kind.
    assert (png_as_txt["name"], png_as_txt["content_type"]) == ("notes.txt.png", "image/png")
    assert (text_as_png["name"], text_as_png["content_type"]) == ("photo.png.txt", "text/plain")
    download = client.get(f"/api/v1/files/{text_as_png['id']}")
    assert download["Content-Type"] == "text/plain; charset=utf-8"


def test_a_file_past_the_bound_is_413_and_nothing_is_stored(alice, make_session, settings):
    settings.AGENTLOOM_FILE_MAX_BYTES = 64 * 1024
    session = make_session(alice)
    response = upload(client_of(alice), session.pk, "big.log", b"x" * (64 * 1024 + 1))
    assert assert_error_shape(response, 413)["code"] == "file_too_large"
    assert not SessionFile.objects.exists()


def test_a_file_past_the_request_bound_passes_on_the_upload_endpoint_only(alice, make_session, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 16 * 1024
    session = make_session(alice)
    client = client_of(alice)
    data = b"line of a log\n" * 3000  # 42 KB: past the request bound, under the file bound
    assert upload(client, session.pk, "app.log", data).status_code == 201
    elsewhere = client.post(f"/api/v1/sessions/{session.pk}/questions",
                            {"content": "hi", "file": SimpleUploadedFile("app.log", data)})
    assert assert_error_shape(elsewhere, 413)["code"] == "too_large"
    assert not Run.objects.exists()


def test_the_session_total_is_bounded(alice, make_session, settings):
    settings.AGENTLOOM_SESSION_FILES_MAX_BYTES = 3000
    session = make_session(alice)
    client = client_of(alice)
    assert upload(client, session.pk, "a.txt", b"a" * 2000).status_code == 201
    response = upload(client, session.pk, "b.txt", b"b" * 1001)
    assert assert_error_shape(response, 413)["code"] == "session_files_full"
    assert SessionFile.objects.count() == 1


def test_an_image_past_the_image_bound_is_413(alice, make_session, settings):
    settings.AGENTLOOM_IMAGE_MAX_BYTES = 500
    png = make_png(200, 200)
    assert len(png) > 500
    response = upload(client_of(alice), make_session(alice).pk, "big.png", png)
    assert assert_error_shape(response, 413)["code"] == "file_too_large"
    assert not SessionFile.objects.exists()


@pytest.mark.parametrize("name, data", [
    ("archive.zip", b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + b"\x00" * 40),
    ("tool", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 56),
    ("report.docx", b"PK\x03\x04" + b"[Content_Types].xml"),
])
def test_archives_and_programs_are_415_and_nothing_is_stored(alice, make_session, name, data):
    response = upload(client_of(alice), make_session(alice).pk, name, data)
    assert assert_error_shape(response, 415)["code"] == "unsupported_file_type"
    assert not SessionFile.objects.exists()


def test_the_download_is_an_attachment_that_is_never_sniffed(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    pdf = make_pdf(["hello"])
    ids = {kind: upload(client, session.pk, name, data).json()["id"] for kind, name, data in [
        ("pdf", "a.pdf", pdf), ("png", "a.png", make_png(3, 3)), ("html", "page.html", b"<script>x()</script>")]}
    download = client.get(f"/api/v1/files/{ids['pdf']}")
    assert download.status_code == 200 and download.content == pdf
    assert download["Content-Type"] == "application/octet-stream"
    assert download["Content-Disposition"] == 'attachment; filename="a.pdf"'
    assert download["X-Content-Type-Options"] == "nosniff"
    assert client.get(f"/api/v1/files/{ids['png']}")["Content-Type"] == "image/png"
    html = client.get(f"/api/v1/files/{ids['html']}")
    assert html["Content-Type"] == "text/plain; charset=utf-8"
    assert html["Content-Disposition"] == 'attachment; filename="page.html.txt"'  # never opened as a page


def test_another_user_and_a_removed_member_get_404_everywhere(alice, bob, mallory, space, make_session):
    session = make_session(bob)
    file_id = upload(client_of(bob), session.pk, "a.txt", b"bob's notes").json()["id"]
    membership_remove(space=space, user=bob)
    for person in (mallory, alice, bob):  # alice is the space's admin: still not bob's session
        client = client_of(person)
        assert_error_shape(upload(client, session.pk, "x.txt", b"mine"), 404)
        assert_error_shape(ask(client, session.pk, "read it", [file_id]), 404)
        assert_error_shape(client.get(f"/api/v1/files/{file_id}"), 404)
    assert SessionFile.objects.count() == 1
    assert not Run.objects.exists()


def test_staff_download_is_audited_and_needs_the_permissions(alice, django_user_model, make_session):
    session = make_session(alice)
    file_id = upload(client_of(alice), session.pk, "a.txt", b"secret plans").json()["id"]
    plain_staff = django_user_model.objects.create_user(username="sam", password="p-sam-1", is_staff=True)
    assert_error_shape(client_of(plain_staff).get(f"/api/v1/files/{file_id}"), 404)
    assert not AccessAudit.objects.exists()
    root = django_user_model.objects.create_superuser(username="root", password="p-root-1")
    response = client_of(root).get(f"/api/v1/files/{file_id}")
    assert response.status_code == 200 and response.content == b"secret plans"
    audit = AccessAudit.objects.get()
    assert (audit.user, audit.session_id, audit.what, audit.detail) == (root, session.pk, "file", {"file": file_id})


@pytest.mark.parametrize("files", [[999_999], ["x"], [0], "1", [1, 1], list(range(1, 22))])
def test_bad_file_ids_are_400_and_nothing_changes(alice, make_session, files):
    session = make_session(alice)
    real = upload(client_of(alice), session.pk, "a.txt", b"notes").json()["id"]
    files = [real if f == 1 else f for f in files] if isinstance(files, list) else files
    assert_error_shape(ask(client_of(alice), session.pk, "read it", files), 400)
    assert not Run.objects.exists() and not SessionMessage.objects.exists()
    assert SessionFile.objects.get().question_seq is None


def test_a_file_of_another_session_or_already_used_is_400(alice, make_session):
    client = client_of(alice)
    first, second = make_session(alice), make_session(alice)
    other = upload(client, second.pk, "b.txt", b"second's").json()["id"]
    assert_error_shape(ask(client, first.pk, "read it", [other]), 400)
    mine = upload(client, first.pk, "a.txt", b"first's").json()["id"]
    assert ask(client, first.pk, "read it", [mine]).status_code == 202
    Run.objects.update(status=Run.Status.COMPLETED)
    response = assert_error_shape(ask(client, first.pk, "again", [mine]), 400)
    assert "files" in response["fields"]
    assert Run.objects.count() == 1


def test_the_browser_session_uploads_with_its_csrf_header_under_the_file_bound(alice, make_session, settings):
    # The CSRF check reads the multipart body during authentication: the bound is the
    # upload endpoint's own already then.
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 16 * 1024
    settings.AGENTLOOM_FILE_MAX_BYTES = 64 * 1024
    session = make_session(alice)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    browser.get("/")
    token = browser.cookies["csrftoken"].value
    url = f"/api/v1/sessions/{session.pk}/files"
    taken = browser.post(url, {"file": SimpleUploadedFile("a.log", b"y" * 40_000)}, HTTP_X_CSRFTOKEN=token)
    assert taken.status_code == 201, taken.content
    refused = browser.post(url, {"file": SimpleUploadedFile("b.log", b"y" * 70_000)}, HTTP_X_CSRFTOKEN=token)
    assert assert_error_shape(refused, 413)["code"] == "file_too_large"
    assert SessionFile.objects.count() == 1


def test_an_upload_without_a_file_or_with_an_empty_one_is_400_and_stores_nothing(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    missing = client.post(f"/api/v1/sessions/{session.pk}/files", {"other": "x"})
    assert "file" in assert_error_shape(missing, 400)["fields"]
    assert assert_error_shape(upload(client, session.pk, "empty.txt", b""), 400)["code"] == "empty_file"
    assert not SessionFile.objects.exists()
