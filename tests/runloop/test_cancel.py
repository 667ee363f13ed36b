"""Stop at each of the three points (LOOP-7); the next request is always valid (CTX-10)."""
from __future__ import annotations

import json

import pytest

from agents.tool_registry import Tool, ToolCancelled, register, registry
from runloop.loop import run_execute
from sessions.models import Run, SessionMessage
from sessions.selectors.instances import main_instance
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, sequence

pytestmark = pytest.mark.django_db(transaction=True)
# Every scenario runs on both wires: OpenAI-style chat completions and Anthropic\'s Messages API (CAT-7).
DIALECTS = ("openai", "anthropic")


def _stop(run_id: int) -> None:
    Run.objects.filter(pk=run_id).update(cancel_requested=True)


def _ask(session, content):
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _next_question_is_valid(session, strict, fake):
    strict.handler = sequence(chat_stream(["Carrying on."]))
    follow_up = _ask(session, "Where were we?")
    assert follow_up.status == Run.Status.COMPLETED, follow_up.error
    assert strict.rejections == []
    return fake.requests[-1].json["messages"]


def test_loop7_stop_mid_stream_keeps_the_partial_text_marked_interrupted(fake_session, strict, fake):
    session = fake_session()
    holder = {}

    def handler(request):
        _stop(holder["run"])
        return chat_stream([f"word{i} " for i in range(30)], delay=0.05)

    strict.handler = handler
    run = question_ask(session=session, content="Tell me a long story")
    holder["run"] = run.pk
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    partial = SessionMessage.objects.get(session=session, kind="assistant").message
    assert partial["partial"] is True and partial["content"].startswith("word0 ")
    assert len(partial["content"].split()) < 30
    assert main_instance(run=run).model_steps == 0  # a cut answer was not received: no step (CTX-23)
    sent = _next_question_is_valid(session, strict, fake)
    assert any(m["role"] == "assistant" and "word0" in (m.get("content") or "") for m in sent)
    follow_up = Run.objects.filter(session=session).order_by("-id").first()
    assert main_instance(run=follow_up).model_steps == 1  # inherited 0 from the stopped run, plus its own


def test_loop7_stop_after_a_call_is_announced_records_it_as_not_run(fake_session, strict, fake, extra_sink):
    session = fake_session()
    strict.handler = sequence(chat_stream(tool_calls=[{"id": "c1", "name": "calculator",
                                                       "arguments": json.dumps({"expression": "1+1"})}]))
    extra_sink(lambda event: _stop(event.run_id) if event.type == "tool_call_detected" else None)
    run = _ask(session, "Add")
    assert run.status == Run.Status.CANCELLED
    result = SessionMessage.objects.get(session=session, kind="tool_result").message
    assert result["status"] == "cancelled" and "did not run" in result["content"]
    _next_question_is_valid(session, strict, fake)


def test_loop7_stop_while_a_tool_runs_tells_the_tool_and_ends_its_call_cancelled(fake_session, strict, fake,
                                                                               extra_sink):
    def slow(arguments, context):
        if context.cancel_event.wait(timeout=10):
            raise ToolCancelled()
        return "finished"

    register(Tool(name="slow", description="Slow.", parameters={"type": "object", "properties": {}},
                  run=slow, idempotent=False))
    try:
        session = fake_session(tools=["slow"])
        strict.handler = sequence(chat_stream(tool_calls=[{"id": "s1", "name": "slow", "arguments": "{}"}]))
        extra_sink(lambda event: _stop(event.run_id) if event.type == "tool_started" else None)
        run = _ask(session, "Do the slow thing")
    finally:
        registry.pop("slow")
    assert run.status == Run.Status.CANCELLED
    result = SessionMessage.objects.get(session=session, kind="tool_result").message
    assert result["status"] == "cancelled"
    _next_question_is_valid(session, strict, fake)


def test_loop7_a_tool_that_ignores_stop_is_left_without_an_invented_result(fake_session, strict, fake, extra_sink):
    import threading

    release = threading.Event()

    def stubborn(arguments, context):
        release.wait(timeout=5)
        return "too late"

    register(Tool(name="stubborn", description="Ignores Stop.", parameters={"type": "object", "properties": {}},
                  run=stubborn, idempotent=False))
    try:
        session = fake_session(tools=["stubborn"])
        strict.handler = sequence(chat_stream(tool_calls=[{"id": "s1", "name": "stubborn", "arguments": "{}"}]))
        extra_sink(lambda event: _stop(event.run_id) if event.type == "tool_started" else None)
        run = _ask(session, "Do it")
    finally:
        release.set()
        registry.pop("stubborn")
    assert run.status == Run.Status.CANCELLED
    assert not SessionMessage.objects.filter(session=session, kind="tool_result").exists()
    sent = _next_question_is_valid(session, strict, fake)
    assert any(m["role"] == "tool" and "[unknown outcome]" in m["content"] for m in sent)  # CTX-3


def test_loop7_an_answer_streaming_for_seconds_reads_stop_with_its_text_not_with_polls_of_its_own(fake_session,
                                                                                                    strict):
    """Each flush of streamed text allocates its event seqs in an UPDATE of the run that
    reads the Stop flag too (issue #29): while text flows, the throttled Stop check (every
    0.3 s) has nothing left to ask. The mid-stream Stop above is seen that way."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    strict.handler = lambda request: chat_stream([f"word{i} " for i in range(24)], delay=0.05)
    run = question_ask(session=fake_session(), content="Tell me a long story")
    with CaptureQueriesContext(connections["default"]) as queries:
        run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    flushes = [q["sql"] for q in queries.captured_queries if 'RETURNING "event_seq", "cancel_requested"' in q["sql"]]
    polls = [q["sql"] for q in queries.captured_queries  # a read of the runs whose Stop flag is set
             if q["sql"].lstrip().startswith("SELECT") and '"cancel_requested"' in q["sql"].partition("WHERE")[2]]
    assert len(flushes) >= 4  # 1.2 s of text, flushed every 0.15 s
    assert polls == []
