"""Races between the API, the reaper and a worker; sub-agents; streamed secrets (review findings)."""
from __future__ import annotations

import json

import pytest

from runloop.loop import run_execute
from sessions.models import Instance, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_cancel
from sessions.services.runs import run_claim
from sessions.services.supplements import supplement_add
from tests.fakes.fake_provider import chat_stream, sequence
from tests.runloop.conftest import FAKE_KEY

pytestmark = pytest.mark.django_db(transaction=True)


def kinds(session) -> list[str]:
    return list(SessionMessage.objects.filter(session=session).order_by("seq").values_list("kind", flat=True))


def test_run5_a_supplement_sent_while_the_run_is_finishing_is_answered_not_lost(fake_session, strict):
    session = fake_session()
    type(session.version).objects.filter(pk=session.version.pk).update(verify_before_complete=True)
    holder = {}

    def handler(request):
        messages = request.json["messages"]
        if messages[0]["content"].startswith("You check a candidate answer"):
            if "item" not in holder:  # the user adds something while the answer is being checked
                holder["item"] = supplement_add(run=Run.objects.get(pk=holder["run"]), content="Also: do X")
            return chat_stream(["VERIFIED\nfine"])
        if any("Also: do X" in (m.get("content") or "") for m in messages):
            return chat_stream(["Done X too."])
        return chat_stream(["Done."])

    strict.handler = handler
    run = question_ask(session=session, content="Hi")
    holder["run"] = run.pk
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    # Each candidate answer is checked (a "context" record, never projected), the
    # supplement is answered, and only then does the run complete.
    assert kinds(session) == ["user", "assistant", "context", "supplement", "assistant", "context", "run_status"]
    assert SessionMessage.objects.filter(session=session, kind="assistant").last().message["content"] == "Done X too."
    assert strict.rejections == []


def test_loop7_stop_on_a_run_a_worker_just_claimed_asks_the_worker_to_stop(fake_session):
    session = fake_session()
    run = question_ask(session=session, content="Hi")
    seen_by_the_api = Run.objects.get(pk=run.pk)  # read as queued
    run_claim(run_id=run.pk)  # a worker claims it meanwhile
    run_cancel(run=seen_by_the_api)
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == Run.Status.RUNNING and fresh.cancel_requested is True
    assert not RunEvent.objects.filter(run=run, type="run_finished").exists()


def test_loop1_a_worker_whose_run_was_reaped_stops_writing(fake_session, strict):
    from runloop.reaper import runs_reap_interrupted

    def handler(request):  # the run looks dead to another worker while this call is slow
        Run.objects.update(heartbeat_at="2000-01-01T00:00:00Z")
        runs_reap_interrupted()
        return chat_stream(tool_calls=[{"id": "c1", "name": "calculator",
                                        "arguments": json.dumps({"expression": "1+1"})}])

    strict.handler = handler
    session = fake_session()
    run = question_ask(session=session, content="Add")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED
    assert kinds(session) == ["user", "run_status"]  # nothing written after it was reaped


def test_loop1_a_live_run_is_not_reaped(fake_session):
    from runloop.reaper import runs_reap_interrupted

    run = question_ask(session=fake_session(), content="Hi")
    run_claim(run_id=run.pk)  # heartbeat: now
    assert runs_reap_interrupted(stale_after=60) == []
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING


def test_run3_each_delegation_gets_its_own_sub_instance_even_when_call_ids_repeat(fake_session, strict):
    tasks_seen = []

    def handler(request):
        messages = request.json["messages"]
        if "sub-agent" in messages[0]["content"]:
            tasks_seen.append(messages[1]["content"])
            return chat_stream([f"done: {messages[1]['content']}"])
        answered = sum(1 for m in messages if m["role"] == "tool")
        if answered < 2:
            task = ["TASK ONE", "TASK TWO"][answered]
            return chat_stream(tool_calls=[{"id": "call_0", "name": "delegate",
                                            "arguments": json.dumps({"task": task})}])
        return chat_stream(["final"])

    strict.handler = handler
    session = fake_session(tools=["delegate"])
    run = question_ask(session=session, content="Go")
    run_execute(run_id=run.pk)
    assert tasks_seen == ["TASK ONE", "TASK TWO"]
    results = [m.message["content"] for m in SessionMessage.objects.filter(run=run, kind="delegation_result")
               .order_by("seq")]
    assert results == ["done: TASK ONE", "done: TASK TWO"]
    assert Instance.objects.filter(run=run, parent__isnull=False).count() == 2


def test_loop8_a_key_split_across_stream_chunks_never_reaches_the_events(fake_session, strict):
    half = len(FAKE_KEY) // 2
    strict.handler = sequence(chat_stream(["Your key is ", FAKE_KEY[:half], FAKE_KEY[half:], " ok"]))
    session = fake_session()
    run = question_ask(session=session, content="hi")
    run_execute(run_id=run.pk)
    streamed = "".join(e.payload.get("text", "") for e in RunEvent.objects.filter(run=run, type="message_delta")
                       .order_by("seq"))
    assert FAKE_KEY not in streamed and streamed == "Your key is [REDACTED] ok"


def test_loop7_a_stop_inside_a_sub_agent_keeps_the_other_tools_results(fake_session, strict):
    holder = {}

    def handler(request):
        messages = request.json["messages"]
        if "sub-agent" in messages[0]["content"]:
            Run.objects.filter(pk=holder["run"]).update(cancel_requested=True)
            return chat_stream(["sub answer"])
        if not any(m["role"] == "tool" for m in messages):
            return chat_stream(tool_calls=[
                {"id": "a", "name": "calculator", "arguments": json.dumps({"expression": "6*7"})},
                {"id": "b", "name": "delegate", "arguments": json.dumps({"task": "sub"})}])
        return chat_stream(["final"])

    strict.handler = handler
    session = fake_session(tools=["calculator", "delegate"])
    run = question_ask(session=session, content="Go")
    holder["run"] = run.pk
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    calculator = SessionMessage.objects.get(run=run, kind="tool_result", in_main=True).message
    assert calculator["content"] == "6*7 = 42" and calculator["status"] == "ok"
