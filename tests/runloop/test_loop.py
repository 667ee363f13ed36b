"""The run loop end to end against the strict fake provider on a real socket (LOOP-1..8)."""
from __future__ import annotations

import json

import pytest

from agents.tool_registry import Tool, register, registry
from runloop.loop import run_execute
from sessions.models import Instance, ModelCall, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, error, sequence
from tests.runloop.conftest import FAKE_KEY

pytestmark = pytest.mark.django_db(transaction=True)
# Every scenario runs on both wires: OpenAI-style chat completions and Anthropic\'s Messages API (CAT-7).
DIALECTS = ("openai", "anthropic")


def ask_and_run(session, content="Hi") -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def kinds(session) -> list[str]:
    return list(SessionMessage.objects.filter(session=session).order_by("seq").values_list("kind", flat=True))


def event_types(run) -> list[str]:
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))


def calc(call_id, expression):
    return {"id": call_id, "name": "calculator", "arguments": json.dumps({"expression": expression})}


def test_loop1_a_question_with_a_tool_call_end_to_end(fake_session, fake, strict):
    strict.handler = sequence(chat_stream(tool_calls=[calc("call_a", "17*23")]),
                              chat_stream(["It is ", "391."], usage={"prompt_tokens": 50, "completion_tokens": 4}))
    session = fake_session()
    run = ask_and_run(session, "What is 17*23?")
    assert run.status == Run.Status.COMPLETED, run.error
    assert kinds(session) == ["user", "assistant", "tool_result", "assistant", "run_status"]
    result = SessionMessage.objects.get(session=session, kind="tool_result").message
    assert result["content"] == "17*23 = 391" and result["status"] == "ok"
    second = fake.requests[-1].json
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
                                      "content": "17*23 = 391"}
    assert second["max_tokens"] == 1024 and second["stream"] is True
    types = event_types(run)
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert {"tool_call_detected", "tool_started", "tool_finished", "message_delta"} <= set(types)
    assert run.counters == {"model_calls": 2, "tool_calls": 1}
    calls = list(ModelCall.objects.filter(run=run).order_by("id"))
    assert calls[1].usage["prompt_tokens"] == 50 and calls[1].estimated_tokens > 0
    assert strict.rejections == []


def test_loop4_parallel_calls_run_and_their_results_are_saved_in_call_order(fake_session, strict):
    strict.handler = sequence(chat_stream(tool_calls=[calc("c1", "1+1"), calc("c2", "2+2"), calc("c3", "3+3")]),
                              chat_stream(["2, 4 and 6."]))
    session = fake_session()
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED
    results = [m.message["content"]
               for m in SessionMessage.objects.filter(session=session, kind="tool_result").order_by("seq")]
    assert results == ["1+1 = 2", "2+2 = 4", "3+3 = 6"]
    assert strict.rejections == []


def test_loop4_a_tool_that_raises_gives_an_error_result_not_a_crashed_run(fake_session, strict):
    def explode(arguments, context):
        raise RuntimeError("disk on fire")

    register(Tool(name="explode", description="Breaks.", parameters={"type": "object", "properties": {}},
                  run=explode, idempotent=True))
    try:
        strict.handler = sequence(chat_stream(tool_calls=[{"id": "x1", "name": "explode", "arguments": "{}"}]),
                                  chat_stream(["The tool failed."]))
        session = fake_session(tools=["explode"])
        run = ask_and_run(session)
    finally:
        registry.pop("explode")
    assert run.status == Run.Status.COMPLETED
    result = SessionMessage.objects.get(session=session, kind="tool_result").message
    assert result["status"] == "error" and "RuntimeError" in result["content"] and "disk" not in result["content"]
    assert strict.rejections == []


def test_loop3_a_429_with_retry_after_is_retried_and_a_401_is_not(fake_session, strict):
    strict.handler = sequence(error(429, "slow down", retry_after="0"), chat_stream(["Fine."]))
    session = fake_session()
    assert ask_and_run(session).status == Run.Status.COMPLETED
    strict.api_key = "sk-a-different-key"
    failed = ask_and_run(session, "Again")
    assert failed.status == Run.Status.FAILED and failed.error["code"] == "auth"
    assert FAKE_KEY not in json.dumps(failed.error) and "Incorrect API key" not in failed.error["message"]


