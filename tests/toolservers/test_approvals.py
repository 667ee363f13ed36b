"""A person says yes before a tool acts (SPEC §7b, TOOL-7..9), against a real MCP server
built on the official SDK that counts its effects, on both provider wires.

``tests.increment`` has no annotations: by default (``side_effects``) every call of it waits
for its session's creator. ``tests.echo`` says ``readOnlyHint``: it never waits by default.
The strict provider refuses any request with an unpaired call, so every decision's next
request is checked on the wire it is sent on.
"""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from runloop.housekeeping import Housekeeper
from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from sessions.models import Run, ToolApproval
from sessions.selectors.approvals import approvals_waiting, sessions_waiting_for
from sessions.services.approvals import approval_decide, approvals_expire
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_cancel, run_resume
from sessions.services.supplements import supplement_add
from tests.fakes.fake_provider import chat_stream, sequence
from tests.toolservers.runs import call, chat_requests, event_data, results

pytestmark = pytest.mark.django_db(transaction=True)
BOTH_WIRES = pytest.mark.parametrize("dialect", ["openai", "anthropic"])


def _asked(session, content="Add one") -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _decide(run, alice, decision="approve", **extra) -> Run:
    """Alice decides the run's waiting call, and a worker takes the run up if it was queued."""
    approval = approvals_waiting(run=run)[0]
    approval_decide(run=run, user=alice, call_id=approval.call_id, decision=decision, **extra)
    run.refresh_from_db()
    if run.status == Run.Status.QUEUED:
        run_execute(run_id=run.pk)
        run.refresh_from_db()
    return run


def _tool_results_sent(fake) -> list[str]:
    """The text of every tool result in the last request, on either wire."""
    body = chat_requests(fake)[-1].json
    found = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            found.append(str(message.get("content")))
        for part in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_result":
                found.append(str(part.get("content")))
    return found


@BOTH_WIRES
def test_tool8_a_call_with_side_effects_waits_then_runs_once_when_approved(server_agent, strict, fake, mcp_server,
                                                                          alice):
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["The counter went up by one."]))
    run = _asked(session)
    assert run.status == Run.Status.WAITING and mcp_server.effects == 0
    assert run.heartbeat_at is None and sessions_waiting_for(user=alice) == {session.pk}
    requested = event_data(run, "approval_requested")
    assert [(e["tool"], e["label"], e["arguments"]) for e in requested] == [
        ("tests__increment", "tests: increment", {"by": 1})]
    assert "change something" in requested[0]["why"] and requested[0]["description"]
    # No worker holds it: the reaper leaves it, whatever the heartbeat says.
    assert runs_reap_interrupted(stale_after=0) == []

    run = _decide(run, alice)
    assert run.status == Run.Status.COMPLETED, run.error
    assert mcp_server.effects == 1 and mcp_server.seen["tools/call"] == 1
    assert [r["status"] for r in results(session)] == ["ok"]
    decided = event_data(run, "approval_decided")
    assert [(e["decision"], e["by"], e["scope"]) for e in decided] == [("approved", "alice", "call")]
    # The same decision again (a double click, a second tab) changes nothing and calls nothing.
    approval = ToolApproval.objects.get(run=run)
    again = approval_decide(run=run, user=alice, call_id=approval.call_id, decision="approve")
    assert again.pk == approval.pk and again.started_at is not None
    assert mcp_server.effects == 1 and len(event_data(run, "approval_decided")) == 1
    assert sessions_waiting_for(user=alice) == set()
    assert strict.rejections == []


@BOTH_WIRES
def test_tool9_a_denied_call_tells_the_model_why_and_never_reaches_the_server(server_agent, strict, fake, mcp_server,
                                                                            alice):
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["Understood, I left the counter alone."]))
    run = _decide(_asked(session), alice, decision="deny", reason="not during the audit")
    assert run.status == Run.Status.COMPLETED, run.error
    assert mcp_server.effects == 0 and mcp_server.seen["tools/call"] == 0
    assert [r["status"] for r in results(session)] == ["denied"]
    sent = _tool_results_sent(fake)
    assert len(sent) == 1 and "denied" in sent[0] and "not during the audit" in sent[0]
    with pytest.raises(Exception) as refused:  # a decided call cannot be decided otherwise
        approval_decide(run=run, user=alice, call_id="c1", decision="approve")
    assert getattr(refused.value, "code", "") == "already_decided"
    assert strict.rejections == []


def test_tool7_read_only_tools_and_built_ins_never_wait_by_default(server_agent, strict, fake, mcp_server):
    session = server_agent(["tests.echo", "calculator"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__echo", {"text": "hi"}, "c1"),
                                                      call("calculator", {"expression": "2+2"}, "c2")]),
                              chat_stream(["hi, and 4."]))
    run = _asked(session, "Echo and add")
    assert run.status == Run.Status.COMPLETED, run.error
    assert ToolApproval.objects.count() == 0 and [r["status"] for r in results(session)] == ["ok", "ok"]


