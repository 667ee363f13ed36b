"""CTX-51 in the console: an operator undoes the newest compaction from the session's
compactions page (POST with CSRF, audited); staff who may only view cannot."""
from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

from sessions.models import AccessAudit, CompactionSnapshot, SessionMessage, SessionView
from tests.admin_console.conftest import compaction, finish

pytestmark = pytest.mark.django_db


def page_url(session_id: int) -> str:
    return f"/admin/agent_sessions/session/{session_id}/compactions/"


def undo_url(session_id: int) -> str:
    return f"/admin/agent_sessions/session/{session_id}/compactions/undo/"


@pytest.fixture
def compacted(story):
    finish(story.second)
    story.session.refresh_from_db()
    result = compaction(story.second, covered_seq=story.session.last_seq)
    assert result.view is not None
    story.extra["snapshot"] = result.snapshot
    return story


def test_ctx51_an_operator_undoes_the_newest_compaction_and_it_is_audited(compacted, olivia):
    client = Client(enforce_csrf_checks=True)
    client.force_login(olivia)
    page = client.get(page_url(compacted.session.pk))
    html = page.content.decode()
    snapshot = compacted.extra["snapshot"]
    assert f'name="compaction" value="{snapshot.pk}"' in html and "Undo the newest compaction" in html
    # Without the CSRF token the POST is refused and nothing is written.
    assert client.post(undo_url(compacted.session.pk), {"compaction": snapshot.pk}).status_code == 403
    assert not SessionMessage.objects.filter(kind="compaction_undone").exists()
    token = page.cookies["csrftoken"].value if "csrftoken" in page.cookies else client.cookies["csrftoken"].value
    response = client.post(undo_url(compacted.session.pk), {"compaction": snapshot.pk, "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == page_url(compacted.session.pk)
    audit = AccessAudit.objects.get(what="compaction_undo")
    assert audit.user == olivia and audit.session == compacted.session and audit.run == compacted.second
    assert audit.detail["snapshot"] == snapshot.pk and audit.at is not None
    marker = SessionMessage.objects.get(kind="compaction_undone")
    assert marker.message["by"] == "operator" and marker.message["user"] == olivia.pk
    assert not SessionView.objects.filter(session=compacted.session).exists()
    assert LogEntry.objects.filter(object_id=str(compacted.session.pk)).exists()
    # The page lists the undo by its operator, marks the compaction undone and offers nothing more.
    html = client.get(page_url(compacted.session.pk)).content.decode()
    assert "undone by olivia" in html and 'class="status status-warn">undone' in html
    assert "Undo the newest compaction" not in html
    assert html.count('<tr id="compaction-') == 1  # the undo's checkpoint is not a compaction row


def test_ctx51_a_second_console_undo_is_refused_in_words_and_nothing_is_written(compacted, console):
    snapshot = compacted.extra["snapshot"]
    assert console.post(undo_url(compacted.session.pk), {"compaction": snapshot.pk}).status_code == 302
    before = CompactionSnapshot.objects.count(), SessionMessage.objects.count(), AccessAudit.objects.count()
    again = console.post(undo_url(compacted.session.pk), {"compaction": snapshot.pk}, follow=True)
    assert "already undone" in again.content.decode()
    assert (CompactionSnapshot.objects.count(), SessionMessage.objects.count(), AccessAudit.objects.count()) == before


def test_ctx51_staff_who_may_only_view_sessions_see_no_button_and_are_refused(compacted, django_user_model):
    viewer = django_user_model.objects.create_user(username="viewer", password="viewer-password-1", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="agent_sessions", codename__in=("view_session", "view_compactionsnapshot")))
    client = Client()
    client.force_login(viewer)
    html = client.get(page_url(compacted.session.pk)).content.decode()
    assert "Undo the newest compaction" not in html and "your role may only view them" in html
    response = client.post(undo_url(compacted.session.pk), {"compaction": compacted.extra["snapshot"].pk})
    assert response.status_code == 403
    assert not SessionMessage.objects.filter(kind="compaction_undone").exists()
    assert not AccessAudit.objects.filter(what="compaction_undo").exists()


def test_ctx51_the_undo_address_takes_only_posts(compacted, console):
    assert console.get(undo_url(compacted.session.pk)).status_code == 405
    assert not SessionMessage.objects.filter(kind="compaction_undone").exists()
