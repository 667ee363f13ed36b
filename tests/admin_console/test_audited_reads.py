""""The owner, or staff with an audited read" (RUN-11, RUN-13, SPEC §10), at every door that
lets someone other than a session's creator read its content: the API's file download and
context inspector, and the console's records, events, context-inspector and file pages.

Alice owns the session (and administers its space); Bob shares her space but is a stranger
to her session; Sam is staff holding the console's view permissions. Each door lets Sam
read and writes his read to the access audit, refuses Bob and writes nothing, and — where
Alice may use it — lets her read her own session unaudited.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.test import APIClient

from sessions.models import AccessAudit, SessionFile
from sessions.services.events import event_emit
from tests.admin_console.conftest import SECRET, model_call

pytestmark = pytest.mark.django_db

FILE_TEXT = f"notes: {SECRET}"


@dataclass(frozen=True)
class Door:
    name: str
    console: bool  # a console page (staff only) rather than an API endpoint
    what: str  # the access audit's ``what``
    url: str


@pytest.fixture
def sam(django_user_model):
    """Staff, with the console's permissions to view sessions, runs and all their content."""
    user = django_user_model.objects.create_user(username="sam", password="sam-password-1", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="agent_sessions",
        codename__in=["view_session", "view_sessionmessage", "view_sessionfile", "view_run", "view_runevent",
                      "view_modelcall"]))
    return user


@pytest.fixture
def doors(story, alice) -> list[Door]:
    data = FILE_TEXT.encode()
    file = SessionFile.objects.create(session=story.session, uploaded_by=alice, name="notes.txt",
                                      content_type="text/plain", kind="text", size=len(data),
                                      sha256=hashlib.sha256(data).hexdigest(), data=data, text=FILE_TEXT,
                                      encoding="utf-8")
    model_call(story.first)
    event_emit(run_id=story.first.pk, type="message_delta", data={"instance": "main", "text": SECRET})
    session, run = story.session.pk, story.first.pk
    return [
        Door("the API's file download", False, "file", f"/api/v1/files/{file.pk}"),
        Door("the API's context inspector", False, "context_inspector", f"/api/v1/runs/{run}/context"),
        Door("the console's records", True, "records", f"/admin/agent_sessions/session/{session}/records/"),
        Door("the console's events", True, "events", f"/admin/agent_sessions/run/{run}/events/"),
        Door("the console's context inspector", True, "context_inspector",
             f"/admin/agent_sessions/run/{run}/context/"),
        Door("the console's file download", True, "file",
             f"/admin/agent_sessions/session/{session}/files/{file.pk}/"),
    ]


def reader(user, door: Door):
    if door.console:
        client = Client()
        client.force_login(user)
        return client
    client = APIClient()
    client.force_authenticate(user)
    return client


def body(response) -> str:
    return (b"".join(response.streaming_content) if response.streaming else response.content).decode()


def test_every_door_lets_staff_read_and_writes_the_read_to_the_audit_first(doors, story, sam):
    for door in doors:
        AccessAudit.objects.all().delete()
        response = reader(sam, door).get(door.url)
        assert response.status_code == 200, door.name
        assert SECRET in body(response), door.name
        audit = AccessAudit.objects.get()
        assert (audit.user, audit.what, audit.session_id) == (sam, door.what, story.session.pk), door.name


def test_every_door_refuses_a_stranger_who_is_not_staff_and_writes_nothing(doors, bob):
    for door in doors:
        response = reader(bob, door).get(door.url)
        if door.console:  # the console sends whoever is not staff to its login page
            assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), door.name
        else:  # the API answers as for a row that does not exist
            assert response.status_code == 404, door.name
        assert SECRET not in body(response), door.name
    assert not AccessAudit.objects.exists()


def test_the_owner_reads_her_own_session_through_the_api_unaudited(doors, alice):
    for door in doors:
        if door.console:
            continue
        response = reader(alice, door).get(door.url)
        assert response.status_code == 200, door.name
        assert SECRET in body(response), door.name
    assert not AccessAudit.objects.exists()


def test_staff_without_the_permissions_of_the_content_get_what_a_stranger_gets(doors, django_user_model):
    clerk = django_user_model.objects.create_user(username="clerk", password="clerk-password-1", is_staff=True)
    clerk.user_permissions.add(*Permission.objects.filter(content_type__app_label="agent_sessions",
                                                          codename__in=["view_session", "view_run"]))
    for door in doors:
        response = reader(clerk, door).get(door.url)
        assert response.status_code == (403 if door.console else 404), door.name
        assert SECRET not in body(response), door.name
    assert not AccessAudit.objects.exists()
