"""A question's attached files in the console (RUN-13, SPEC §10): the records page lists
each one (name, type, size, a download link) and never its bytes; the download goes
through the console, as a download only, and is audited like a records page; image data
in a body the inspector shows is shortened to its first characters and its size."""
from __future__ import annotations

import base64
import hashlib

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from sessions.admin.attachments import shortened
from sessions.admin.display import as_json
from sessions.models import AccessAudit, Run, SessionFile
from sessions.selectors.instances import main_instance
from sessions.services.records import record_append

pytestmark = pytest.mark.django_db

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAA"
                       "AABJRU5ErkJggg==")
IMAGE_DATA = base64.b64encode(PNG * 2000).decode()  # 140,000 bytes of "image" as the record carries it
LOG_TEXT = "2026-12-01 ERROR disk full\n" * 200


def records(session_id: int) -> str:
    return f"/admin/agent_sessions/session/{session_id}/records/"


def download(session_id: int, file_id: int) -> str:
    return f"/admin/agent_sessions/session/{session_id}/files/{file_id}/"


def stored_file(session, user, *, name: str, content_type: str, kind: str, data: bytes, text: str = "") -> SessionFile:
    return SessionFile.objects.create(session=session, uploaded_by=user, name=name, content_type=content_type,
                                      kind=kind, size=len(data), sha256=hashlib.sha256(data).hexdigest(), data=data,
                                      text=text, encoding="utf-8" if kind == "text" else "")


@pytest.fixture
def with_files(story, alice):
    """alice's second question carries a log and a picture, as the chat sends them."""
    session = story.session
    log = stored_file(session, alice, name="app.log", content_type="text/plain", kind="text",
                      data=LOG_TEXT.encode(), text=LOG_TEXT)
    picture = stored_file(session, alice, name="screen.png", content_type="image/png", kind="image", data=PNG * 2000)
    record = record_append(session=session, run=story.second, instance=main_instance(run=story.second), kind="user",
                           entry_key="q-files",
                           message={"role": "user", "content": "What do these say?", "attachments": [
                               {"id": log.pk, "name": "app.log", "content_type": "text/plain", "size": log.size,
                                "kind": "text", "encoding": "utf-8", "text": LOG_TEXT},
                               {"id": picture.pk, "name": "screen.png", "content_type": "image/png",
                                "size": picture.size, "kind": "image", "width": 1, "height": 1,
                                "data": IMAGE_DATA}]})
    story.extra.update(log=log, picture=picture, record=record)
    return story


def test_the_records_page_lists_each_attachment_with_its_type_size_and_a_console_download_link(console, with_files):
    html = console.get(records(with_files.session.pk)).content.decode()
    log, picture = with_files.extra["log"], with_files.extra["picture"]
    assert 'aria-label="Files attached to #' in html
    assert "app.log" in html and "<code>text/plain</code>" in html and f"({log.size} bytes)" in html
    assert "screen.png" in html and "<code>image/png</code>" in html and "1 × 1" in html
    assert f'href="{download(with_files.session.pk, log.pk)}"' in html
    assert f'href="{download(with_files.session.pk, picture.pk)}"' in html
    assert "2026-12-01 ERROR disk full" in html  # the head of the text the model read
    assert "download for the rest" in html  # …cut, and says so
    assert IMAGE_DATA[:200] not in html and LOG_TEXT not in html  # never the bytes, never megabytes of text
    assert "<img" not in html  # no image is drawn from a stored type


def test_a_download_sends_the_bytes_as_an_attachment_and_writes_an_audit_row(console, olivia, with_files):
    picture = with_files.extra["picture"]
    AccessAudit.objects.all().delete()
    response = console.get(download(with_files.session.pk, picture.pk))
    assert response.status_code == 200
    assert response.content == PNG * 2000
    assert response["Content-Type"] == "application/octet-stream"  # never rendered, whatever it is
    assert response["Content-Disposition"] == "attachment; filename=\"screen.png\""
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" in response
    audit = AccessAudit.objects.get()
    assert (audit.user, audit.session, audit.what, audit.detail) == (olivia, with_files.session, "file",
                                                                     {"file": picture.pk})


def test_a_file_of_another_session_is_not_found_and_not_audited(console, with_files, make_session, bob):
    other = make_session(bob)
    AccessAudit.objects.all().delete()
    response = console.get(download(other.pk, with_files.extra["log"].pk))
    assert response.status_code == 404
    assert console.get(download(with_files.session.pk, 987654321)).status_code == 404
    assert console.get(download(with_files.session.pk, "²")).status_code == 404
    assert not AccessAudit.objects.exists()


def test_staff_who_may_read_records_but_not_files_get_403_and_nothing_is_audited(with_files, django_user_model):
    reader = django_user_model.objects.create_user(username="rita", password="rita-password-1", is_staff=True)
    reader.user_permissions.set(Permission.objects.filter(
        content_type__app_label="agent_sessions", codename__in=["view_session", "view_sessionmessage"]))
    client = Client()
    client.force_login(reader)
    assert client.get(records(with_files.session.pk)).status_code == 200  # records: yes
    AccessAudit.objects.all().delete()
    assert client.get(download(with_files.session.pk, with_files.extra["log"].pk)).status_code == 403
    assert not AccessAudit.objects.exists()


def test_image_data_in_a_body_is_shown_as_its_first_characters_and_size():
    data = base64.b64encode(b"\x89PNG" + b"\0" * 12_341).decode()  # 12,345 bytes
    body = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
        {"type": "text", "text": "short text stays"}]}]}
    assert shortened(body) == {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data[:12]}… (12,345 bytes)"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": f"{data[:12]}… (12,345 bytes)"}},
        {"type": "text", "text": "short text stays"}]}]}
    assert data[:100] not in as_json(body) and "(12,345 bytes)" in as_json(body)
    assert shortened({"data": "short"}) == {"data": "short"}  # a short value is not data to shorten


def test_the_inspector_shows_a_body_field_with_image_data_shortened(console, with_files):
    from sessions.admin.inspector import body_fields

    data = base64.b64encode(b"x" * 30_000).decode()
    fields = body_fields({"v": 2, "order": ["model", "extra"], "fields": {
        "model": "m", "extra": {"image": f"data:image/webp;base64,{data}"}}})
    assert fields is not None
    shown = fields[1].value
    assert shown is not None and "data:image/webp;base64," in shown.head and "(30,000 bytes)" in shown.head
    assert data[:100] not in shown.head and (shown.full is None or data[:100] not in shown.full)


def test_a_record_without_attachments_lists_none(console, story):
    html = console.get(records(story.session.pk)).content.decode()
    assert "record-files" not in html
    assert Run.objects.filter(session=story.session).exists()


def test_a_row_stored_before_names_were_cleaned_downloads_under_its_cleaned_name(console, with_files, alice):
    """`invoice<U+202E>txt.hta` on a text file was served to staff as `.hta` (it runs on Windows)."""
    hostile = stored_file(with_files.session, alice, name="invoice\u202etxt.hta", content_type="text/plain",
                          kind="text", data=b"<script>alert(1)</script>", text="<script>alert(1)</script>")
    response = console.get(download(with_files.session.pk, hostile.pk))
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="invoicetxt.hta.txt"'
