"""A session's page in the console lists its runs each with the opening of the question it
answered (SPEC §10): the person's words, so read only by staff who may read the session's
records, after the access audit's row; shortened and escaped."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from sessions.admin.questions import question_opening
from sessions.models import AccessAudit
from sessions.services.questions import question_ask
from tests.admin_console.conftest import SECRET, finish
from tests.sessions.helpers import claim

pytestmark = pytest.mark.django_db


def _page(client: Client, session) -> str:
    response = client.get(f"/admin/agent_sessions/session/{session.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def _question_cells(html: str) -> list[str]:
    cells = re.findall(r'<td class="field-question">\s*<p>(.*?)</p>', html, re.S)
    return [" ".join(cell.split()) for cell in cells]


def test_each_run_shows_the_opening_of_its_question_newest_first(console, story, olivia):
    AccessAudit.objects.all().delete()
    html = _page(console, story.session)
    # The sub-instance's own "Sub-task" question is not the run's: the main line's first is.
    assert _question_cells(html) == ["And now?", f"Remember this: {SECRET}"]
    audit = AccessAudit.objects.get()
    assert (audit.user, audit.what, audit.session_id) == (olivia, "questions", story.session.pk)


def test_a_long_question_is_shortened_and_markup_is_escaped(console, story):
    finish(story.second)
    words = "<b>bold</b> & " + "lorem ipsum dolor sit amet " * 10
    claim(question_ask(session=story.session, content=words))
    html = _page(console, story.session)
    newest = _question_cells(html)[0]
    assert newest.startswith("&lt;b&gt;bold&lt;/b&gt; &amp; lorem ipsum") and newest.endswith("…")
    assert "<b>bold</b>" not in html
    assert len(question_opening({"content": words})) <= 91


def test_staff_who_may_not_read_records_see_no_question_and_nothing_is_audited(story, django_user_model):
    clerk = django_user_model.objects.create_user(username="clerk", password="clerk-password-1", is_staff=True)
    clerk.user_permissions.add(*Permission.objects.filter(content_type__app_label="agent_sessions",
                                                          codename__in=["view_session", "view_run"]))
    client = Client()
    client.force_login(clerk)
    html = _page(client, story.session)
    assert SECRET not in html and "And now?" not in html
    assert "needs the permission to read the session" in html
    assert not AccessAudit.objects.exists()


def test_question_opening_reads_text_parts_and_cuts_at_a_word():
    message = {"role": "user", "content": [{"type": "text", "text": "Summarize\n\nthe   attached report, please"}]}
    assert question_opening(message) == "Summarize the attached report, please"
    assert question_opening(message, limit=20) == "Summarize the…"
    assert question_opening({"role": "user", "content": None}) == ""
