"""Only staff reach the console pages; staff need the right view permissions; no other
path shows decrypted content, and lists never decrypt."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from sessions.models import AccessAudit
from sessions.services.events import event_emit
from tests.admin_console.conftest import SECRET, compaction, model_call

pytestmark = pytest.mark.django_db


def console_pages(story) -> list[str]:
    return [
        f"/admin/agent_sessions/session/{story.session.pk}/records/",
        f"/admin/agent_sessions/session/{story.session.pk}/compactions/",
        f"/admin/agent_sessions/run/{story.first.pk}/events/",
        f"/admin/agent_sessions/run/{story.first.pk}/context/",
    ]


def permissions(*codenames: str) -> list[Permission]:
    found = list(Permission.objects.filter(content_type__app_label="agent_sessions", codename__in=codenames))
    assert len(found) == len(codenames)
    return found


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_sessions_own_creator_who_is_not_staff_is_sent_to_the_login_page(story, alice):
    for url in console_pages(story):
        response = logged_in(alice).get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/?next=/admin/agent_sessions/")
    assert not AccessAudit.objects.exists()


def test_an_anonymous_visitor_is_sent_to_the_login_page(story):
    for url in console_pages(story):
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), url


def test_staff_without_view_permissions_get_403_and_nothing_is_audited(story, django_user_model):
    clerk = django_user_model.objects.create_user(username="clerk", password="clerk-password-1", is_staff=True)
    for url in console_pages(story):
        assert logged_in(clerk).get(url).status_code == 403, url
    # Viewing session rows is not enough to read what is inside them.
    clerk.user_permissions.add(*permissions("view_session", "view_run"))
    for url in console_pages(story):
        assert logged_in(clerk).get(url).status_code == 403, url
    assert not AccessAudit.objects.exists()


def test_staff_with_the_view_permissions_read_and_are_audited(story, django_user_model):
    clerk = django_user_model.objects.create_user(username="clerk", password="clerk-password-1", is_staff=True)
    clerk.user_permissions.add(*permissions("view_session", "view_sessionmessage"))
    response = logged_in(clerk).get(console_pages(story)[0])
    assert response.status_code == 200 and SECRET in response.content.decode()
    assert AccessAudit.objects.get().user == clerk


def test_unknown_rows_are_404(console):
    for url in ("/admin/agent_sessions/session/999999/records/", "/admin/agent_sessions/run/999999/events/",
                "/admin/agent_sessions/run/999999/context/", "/admin/agent_sessions/session/abc/compactions/"):
        assert console.get(url).status_code == 404, url
    assert not AccessAudit.objects.exists()


def test_list_and_change_pages_never_show_decrypted_content_nor_audit(console, story):
    event_emit(run_id=story.first.pk, type="message_delta", data={"instance": "main", "text": SECRET})
    model_call(story.first)
    compaction(story.first, covered_seq=5)
    urls = [f"/admin/agent_sessions/{model}/" for model in (
        "session", "run", "instance", "sessionmessage", "compactionsnapshot", "sessionview", "runevent",
        "modelcall", "accessaudit")]
    from sessions.models import CompactionSnapshot, Instance, ModelCall, RunEvent, SessionMessage, SessionView

    # The session's own page shows each run's question, audited (test_session_questions.py).
    rows = {"run": story.first, "instance": story.sub,
            "sessionmessage": SessionMessage.objects.get(session=story.session, seq=1),
            "compactionsnapshot": CompactionSnapshot.objects.get(), "sessionview": SessionView.objects.get(),
            "runevent": RunEvent.objects.get(type="message_delta"), "modelcall": ModelCall.objects.get()}
    assert isinstance(rows["instance"], Instance)
    urls += [f"/admin/agent_sessions/{model}/{row.pk}/change/" for model, row in rows.items()]
    for url in urls:
        response = console.get(url)
        assert response.status_code == 200, url
        assert SECRET not in response.content.decode(), url
    assert not AccessAudit.objects.exists()


def test_the_session_list_and_page_lead_to_the_console_pages(console, story):
    records = f"/admin/agent_sessions/session/{story.session.pk}/records/"
    listing = console.get("/admin/agent_sessions/session/").content.decode()
    assert f'href="{records}"' in listing
    page = console.get(f"/admin/agent_sessions/session/{story.session.pk}/change/").content.decode()
    assert f'<li><a href="{records}">Records</a></li>' in page
    assert f'href="/admin/agent_sessions/session/{story.session.pk}/compactions/"' in page
    for run in (story.first, story.second):  # the runs inline
        assert f'href="/admin/agent_sessions/run/{run.pk}/events/"' in page
        assert f'href="/admin/agent_sessions/run/{run.pk}/context/"' in page
    run_page = console.get(f"/admin/agent_sessions/run/{story.first.pk}/change/").content.decode()
    assert f'href="/admin/agent_sessions/run/{story.first.pk}/events/"' in run_page


def test_system_made_rows_are_read_only(console, story):
    for model in ("run", "instance", "sessionmessage", "compactionsnapshot", "sessionview", "runevent",
                  "modelcall", "accessaudit", "session"):
        assert console.get(f"/admin/agent_sessions/{model}/add/").status_code == 403, model
    run_page = console.get(f"/admin/agent_sessions/run/{story.first.pk}/change/").content.decode()
    assert 'name="_save"' not in run_page
    posted = console.post(f"/admin/agent_sessions/run/{story.first.pk}/change/", {"status": "queued"})
    assert posted.status_code == 403
    story.first.refresh_from_db()
    assert story.first.status == "completed"


def test_a_session_keeps_its_owner_binding_and_title_in_the_console(console, story, bob):
    # The title is the owner's text, encrypted at rest: not editable (nor shown) here.
    title = story.session.title
    url = f"/admin/agent_sessions/session/{story.session.pk}/change/"
    response = console.post(url, {"title": "Renamed", "user": bob.pk, "runs-TOTAL_FORMS": "0",
                                  "runs-INITIAL_FORMS": "0"})
    assert response.status_code == 302
    story.session.refresh_from_db()
    assert (story.session.title, story.session.user.username) == (title, "alice")


def test_lists_select_related_rows_in_one_query(console, story, django_assert_max_num_queries):
    for url in ("/admin/agent_sessions/sessionmessage/", "/admin/agent_sessions/run/",
                "/admin/agent_sessions/session/"):
        with django_assert_max_num_queries(12):
            assert console.get(url).status_code == 200