def test_tool8_the_other_calls_of_the_step_run_first_and_the_group_is_answered_whole(server_agent, strict, fake,
                                                                                    mcp_server, alice):
    session = server_agent(["tests.echo", "tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__echo", {"text": "before"}, "c1"),
                                                      call("tests__increment", {"by": 2}, "c2")]),
                              chat_stream(["Both done."]))
    run = _asked(session, "Echo, then add two")
    assert run.status == Run.Status.WAITING
    assert [r["status"] for r in results(session)] == ["ok"]  # the read-only call ran
    assert len(chat_requests(fake)) == 1  # and nothing was sent with a call unanswered
    run = _decide(run, alice)
    assert run.status == Run.Status.COMPLETED and mcp_server.effects == 2
    assert [r["status"] for r in results(session)] == ["ok", "ok"] and strict.rejections == []


def test_tool9_stop_while_waiting_denies_the_call_and_resume_tells_the_model(server_agent, strict, fake, mcp_server,
                                                                           alice):
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["I did not change the counter."]))
    run = run_cancel(run=_asked(session))
    assert run.status == Run.Status.CANCELLED
    assert ToolApproval.objects.get(run=run).status == ToolApproval.Status.STOPPED
    assert [e["decision"] for e in event_data(run, "approval_decided")] == ["stopped"]
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and mcp_server.effects == 0
    assert [r["status"] for r in results(session)] == ["denied"] and strict.rejections == []


@BOTH_WIRES
def test_tool8_a_waiting_call_expires_and_the_run_goes_on_without_it(server_agent, strict, fake, mcp_server, alice,
                                                                   settings):
    settings.AGENTLOOM_APPROVAL_HOURS = 24
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["Nobody answered, so I left it."]))
    run = _asked(session)
    assert approvals_expire() == []  # not yet
    ToolApproval.objects.filter(run=run).update(created_at=timezone.now() - timedelta(hours=25))
    Housekeeper(name="expiry-test").tick()  # the workers' sweep, as it runs on every beat
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and mcp_server.effects == 0
    assert [e["decision"] for e in event_data(run, "approval_decided")] == ["expired"]
    assert "in time" in _tool_results_sent(fake)[0] and strict.rejections == []


def test_tool8_approve_for_this_session_lets_later_calls_of_that_tool_through(server_agent, strict, fake, mcp_server,
                                                                            alice):
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["Added one."]),
                              chat_stream(tool_calls=[call("tests__increment", {"by": 1}, "c9")]),
                              chat_stream(["Added one more."]))
    run = _decide(_asked(session), alice, scope="session")
    assert run.status == Run.Status.COMPLETED
    second = _asked(session, "Once more")
    assert second.status == Run.Status.COMPLETED and mcp_server.effects == 2
    assert ToolApproval.objects.count() == 1 and strict.rejections == []


def test_tool9_a_supplement_sent_while_waiting_is_answered_after_the_decision(server_agent, strict, fake, mcp_server,
                                                                             alice):
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["Added one, and noted the colour."]))
    run = _asked(session)
    supplement_add(run=run, content="Also: the colour is blue.")
    run = _decide(run, alice)
    assert run.status == Run.Status.COMPLETED and mcp_server.effects == 1
    assert "the colour is blue" in str(chat_requests(fake)[-1].json) and strict.rejections == []


def test_tool9_an_approved_call_started_before_is_never_made_again(server_agent, strict, fake, mcp_server, alice):
    """A worker killed after marking the approved call started (whether or not the server saw
    it): the next attempt records an unknown outcome and never calls again."""
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["I cannot tell whether it was added; please check."]))
    run = _asked(session)
    approval = approvals_waiting(run=run)[0]
    approval_decide(run=run, user=alice, call_id=approval.call_id, decision="approve")
    ToolApproval.objects.filter(pk=approval.pk).update(started_at=timezone.now())  # as the killed attempt left it
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and mcp_server.effects == 0
    assert [r["status"] for r in results(session)] == ["unknown"] and strict.rejections == []


def test_tool9_only_the_sessions_creator_decides_over_the_api(server_agent, strict, fake, mcp_server, alice, bob,
                                                             as_alice, as_bob):
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["Added."]))
    run = _asked(session)
    waiting = as_alice.get(f"/api/v1/runs/{run.pk}").json()
    listed = [(c["call_id"], c["label"], c["arguments"]) for c in waiting["waiting_for"]]
    assert waiting["status"] == "waiting" and listed == [("c1", "tests: increment", {"by": 1})]
    assert as_bob.get(f"/api/v1/runs/{run.pk}").status_code == 404
    url = f"/api/v1/runs/{run.pk}/approvals"
    assert as_bob.post(url, {"call_id": "c1", "decision": "approve"}, format="json").status_code == 404
    assert APIClient().post(url, {"call_id": "c1", "decision": "approve"}, format="json").status_code in (401, 403)
    bad = as_alice.post(url, {"call_id": "c1", "decision": "maybe"}, format="json")
    assert bad.status_code == 400 and "decision" in str(bad.json())
    assert as_alice.post(url, {"call_id": "nope", "decision": "approve"}, format="json").status_code == 404
    assert ToolApproval.objects.get(run=run).status == ToolApproval.Status.AWAITING  # nothing changed
    ok = as_alice.post(url, {"call_id": "c1", "decision": "approve"}, format="json")
    assert ok.status_code == 200 and ok.json()["approval"]["status"] == "approved"
    assert ok.json()["run"]["status"] == "queued" and ok.json()["run"]["waiting_for"] == []
