"""Tool servers' questions in the console (TOOL-10): each question by agent with how long it
waited, who answered and how, each answer in the access audit, and never the message, the
schema or the answer (conversation content) on these read-only pages."""
from __future__ import annotations

import re

import pytest

from sessions.models import AccessAudit, Run, ToolInput
from sessions.selectors.instances import main_instance
from sessions.services.inputs import tool_input_answer, tool_input_open
from tests.admin_console.test_compaction_waits import listed
from toolservers.asking import Question

pytestmark = pytest.mark.django_db

LIST = "/admin/agent_sessions/toolinput/"
FORM = {"type": "object", "properties": {"guest": {"type": "string"}}, "required": ["guest"]}


def _asked(story) -> ToolInput:
    run = story.second
    return tool_input_open(run=run, instance_id=main_instance(run=run).pk, attempt=run.attempt, call_id="call_9",
                           question=Question("form", "Who is the guest, Ottokar?", schema=FORM, server="hotel"))


def test_tool10_the_console_lists_a_waiting_question_by_agent_with_how_long_it_has_waited(console, story):
    row = _asked(story)
    html = console.get(LIST + "?status__exact=awaiting").content.decode()
    cells = listed(html)
    assert (cells["server"], cells["mode"], cells["status"]) == ("hotel", "A form", "Waiting for the person")
    assert cells["agent"] == str(story.second.version) and re.fullmatch(r".+ so far", cells["waited"]), cells
    page = console.get(f"{LIST}{row.pk}/change/").content.decode()
    for shown in (html, page):
        assert "Ottokar" not in shown and "guest" not in shown
    assert console.get(LIST + "add/").status_code == 403


def test_tool10_an_answer_is_listed_with_who_gave_it_and_written_to_the_access_audit(console, story, alice):
    row = _asked(story)
    run = Run.objects.select_related("version").get(pk=story.second.pk)
    tool_input_answer(run=run, user=alice, input_id=row.pk, action="accept", content={"guest": "Kunigunde"})
    html = console.get(LIST).content.decode()
    cells = listed(html)
    assert (cells["status"], cells["answered_by"]) == ("Accepted", "alice")
    assert "Kunigunde" not in html
    audit = AccessAudit.objects.get(what="input_answered")
    assert (audit.user, audit.run_id) == (alice, run.pk)
    assert audit.detail == {"input": row.pk, "call_id": "call_9", "server": "hotel", "mode": "form",
                            "status": "accepted"}
