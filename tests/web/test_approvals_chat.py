"""The chat's side of approvals (SPEC §7b, TOOL-8/9): the decision sent from a card
(``POST /chat/runs/{id}/approvals``), the card of a run that waits when its page is opened
later, the session's state another tab reads, and the sessions list marking a session
that waits for its person.

The waiting runs are real: the offline demo model calls the calculator, whose policy this
agent's version froze as ``always`` (TOOL-7), and the loop makes the run wait.
"""
from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from sessions.models import Run, SessionMessage, ToolApproval

pytestmark = pytest.mark.django_db


@pytest.fixture
def asking_version(version):
    from agents.models import AgentVersion

    # A version is frozen: its policy is set as its publish would have frozen it.
    AgentVersion.objects.filter(pk=version.pk).update(tool_approvals={"calculator": "always"})
    version.refresh_from_db()
    return version


@pytest.fixture
def waiting_run(alice, make_session, asking_version):
    """alice asked for a sum; the calculator's call waits for her."""
    from runloop.loop import run_execute
    from sessions.services.questions import question_ask

    session = make_session(alice)
    run = question_ask(session=session, content="What is 2+3?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING
    return run


def _call_id(run: Run) -> str:
    return ToolApproval.objects.get(run=run).call_id


def _decide(client: Client, run: Run, **body):
    return client.post(f"/chat/runs/{run.pk}/approvals", body, content_type="application/json")


def _card(html: str) -> str:
    match = re.search(r'<div class="approval" role="group".*?(?=<div class="live"|</section>)', html, re.S)
    assert match, "no approval card on the page"
    return match.group()


# --- the decision ---------------------------------------------------------------------------------


def test_the_creator_approves_from_the_chat_and_the_calculator_runs_once_the_run_goes_on(
        client_for, alice, waiting_run):
    from runloop.loop import run_execute

    response = _decide(client_for(alice), waiting_run, call_id=_call_id(waiting_run), decision="approve")
    assert response.status_code == 200, response.content
    assert response.json() == {"call_id": _call_id(waiting_run), "status": "approved", "scope": "call",
                               "reason": ""}
    approval = ToolApproval.objects.get(run=waiting_run)
    assert (approval.status, approval.decided_by) == ("approved", alice)
    waiting_run.refresh_from_db()
    assert waiting_run.status == Run.Status.QUEUED

    run_execute(run_id=waiting_run.pk)
    waiting_run.refresh_from_db()
    assert waiting_run.status == Run.Status.COMPLETED
    results = [r.message for r in SessionMessage.objects.filter(run=waiting_run, kind="tool_result")]
    assert [(r["status"], r["content"]) for r in results] == [("ok", "2+3 = 5")]
    page = client_for(alice).get(f"/sessions/{waiting_run.session_id}/").content.decode()
    assert '<p class="note step-approval">You approved this call.</p>' in page


def test_a_denial_sent_as_a_form_keeps_its_reason_and_the_tool_never_runs(client_for, alice, waiting_run):
    from runloop.loop import run_execute

    response = client_for(alice).post(f"/chat/runs/{waiting_run.pk}/approvals",
                                      {"call_id": _call_id(waiting_run), "decision": "deny",
                                       "reason": "Not with my numbers"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "denied" and response.json()["reason"] == "Not with my numbers"

    run_execute(run_id=waiting_run.pk)
    waiting_run.refresh_from_db()
    assert waiting_run.status == Run.Status.COMPLETED
    [result] = [r.message for r in SessionMessage.objects.filter(run=waiting_run, kind="tool_result")]
    assert result["status"] == "denied" and "Not with my numbers" in result["content"]
    page = client_for(alice).get(f"/sessions/{waiting_run.session_id}/").content.decode()
    assert '<span class="step-status">not run (denied)</span>' in page
    assert '<p class="note step-approval">You denied this call: Not with my numbers</p>' in page
    assert '<span class="step-duration">' not in page  # it never ran: no time to show
    # The run went on by itself after the decision: nobody pressed Resume.
    assert '<p class="notice notice-quiet">The agent went on after your decision.</p>' in page
    assert "Resumed." not in page
    assert 'class="approval"' not in page  # a finished run has no card: its step says what happened


def test_the_same_decision_twice_answers_as_the_first_and_another_is_a_conflict(client_for, alice, waiting_run):
    client = client_for(alice)
    call_id = _call_id(waiting_run)
    assert _decide(client, waiting_run, call_id=call_id, decision="deny").status_code == 200
    again = _decide(client, waiting_run, call_id=call_id, decision="deny")
    assert again.status_code == 200 and again.json()["status"] == "denied"
    other = _decide(client, waiting_run, call_id=call_id, decision="approve")
    assert other.status_code == 409 and other.json()["error"]["code"] == "already_decided"


@pytest.mark.parametrize("intruder", ["bob", "mallory"])
def test_anyone_but_the_sessions_creator_gets_404_and_nothing_is_decided(client_for, waiting_run, intruder,
                                                                         request):
    response = _decide(client_for(request.getfixturevalue(intruder)), waiting_run, call_id=_call_id(waiting_run),
                       decision="approve")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert ToolApproval.objects.get(run=waiting_run).status == "awaiting"


@pytest.mark.parametrize("body, field", [
    ({"decision": "maybe"}, "decision"),
    ({"decision": ""}, "decision"),
    ({"decision": "deny", "scope": "forever"}, "scope"),
    ({"decision": "approve", "reason": "x" * 2001}, "reason"),
])
def test_a_bad_decision_is_400_in_the_one_error_shape_and_writes_nothing(client_for, alice, waiting_run, body,
                                                                         field):
    response = _decide(client_for(alice), waiting_run, call_id=_call_id(waiting_run), **body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"]
    assert ToolApproval.objects.get(run=waiting_run).status == "awaiting"
    waiting_run.refresh_from_db()
    assert waiting_run.status == Run.Status.WAITING


@pytest.mark.parametrize("path", ["/chat/runs/-1/approvals", "/chat/runs/x/approvals"])
def test_a_run_id_no_route_takes_is_a_404_in_the_one_error_shape(client_for, alice, path):
    response = client_for(alice).post(path, {"call_id": "c", "decision": "approve"}, content_type="application/json")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}


def test_a_call_the_run_does_not_wait_on_is_not_found(client_for, alice, waiting_run):
    response = _decide(client_for(alice), waiting_run, call_id="call_nobody_made", decision="approve")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_a_decision_needs_the_pages_csrf_token(alice, waiting_run):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    body = {"call_id": _call_id(waiting_run), "decision": "approve"}
    refused = browser.post(f"/chat/runs/{waiting_run.pk}/approvals", body, content_type="application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]["message"]
    assert ToolApproval.objects.get(run=waiting_run).status == "awaiting"

    page = browser.get(f"/sessions/{waiting_run.session_id}/")
    token = page.cookies["csrftoken"].value
    taken = browser.post(f"/chat/runs/{waiting_run.pk}/approvals", body, content_type="application/json",
                         HTTP_X_CSRFTOKEN=token)
    assert taken.status_code == 200 and taken.json()["status"] == "approved"


def test_the_chats_door_takes_the_login_cookie_only(alice, waiting_run, client):
    from tests.conftest import token_for

    body = {"call_id": _call_id(waiting_run), "decision": "approve"}
    anonymous = client.post(f"/chat/runs/{waiting_run.pk}/approvals", body, content_type="application/json")
    assert anonymous.status_code in (401, 403) and anonymous.json()["error"]["code"] == "not_authenticated"
    with_token = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}").post(
        f"/chat/runs/{waiting_run.pk}/approvals", body, content_type="application/json")
    assert with_token.status_code in (401, 403)  # a token decides through /api/v1/runs/{id}/approvals
    assert ToolApproval.objects.get(run=waiting_run).status == "awaiting"


# --- what the chat shows --------------------------------------------------------------------------


def test_a_page_opened_while_the_run_waits_shows_the_calls_card(client_for, alice, waiting_run):
    page = client_for(alice).get(f"/sessions/{waiting_run.session_id}/").content.decode()
    assert f'data-run-id="{waiting_run.pk}" data-status="waiting"' in page
    card = _card(page)
    assert f'data-approval-call="{_call_id(waiting_run)}" data-approval-status="awaiting"' in card
    assert '<span class="approval-tool" data-tool="calculator">calculator</span>' in card
    assert '<p class="approval-description">Evaluate an arithmetic expression' in card
    assert '"expression": "2+3"' in unescape(card)
    assert '<p class="approval-why">This tool asks before every call.</p>' in card
    assert "Waiting for your approval — nothing has run yet." in card
    for button in ('data-decide="approve">Approve</button>', 'data-scope="session"',
                   'data-decide="deny">Deny</button>'):
        assert button in card
    assert 'class="approval-reason"' in card
    assert 'class="session-waiting">Waiting for you</span>' in page  # the sidebar marks the session


def test_the_cards_arguments_are_indented_and_escaped(client_for, alice, waiting_run):
    ToolApproval.objects.filter(run=waiting_run).update(
        arguments={"expression": "<script>alert(1)</script>", "note": "x" * 5000})
    body = client_for(alice).get(f"/chat/runs/{waiting_run.pk}/fragment").json()
    assert body["status"] == "waiting" and body["active"] is True
    card = _card(body["html"])
    assert "<script>" not in card
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in card
    assert '{\n  "expression": "<script>alert(1)</script>"' in unescape(card)
    assert "x" * 5000 in card  # shown whole: a long value scrolls inside its box (approvals.css)


def test_a_decided_call_leaves_no_card_once_the_run_went_on(client_for, alice, waiting_run):
    _decide(client_for(alice), waiting_run, call_id=_call_id(waiting_run), decision="approve")
    page = client_for(alice).get(f"/sessions/{waiting_run.session_id}/").content.decode()
    assert 'class="approval"' not in page
    assert 'class="session-waiting"' not in page


def test_the_sessions_state_lists_the_waiting_call_then_its_decision(client_for, alice, waiting_run):
    client = client_for(alice)
    call_id = _call_id(waiting_run)
    state = client.get(f"/chat/sessions/{waiting_run.session_id}/state").json()
    assert state["active_run"] == waiting_run.pk
    assert state["approvals"] == [{"call_id": call_id, "status": "awaiting", "scope": "call", "reason": ""}]
    _decide(client, waiting_run, call_id=call_id, decision="deny", reason="no")
    state = client.get(f"/chat/sessions/{waiting_run.session_id}/state").json()
    assert state["approvals"] == [{"call_id": call_id, "status": "denied", "scope": "call", "reason": "no"}]


def test_only_the_waiting_session_is_marked_in_the_sessions_list(client_for, alice, make_session, waiting_run):
    from tests.web.conftest import finished_run

    other = make_session(alice)
    finished_run(other, question="Something else?")
    listed = client_for(alice).get("/chat/sessions").json()["html"]
    items = {m.group(1): m.group(0)
             for m in re.finditer(r'<li class="session-item" data-session-id="(\d+)".*?</li>', listed, re.S)}
    assert "Waiting for you" in items[str(waiting_run.session_id)]
    assert "Waiting for you" not in items[str(other.pk)]
    home = client_for(alice).get("/").content.decode()  # every page's sidebar, the home page's too
    assert home.count('<span class="session-waiting">Waiting for you</span>') == 1


def test_the_page_hands_the_script_the_decisions_address_and_the_cards_words(client_for, alice, waiting_run):
    config = client_for(alice).get(f"/sessions/{waiting_run.session_id}/").context["chat_config"]
    assert config["urls"]["approvals"] == "/chat/runs/{id}/approvals"
    words = config["approvalWords"]
    assert words["waiting"] == "Waiting for your approval — nothing has run yet."
    assert words["approved"] == "Approved — running now"
    assert words["deniedBecause"] == "Denied: {reason}"
    assert words["expired"] == "Expired: nobody decided within 24 hours"
    assert words["stopped"] == "Stopped with the run"
    assert config["stepStatus"]["awaiting"] == "waiting for you"
    assert config["events"]["APPROVAL_REQUESTED"] == "approval_requested"


def test_a_call_nobody_decided_in_time_says_so_on_its_step(client_for, alice, waiting_run):
    from datetime import timedelta

    from django.utils import timezone

    from runloop.loop import run_execute
    from sessions.services.approvals import approvals_expire

    assert approvals_expire(now=timezone.now() + timedelta(hours=25)) == [waiting_run.pk]
    run_execute(run_id=waiting_run.pk)
    page = client_for(alice).get(f"/sessions/{waiting_run.session_id}/").content.decode()
    assert '<p class="note step-approval">Expired: nobody decided within 24 hours.</p>' in page
    assert "Nobody decided in time, so the agent went on without the call." in page


def test_stop_while_waiting_ends_the_run_and_its_step_says_it_stopped_with_it(client_for, alice, waiting_run):
    client = client_for(alice)
    stopped = client.post(f"/api/v1/runs/{waiting_run.pk}/cancel")
    assert stopped.status_code == 202 and stopped.json()["status"] == "cancelled"
    page = client.get(f"/sessions/{waiting_run.session_id}/").content.decode()
    assert '<p class="note step-approval">Stopped with the run.</p>' in page
    assert "You stopped this answer." in page and 'class="approval"' not in page
    assert 'class="session-waiting"' not in page
