"""A tool server that asks the person during a call (SPEC §7b, TOOL-10: MCP elicitation).

A real server built with the official SDK (``tests.fakes.mcp_servers``, ``asking=True``):
``book_room`` asks for a form through the SDK's resolver — inside the call's result on the
2026-07-28 revision, as a request of its own on the earlier, stateful one — and
``connect_account`` asks to open a URL. The person answers through the API, from an event
sink that reacts to ``input_requested`` as the chat would; the run's worker thread waits in
the call meanwhile.
"""
from __future__ import annotations

import json

import pytest

from sessions.models import Run, RunEvent, ToolInput
from sessions.selectors.inputs import sessions_asked
from tests.fakes.fake_provider import chat_stream, sequence
from tests.fakes.mcp_servers import ToolServerApp
from tests.toolservers.runs import ask_and_run, call, chat_requests, event_data, results
from toolservers.services import toolserver_register

pytestmark = pytest.mark.django_db(transaction=True)

BOTH_REVISIONS = pytest.mark.parametrize("legacy", [False, True], ids=["stateless-revision", "stateful-revision"])
DETAILS = {"guest": "Ada Lovelace", "nights": 2, "breakfast": True, "door_code": ""}


@pytest.fixture
def asking(space):
    """``make(legacy)``: an asking server registered in Alice's space as ``hotel``."""
    servers = []

    def make(legacy=False, timeout=60):
        server = ToolServerApp(legacy=legacy, asking=True).__enter__()
        servers.append(server)
        toolserver_register(space=space, data={"name": "hotel", "url": server.url, "headers": server.headers,
                                               "timeout_seconds": timeout})
        return server

    yield make
    for server in servers:
        server.__exit__(None, None, None)


def _answer(client, run_id, input_id, action, content=None):
    body = {"input_id": input_id, "action": action}
    if content is not None:
        body["content"] = content
    return client.post(f"/api/v1/runs/{run_id}/inputs", body, format="json")


def _when_asked(extra_sink, respond):
    """Call ``respond(event)`` when the run asks (once per question), as the person's chat would."""
    extra_sink(lambda event: respond(event) if event.type == "input_requested" else None)


