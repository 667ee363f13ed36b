"""Removing an uploaded file before it is sent (RUN-13): ``DELETE /api/v1/files/{id}``.

A file no question has used can be removed by whoever may read its session, and its room
in the session is free again; one a question used is part of that record and stays (409);
anyone who may not read the session gets the download's 404, and nothing changes."""
from __future__ import annotations

import pytest
from django.test import Client

from core.spaces.services import membership_remove
from sessions.models import Run, SessionFile, SessionMessage
from tests.files.test_attachments import ask, client_of, upload
from tests.security.conftest import assert_error_shape

pytestmark = pytest.mark.django_db


def remove(client, file_id: int):
    return client.delete(f"/api/v1/files/{file_id}")


def test_the_uploader_removes_an_unsent_file_and_its_room_is_free_again(bob, space, make_session, settings):
    settings.AGENTLOOM_SESSION_FILES_MAX_BYTES = 3000
    session = make_session(bob)
    client = client_of(bob)
    first = upload(client, session.pk, "a.txt", b"a" * 2000).json()
    full = upload(client, session.pk, "b.txt", b"b" * 1500)
    assert assert_error_shape(full, 413)["code"] == "session_files_full"
    assert "Remove a file you have not sent yet" in full.json()["error"]["message"]

    response = remove(client, first["id"])
    assert response.status_code == 204 and response.content == b""
    assert not SessionFile.objects.exists()
    assert_error_shape(client.get(first["url"]), 404)
    assert upload(client, session.pk, "b.txt", b"b" * 1500).status_code == 201  # the room it held
    assert_error_shape(remove(client, first["id"]), 404)  # gone: a second remove finds nothing


def test_a_file_a_question_used_stays_with_its_record_409(bob, space, make_session):
    session = make_session(bob)
    client = client_of(bob)
    used = upload(client, session.pk, "used.txt", b"sent with the question").json()["id"]
    unused = upload(client, session.pk, "unused.txt", b"never sent").json()["id"]
    assert ask(client, session.pk, "read it", [used]).status_code == 202
    record = SessionMessage.objects.get(session=session, kind="user").message

    error = assert_error_shape(remove(client, used), 409)
    assert error["code"] == "file_in_question"
    assert error["message"] == ("This file was sent with a question, so it stays with that question's record "
                                "and cannot be removed. Only files not sent yet can be.")
    assert SessionFile.objects.filter(pk=used).exists()
    assert SessionMessage.objects.get(session=session, kind="user").message == record
    assert client.get(f"/api/v1/files/{used}").content == b"sent with the question"
    assert remove(client, unused).status_code == 204  # the same session's unsent one goes
    assert list(SessionFile.objects.values_list("pk", flat=True)) == [used]


def test_nobody_who_may_not_read_the_session_can_remove_its_file(alice, bob, mallory, space, make_session):
    session = make_session(bob)
    file_id = upload(client_of(bob), session.pk, "a.txt", b"bob's notes").json()["id"]
    for person in (mallory, alice):  # alice is the space's admin: still not bob's session
        assert_error_shape(remove(client_of(person), file_id), 404)
    membership_remove(space=space, user=bob)
    assert_error_shape(remove(client_of(bob), file_id), 404)  # bob left the space: not his to reach now
    assert SessionFile.objects.filter(pk=file_id, question_seq__isnull=True).exists()
    assert_error_shape(remove(client_of(bob), 999_999), 404)


def test_staff_who_may_download_for_an_audit_may_not_remove(alice, django_user_model, make_session):
    session = make_session(alice)
    file_id = upload(client_of(alice), session.pk, "a.txt", b"secret plans").json()["id"]
    root = django_user_model.objects.create_superuser(username="root", password="p-root-1")
    assert client_of(root).get(f"/api/v1/files/{file_id}").status_code == 200
    assert_error_shape(remove(client_of(root), file_id), 404)
    assert SessionFile.objects.filter(pk=file_id).exists()


def test_a_removed_file_cannot_be_sent_afterwards(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    file_id = upload(client, session.pk, "a.txt", b"notes").json()["id"]
    assert remove(client, file_id).status_code == 204
    assert "files" in assert_error_shape(ask(client, session.pk, "read it", [file_id]), 400)["fields"]
    assert not Run.objects.exists()


def test_the_browser_session_removes_with_its_csrf_header_only(alice, make_session):
    session = make_session(alice)
    file_id = upload(client_of(alice), session.pk, "a.txt", b"notes").json()["id"]
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    browser.get("/")
    assert_error_shape(browser.delete(f"/api/v1/files/{file_id}"), 403)
    assert SessionFile.objects.filter(pk=file_id).exists()
    token = browser.cookies["csrftoken"].value
    assert browser.delete(f"/api/v1/files/{file_id}", HTTP_X_CSRFTOKEN=token).status_code == 204
    assert not SessionFile.objects.exists()
