"""Approvals in the console (TOOL-8/9): the waiting calls by agent with how long they have
waited, every decision with who made it, each decision in the access audit, and never the
arguments or the reason (conversation content) on these read-only pages."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions.models import AccessAudit, Run, ToolApproval
from sessions.selectors.instances import main_instance
from sessions.services.approvals import ApprovalAsk, approval_decide, approvals_wait
from tests.admin_console.test_compaction_waits import listed

pytestmark = pytest.mark.django_db

LIST = "/admin/agent_sessions/toolapproval/"


def _waiting(story, *, secret: str) -> Run:
    run = story.second
    asks = [ApprovalAsk(index=0, call_id="call_9", tool="tickets__open", label="tickets: open",
                        description="Open a ticket.", arguments={"title": secret}, why="It may change something.")]
    assert approvals_wait(run=run, attempt=run.attempt, instance=main_instance(run=run), step=1, asks=asks)
    ToolApproval.objects.filter(run=run).update(created_at=timezone.now() - timedelta(minutes=95))
    return run


def test_tool8_the_console_lists_a_waiting_call_by_agent_with_how_long_it_has_waited(console, story):
    run = _waiting(story, secret="Ottokar's password")
    html = console.get(LIST + "?status__exact=awaiting").content.decode()
    cells = listed(html)
    assert cells["tool_name"] == "tickets: open" and cells["status"] == "Waiting for a decision"
    assert cells["agent"] == str(run.version) and re.fullmatch(r"\d+ min so far", cells["waited"]), cells["waited"]
    page = console.get(f"{LIST}{ToolApproval.objects.get(run=run).pk}/change/").content.decode()
    for shown in (html, page):
        assert "Ottokar" not in shown
    assert console.get(LIST + "add/").status_code == 403


def test_tool9_a_decision_is_listed_with_who_made_it_and_written_to_the_access_audit(console, story, alice):
    run = _waiting(story, secret="the draft")
    approval_decide(run=run, user=alice, call_id="call_9", decision="deny", reason="Kunigunde says no")
    cells = listed(console.get(LIST).content.decode())
    assert (cells["status"], cells["decided_by"]) == ("Denied", "alice")
    assert "Kunigunde" not in console.get(LIST).content.decode()
    audit = AccessAudit.objects.get(what="approval_decided")
    assert (audit.user, audit.run_id) == (alice, run.pk)
    assert audit.detail["decision"] == "denied" and audit.detail["tool"] == "tickets: open"
    assert "Kunigunde" not in str(audit.detail)
