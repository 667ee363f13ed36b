"""The agent's plan (``update_plan``) and the runtime-state block of CTX-36.

The plan lives in the frame, is announced to the chat, survives a compaction verbatim in
the runtime-state block, and reaches the completion check; the block also names calls
with an unknown outcome and the tool group in flight — facts the summary must not carry.
"""
from __future__ import annotations

import json

import pytest

from agentloom.runloop.loop import run_execute
from context.compaction import RUNTIME_STATE_HEADER, SUMMARIZER_SYSTEM, unknown_outcome_calls
from context.records import UNKNOWN_OUTCOME_TEXT
from sessions.frames import plan_text
from sessions.models import CompactionSnapshot, Run, RunEvent
from sessions.selectors import main_instance
from sessions.services.history import compaction_request, question_ask
from tests.fakes.fake_provider import chat_stream

pytestmark = pytest.mark.django_db(transaction=True)
# Every scenario runs on both wires: OpenAI-style chat completions and Anthropic\'s Messages API (CAT-7).
DIALECTS = ("openai", "anthropic")

PLAN = [{"step": "Find the quarterly figures", "status": "done"},
        {"step": "Compare the regions", "status": "in_progress"},
        {"step": "Write the answer", "status": "pending"}]


def _plan_call(steps=PLAN, call_id="plan-1"):
    return {"id": call_id, "name": "update_plan", "arguments": json.dumps({"steps": steps})}


def _ask(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_loop4_update_plan_keeps_the_plan_in_the_frame_and_announces_it(fake_session, strict):
    replies = iter([chat_stream(tool_calls=[_plan_call()]), chat_stream(["Working on it."])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=("update_plan",))
    run = _ask(session, "Compare the regions.")
    assert run.status == Run.Status.COMPLETED, run.error
    assert main_instance(run=run).frame["plan"] == PLAN
    event = RunEvent.objects.get(run=run, type="plan_updated")
    assert event.payload["steps"] == PLAN
    assert plan_text(PLAN) == ("1. [done] Find the quarterly figures\n2. [in progress] Compare the regions\n"
                               "3. [pending] Write the answer")


def test_loop4_a_plan_the_tool_cannot_accept_is_an_error_result_and_changes_nothing(fake_session, strict, fake):
    bad = [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]
    replies = iter([chat_stream(tool_calls=[_plan_call(bad)]), chat_stream(["Fixed."])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=("update_plan",))
    run = _ask(session, "Plan it.")
    assert run.status == Run.Status.COMPLETED
    assert main_instance(run=run).frame.get("plan") is None
    tool_message = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"][0]
    assert "Only one step can be in progress" in tool_message["content"]


def test_ctx36_the_plan_comes_through_a_compaction_verbatim_from_the_frame_not_the_summary(fake_session, strict):
    long = "Here are the figures for every region in detail. " * 20

    def handler(request):
        if request.json["messages"][0]["content"] == SUMMARIZER_SYSTEM:
            sections = "\n".join(f"{n}. Section {n}: noted." for n in range(1, 10))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])  # says nothing of the plan
        if request.json["messages"][-1]["role"] == "user":  # a new question: plan first
            return chat_stream(tool_calls=[_plan_call()])
        return chat_stream([long])

    strict.handler = handler
    session = fake_session(tools=("update_plan",), window=16_000, context_policy={"target_ratio": 0.05})
    for n in range(2):
        assert _ask(session, f"Question {n}: compare the regions. " + "Detail. " * 60).status == Run.Status.COMPLETED
    status, run = compaction_request(session=session)
    from agentloom.runloop.compaction import compaction_manual

    assert compaction_manual(run_id=run.pk) == "compacted"
    view = CompactionSnapshot.objects.get(instance__run=run).messages
    block = [m["content"] for m in view if str(m["content"]).startswith(RUNTIME_STATE_HEADER)]
    assert len(block) == 1 and plan_text(PLAN) in block[0]


def test_ctx36_calls_with_an_unknown_outcome_are_found_in_a_view():
    view = [
        {"role": "user", "content": "Pay and book."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "pay", "arguments": '{"amount": 5}'}},
            {"id": "call_2", "type": "function", "function": {"name": "book", "arguments": "{}"}},
            {"id": "call_3", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": UNKNOWN_OUTCOME_TEXT},
        {"role": "tool", "tool_call_id": "call_2",
         "content": "[tool status: unknown]\n[unknown outcome] may or may not"},
        {"role": "tool", "tool_call_id": "call_3", "content": "looked"},
    ]
    assert unknown_outcome_calls(view) == ({"id": "call_1", "name": "pay", "arguments": '{"amount": 5}'},
                                           {"id": "call_2", "name": "book", "arguments": "{}"})


def test_loop9_the_completion_check_reads_the_agents_plan(fake_session, strict, fake):
    def handler(request):
        first = request.json["messages"][0]["content"]
        if first.startswith("You check a candidate answer"):
            return chat_stream(["VERIFIED\nIt follows the plan."])
        if not any(m["role"] == "tool" for m in request.json["messages"]):
            return chat_stream(tool_calls=[_plan_call()])
        return chat_stream(["The regions compare evenly."])

    strict.handler = handler
    session = fake_session(tools=("update_plan",))
    type(session.version).objects.filter(pk=session.version.pk).update(verify_before_complete=True)
    session.version.refresh_from_db()
    run = _ask(session, "Compare the regions.")
    assert run.counters["verification"]["status"] == "passed"
    check = [r for r in fake.requests if r.json["messages"][0]["content"].startswith("You check")][0]
    assert f"## Plan\n{plan_text(PLAN)}" in check.json["messages"][1]["content"]