def session_with(space, alice, fake, tools, *, approval="never"):
    """A session whose agent calls ``tools`` without asking for approval first (TOOL-7: the
    question this module is about is the server's, during the call)."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session
    from tests.runloop.conftest import FAKE_KEY

    connection = ModelConnection.objects.create(space=space, name="Fake", provider="openai_compatible",
                                                base_url=fake.base_url, api_key=FAKE_KEY, model="fake-model",
                                                max_output_tokens=1_024)
    from agents.models import AgentVersion
    from agents.server_tools import frozen_server_tools

    agent = agent_create(space=space, name="Agent", model_connection=connection, tools=tools)
    version = agent_publish(agent=agent)
    # Each tool's policy as publishing freezes it (TOOL-7: the ``approval`` of its entry).
    frozen = [{**entry, "approval": approval} for entry in frozen_server_tools(version)]
    AgentVersion.objects.filter(pk=version.pk).update(server_tools=json.dumps(frozen))
    version.refresh_from_db()
    return Session.objects.create(space=space, user=alice, agent=agent, version=version)


def _booking(space, alice, fake, strict, model_reply="Booked."):
    session = session_with(space, alice, fake, ["hotel.book_room"])
    strict.handler = sequence(chat_stream(tool_calls=[call("hotel__book_room", {"room": "101"}, "b1")]),
                              chat_stream([model_reply]))
    return session


@BOTH_REVISIONS
def test_tool10_an_accepted_form_reaches_the_tool_and_its_result_reaches_the_model(
        space, alice, fake, strict, extra_sink, asking, as_alice, legacy):
    server = asking(legacy)
    session = _booking(space, alice, fake, strict)
    answered, waiting = [], []

    def respond(event):
        waiting.append(sessions_asked(user=alice))
        answered.append(_answer(as_alice, event.run_id, event.payload["input_id"], "accept", DETAILS))

    _when_asked(extra_sink, respond)
    run = ask_and_run(session, "Book room 101")
    assert run.status == Run.Status.COMPLETED, run.error
    assert [response.status_code for response in answered] == [200]
    assert waiting == [{session.pk}] and sessions_asked(user=alice) == set()
    assert server.answers == [{"action": "accept", **DETAILS}]
    assert results(session)[0]["content"] == "booked 101 for Ada Lovelace, 2 nights"
    # The model's next request carries the tool's result.
    last = chat_requests(fake)[-1].json
    assert any(m.get("role") == "tool" and "booked 101 for Ada Lovelace" in str(m.get("content"))
               for m in last["messages"])
    [requested] = event_data(run, "input_requested")
    assert requested["mode"] == "form" and requested["server"] == "hotel" and requested["call_id"] == "b1"
    assert requested["message"] == "Booking 101: who is it for, and for how many nights?"
    assert set(requested["schema"]["properties"]) == {"guest", "nights", "breakfast", "door_code"}
    assert event_data(run, "input_answered") == [{"input_id": requested["input_id"], "call_id": "b1",
                                                   "status": "accepted", "by": "alice"}]
    row = ToolInput.objects.get(pk=requested["input_id"])
    assert row.status == "accepted" and row.answered_by == alice and row.delivery is None
    types = [e.type for e in RunEvent.objects.filter(run=run).order_by("seq")]
    assert types.index("tool_started") < types.index("input_requested") < types.index("input_answered") \
        < types.index("tool_finished")
    assert strict.rejections == []


@pytest.mark.parametrize("action, words", [("decline", "[declined]"), ("cancel", "[cancelled]")])
def test_tool10_a_declined_or_cancelled_form_tells_the_server_and_the_model(
        space, alice, fake, strict, extra_sink, asking, as_alice, action, words):
    server = asking()
    session = _booking(space, alice, fake, strict, "Not booked.")
    _when_asked(extra_sink, lambda event: _answer(as_alice, event.run_id, event.payload["input_id"], action))
    run = ask_and_run(session, "Book room 101")
    assert run.status == Run.Status.COMPLETED, run.error
    assert server.answers == [{"action": action}]
    content = results(session)[0]["content"]
    assert content.startswith(f"not booked: the person chose {action}") and words in content
    assert ToolInput.objects.get(run=run).status == {"decline": "declined", "cancel": "cancelled"}[action]


@BOTH_REVISIONS
def test_tool10_nobody_answering_in_time_answers_cancel_and_the_result_says_so(
        space, alice, fake, strict, asking, settings, legacy):
    settings.AGENTLOOM_INPUT_WAIT_SECONDS = 1
    server = asking(legacy)
    session = _booking(space, alice, fake, strict, "Nobody answered.")
    run = ask_and_run(session, "Book room 101")
    assert run.status == Run.Status.COMPLETED, run.error
    assert server.answers == [{"action": "cancel"}]
    result = results(session)[0]
    assert "[no answer]" in result["content"] and "within 1 seconds" in result["content"]
    row = ToolInput.objects.get(run=run)
    assert row.status == "expired" and row.answered_by is None
    assert event_data(run, "input_answered") == [{"input_id": row.pk, "call_id": "b1", "status": "expired",
                                                   "by": ""}]


def test_tool10_the_answer_is_a_record_with_its_credentials_redacted(
        space, alice, fake, strict, extra_sink, asking, as_alice):
    server = asking()
    session = _booking(space, alice, fake, strict)
    code, key = "4711", "sk-live-9f8e7d6c5b4a39281706"  # a door code by its field; a key by its look
    _when_asked(extra_sink, lambda event: _answer(as_alice, event.run_id, event.payload["input_id"], "accept",
                                                  {**DETAILS, "door_code": code, "guest": key}))
    run = ask_and_run(session, "Book room 101")
    assert run.status == Run.Status.COMPLETED, run.error
    assert server.answers[0]["door_code"] == code and server.answers[0]["guest"] == key  # as typed
    row = ToolInput.objects.get(run=run)
    assert row.content == {**DETAILS, "door_code": "[REDACTED]", "guest": "[REDACTED]"} and row.delivery is None
    stored = ToolInput.objects.filter(pk=row.pk).values_list("content", "delivery", "answered_by")
    assert key not in repr(list(stored)) and code not in repr(list(stored))
    assert key not in json.dumps([e.payload for e in RunEvent.objects.filter(run=run)])


def test_tool10_only_the_sessions_creator_answers_and_the_content_must_fit_the_form(
        space, alice, fake, strict, extra_sink, asking, as_alice, as_bob, as_mallory):
    asking()
    session = _booking(space, alice, fake, strict)
    seen = {}

    def respond(event):
        run_id, input_id = event.run_id, event.payload["input_id"]
        seen["bob"] = _answer(as_bob, run_id, input_id, "accept", DETAILS)
        seen["mallory"] = _answer(as_mallory, run_id, input_id, "decline")
        seen["unknown"] = _answer(as_alice, run_id, input_id, "accept", {**DETAILS, "pets": 2})
        seen["invalid"] = _answer(as_alice, run_id, input_id, "accept", {"guest": "A", "nights": 0, "breakfast": "yes"})
        seen["missing"] = _answer(as_alice, run_id, input_id, "accept", {"nights": 3})
        seen["action"] = _answer(as_alice, run_id, input_id, "maybe")
        seen["first"] = _answer(as_alice, run_id, input_id, "accept", DETAILS)
        seen["again"] = _answer(as_alice, run_id, input_id, "accept", DETAILS)
        seen["other"] = _answer(as_alice, run_id, input_id, "decline")

    _when_asked(extra_sink, respond)
    run = ask_and_run(session, "Book room 101")
    assert run.status == Run.Status.COMPLETED, run.error
    assert seen["bob"].status_code == 404 and seen["mallory"].status_code == 404
    assert seen["unknown"].status_code == 400
    assert seen["unknown"].json()["error"]["fields"] == {"pets": "not a field of this form"}
    assert seen["invalid"].status_code == 400
    assert set(seen["invalid"].json()["error"]["fields"]) == {"nights", "breakfast"}
    assert seen["missing"].status_code == 400 and seen["missing"].json()["error"]["fields"] == {"guest": "required"}
    assert seen["action"].status_code == 400 and "action" in seen["action"].json()["error"]["fields"]
    assert seen["first"].status_code == 200 and seen["again"].status_code == 200
    assert seen["other"].status_code == 409 and seen["other"].json()["error"]["code"] == "already_answered"
    assert len(event_data(run, "input_answered")) == 1


def test_tool10_a_value_outside_the_forms_rules_is_a_400_naming_the_field(
        space, alice, fake, strict, extra_sink, asking, as_alice):
    asking()
    session = _booking(space, alice, fake, strict)
    seen = []

    def respond(event):
        seen.append(_answer(as_alice, event.run_id, event.payload["input_id"], "accept", {**DETAILS, "nights": 0}))
        _answer(as_alice, event.run_id, event.payload["input_id"], "cancel")

    _when_asked(extra_sink, respond)
    assert ask_and_run(session, "Book room 101").status == Run.Status.COMPLETED
    assert seen[0].status_code == 400 and list(seen[0].json()["error"]["fields"]) == ["nights"]


def test_tool10_stop_while_the_server_waits_answers_cancel_at_once(space, alice, fake, strict, extra_sink, asking):
    asking(legacy=True)
    session = _booking(space, alice, fake, strict)
    _when_asked(extra_sink, lambda event: Run.objects.filter(pk=event.run_id).update(cancel_requested=True))
    run = ask_and_run(session, "Book room 101")
    assert run.status == Run.Status.CANCELLED
    row = ToolInput.objects.get(run=run)
    assert row.status == "stopped"
    assert event_data(run, "input_answered")[0]["status"] == "stopped"


@BOTH_REVISIONS
def test_tool10_a_url_to_open_is_shown_and_its_answer_goes_back(
        space, alice, fake, strict, extra_sink, asking, as_alice, legacy):
    server = asking(legacy)
    session = session_with(space, alice, fake, ["hotel.connect_account"])
    strict.handler = sequence(chat_stream(tool_calls=[call("hotel__connect_account", {}, "u1")]),
                              chat_stream(["Connected."]))
    seen = []

    def respond(event):
        seen.append(event.payload)
        _answer(as_alice, event.run_id, event.payload["input_id"], "accept")

    _when_asked(extra_sink, respond)
    run = ask_and_run(session, "Connect my calendar")
    assert run.status == Run.Status.COMPLETED, run.error
    assert seen[0]["mode"] == "url" and seen[0]["url"] == "https://calendar.example.com/connect?state=abc"
    assert "schema" not in seen[0]
    assert server.answers == [{"action": "accept"}]
    assert results(session)[0]["content"] == "connection: accept"


def test_tool10_questions_whose_worker_died_are_settled_by_housekeeping(
        space, alice, fake, strict, extra_sink, asking, as_alice):
    from datetime import timedelta

    from django.utils import timezone

    from sessions.services.inputs import tool_inputs_settle

    asking()
    session = _booking(space, alice, fake, strict)
    _when_asked(extra_sink, lambda event: _answer(as_alice, event.run_id, event.payload["input_id"], "cancel"))
    run = ask_and_run(session, "Book room 101")
    done = ToolInput.objects.get(run=run)
    now = timezone.now()
    # A question still waiting long past the wait, and an answer's clear copy nobody read.
    left = ToolInput.objects.create(run=run, session=session, instance_id=done.instance_id, call_id="x",
                                    server="hotel", mode="form", schema={"type": "object"})
    ToolInput.objects.filter(pk=left.pk).update(created_at=now - timedelta(hours=1))
    unread = ToolInput.objects.create(run=run, session=session, instance_id=done.instance_id, call_id="y",
                                      server="hotel", mode="form", status="accepted", delivery={"guest": "Ada"},
                                      answered_at=now - timedelta(minutes=10))
    assert tool_inputs_settle(now=now)["expired"] == 1
    assert ToolInput.objects.get(pk=left.pk).status == "expired"
    assert ToolInput.objects.get(pk=unread.pk).delivery is None


def test_tool10_an_approved_call_that_asks_waits_for_its_approval_first_then_for_the_answer(
        space, alice, fake, strict, extra_sink, asking, as_alice):
    from runloop.loop import run_execute
    from sessions.selectors.approvals import approvals_waiting

    server = asking()
    session = session_with(space, alice, fake, ["hotel.book_room"], approval="always")
    strict.handler = sequence(chat_stream(tool_calls=[call("hotel__book_room", {"room": "101"}, "b1")]),
                              chat_stream(["Booked."]))
    _when_asked(extra_sink, lambda event: _answer(as_alice, event.run_id, event.payload["input_id"], "accept",
                                                  DETAILS))
    run = ask_and_run(session, "Book room 101")
    assert run.status == Run.Status.WAITING and not ToolInput.objects.filter(run=run).exists()  # nothing called yet
    decided = as_alice.post(f"/api/v1/runs/{run.pk}/approvals", {"call_id": approvals_waiting(run=run)[0].call_id,
                                                                 "decision": "approve"}, format="json")
    assert decided.status_code == 200, decided.json()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert server.answers == [{"action": "accept", **DETAILS}]
    assert ToolInput.objects.get(run=run).status == "accepted"
    assert strict.rejections == []


@BOTH_REVISIONS
def test_tool10_the_wait_outlasts_the_servers_time_out_and_the_stale_interval_with_the_heartbeat_going(
        space, alice, fake, strict, extra_sink, asking, as_alice, settings, legacy):
    import threading
    from datetime import timedelta

    from django.db import connections

    from runloop.reaper import runs_reap_interrupted
    from tests.runloop.worker import wait_for

    settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS = 2  # a beat every half second; stale after 2 s
    asking(legacy, timeout=1)  # the call's clock (1 s) and the tool's (6 s) stop while the person is asked
    session = _booking(space, alice, fake, strict)
    seen, people = {}, []

    def person(run_id, input_id):
        """Answers only once the wait has outlasted both time-outs and the stale interval, after
        the reaper looked."""
        try:
            first = Run.objects.get(pk=run_id).heartbeat_at
            wait_for(lambda: Run.objects.get(pk=run_id).heartbeat_at > first + timedelta(seconds=7), timeout=60)
            seen["reaped"] = runs_reap_interrupted()
            seen["status"] = ToolInput.objects.get(pk=input_id).status
            seen["answer"] = _answer(as_alice, run_id, input_id, "accept", DETAILS).status_code
        finally:
            connections.close_all()

    def start(event):
        people.append(threading.Thread(target=person, args=(event.run_id, event.payload["input_id"])))
        people[-1].start()

    _when_asked(extra_sink, start)
    run = ask_and_run(session, "Book room 101")
    people[0].join()
    assert seen == {"reaped": [], "status": "awaiting", "answer": 200}
    assert run.status == Run.Status.COMPLETED, run.error
    assert results(session)[0]["content"] == "booked 101 for Ada Lovelace, 2 nights"


def test_tool10_a_nul_in_an_answer_is_carried_and_stored_like_any_character(
        space, alice, fake, strict, extra_sink, asking, as_alice):
    server = asking()
    session = _booking(space, alice, fake, strict)
    seen = []
    _when_asked(extra_sink, lambda event: seen.append(_answer(
        as_alice, event.run_id, event.payload["input_id"], "accept", {**DETAILS, "guest": "Ada\x00Lovelace"})))
    run = ask_and_run(session, "Book room 101")
    assert [response.status_code for response in seen] == [200]
    assert run.status == Run.Status.COMPLETED, run.error
    assert server.answers[0]["guest"] == "Ada\x00Lovelace"
    assert ToolInput.objects.get(run=run).content["guest"] == "Ada\x00Lovelace"