def test_loop2_the_model_call_limit_ends_the_run_with_a_clear_reason(fake_session, strict):
    strict.handler = lambda request: chat_stream(tool_calls=[calc(f"c{len(request.body)}", "1+1")])
    session = fake_session(limits={"max_model_calls": 3})
    run = ask_and_run(session)
    assert run.status == Run.Status.FAILED and run.error["code"] == "limit_reached"
    assert "3 model calls" in run.error["message"]
    assert strict.rejections == []


def test_loop4_delegate_runs_a_sub_instance_and_returns_its_answer(fake_session, fake, strict):
    strict.handler = sequence(
        chat_stream(tool_calls=[{"id": "d1", "name": "delegate", "arguments": json.dumps({"task": "Add 2 and 2"})}]),
        chat_stream(["Sub-agent says 4."]),
        chat_stream(["The answer is 4."]),
    )
    session = fake_session()
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED
    sub_request = fake.requests[1].json["messages"]
    assert [m["role"] for m in sub_request] == ["system", "user"] and sub_request[1]["content"] == "Add 2 and 2"
    delegation = SessionMessage.objects.get(session=session, kind="delegation_result").message
    assert delegation["content"] == "Sub-agent says 4."
    assert {"sub_instance_started", "sub_instance_finished"} <= set(event_types(run))
    assert strict.rejections == []


def test_run3_delegation_is_refused_past_the_depth_limit(fake_session, fake, strict):
    nested = {"id": "d", "name": "delegate", "arguments": json.dumps({"task": "go deeper"})}
    strict.handler = sequence(chat_stream(tool_calls=[nested]), chat_stream(tool_calls=[nested]),
                              chat_stream(["cannot"]), chat_stream(["done"]))
    session = fake_session(limits={"max_depth": 1})
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED
    second_level = fake.requests[1].json
    assert "delegate" not in [t["function"]["name"] for t in second_level.get("tools", [])]
    # The sub-agent called it anyway: refused as its tool result, and no deeper instance exists.
    assert Instance.objects.filter(run=run).count() == 2
    refusal = SessionMessage.objects.get(run=run, in_main=False, kind__in=("tool_result", "delegation_result"))
    assert refusal.message["status"] == "error"
    assert refusal.message["content"] == "Delegation is limited to a depth of 1."
    sub_sees = [m for m in fake.requests[2].json["messages"] if m["role"] == "tool"]
    assert "Delegation is limited to a depth of 1." in sub_sees[-1]["content"]


def test_loop8_the_key_is_redacted_from_records_and_events(fake_session, strict):
    strict.handler = sequence(chat_stream([f"Your key is {FAKE_KEY}."]))
    session = fake_session()
    run = ask_and_run(session)
    stored = json.dumps([m.message for m in SessionMessage.objects.filter(session=session)])
    events = json.dumps([e.payload for e in RunEvent.objects.filter(run=run)])
    assert FAKE_KEY not in stored and FAKE_KEY not in events and "[REDACTED]" in stored


def test_ctx7_read_record_pages_through_a_long_result(fake_session, fake, strict):
    long_text = "".join(f"line {i:06d}\n" for i in range(10_000))  # 120,000 characters

    def produce(arguments, context):
        return long_text

    register(Tool(name="long_log", description="A long log.", parameters={"type": "object", "properties": {}},
                  run=produce, idempotent=True))
    try:
        holder = {}

        def handler(request):
            messages = request.json["messages"]
            count = len([m for m in messages if m["role"] == "assistant"])
            if count == 0:
                return chat_stream(tool_calls=[{"id": "l1", "name": "long_log", "arguments": "{}"}])
            if count == 1:
                holder["view"] = messages[-1]["content"]
                seq = SessionMessage.objects.get(kind="tool_result").seq
                return chat_stream(tool_calls=[{"id": "r1", "name": "read_record",
                                                "arguments": json.dumps({"seq": seq, "offset": 60_000, "length": 24})}])
            holder["page"] = messages[-1]["content"]
            return chat_stream(["Read it."])

        strict.handler = handler
        session = fake_session(tools=["long_log", "read_record"])
        run = ask_and_run(session)
    finally:
        registry.pop("long_log")
    assert run.status == Run.Status.COMPLETED
    assert len(holder["view"]) < 25_000 and holder["view"].endswith("line 009999\n")
    assert "line 005000\nline 005001\n" in holder["page"]
    assert strict.rejections == []
