"""The agent's plan (``update_plan``) and the runtime-state block of CTX-36.

The plan lives in the frame, is announced to the chat, survives a compaction verbatim in
the runtime-state block, and reaches the completion check; the block also names calls
with an unknown outcome and the tool group in flight — facts the summary must not carry.
"""
from __future__ import annotations

import json

import pytest

from context.compaction import RUNTIME_STATE_HEADER, SECTION_TITLES
from runloop.compaction_manual import compaction_manual
from sessions.frames import frame_initial, plan_text
from sessions.models import CompactionSnapshot, Instance, Run, RunEvent
from sessions.selectors.instances import main_instance
from sessions.services.manual_compaction import compaction_request
from sessions.services.pins import pin_set
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary
from tests.runloop.driving import ask_and_run as _ask
from tests.sessions.helpers import interrupted_after_calls

pytestmark = pytest.mark.django_db(transaction=True)
# Every scenario runs on both wires: OpenAI-style chat completions and Anthropic\'s Messages API (CAT-7).
DIALECTS = ("openai", "anthropic")

PLAN = [{"step": "Find the quarterly figures", "status": "done"},
        {"step": "Compare the regions", "status": "in_progress"},
        {"step": "Write the answer", "status": "pending"}]


def _plan_call(steps=PLAN, call_id="plan-1"):
    return {"id": call_id, "name": "update_plan", "arguments": json.dumps({"steps": steps})}



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
        if is_summary(request.json["messages"]):
            sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])  # says nothing of the plan
        if request.json["messages"][-1]["role"] == "user":  # a new question: plan first
            return chat_stream(tool_calls=[_plan_call()])
        return chat_stream([long])

    strict.handler = handler
    session = fake_session(tools=("update_plan",), window=16_000, context_policy={"target_ratio": 0.05})
    for n in range(2):
        assert _ask(session, f"Question {n}: compare the regions. " + "Detail. " * 60).status == Run.Status.COMPLETED
    status, run = compaction_request(session=session)
    assert compaction_manual(run_id=run.pk) == "compacted"
    view = CompactionSnapshot.objects.get(instance__run=run).messages
    block = [m["content"] for m in view if str(m["content"]).startswith(RUNTIME_STATE_HEADER)]
    assert len(block) == 1 and plan_text(PLAN) in block[0]


def _block(view: list[dict]) -> str:
    blocks = [m["content"] for m in view if str(m["content"]).startswith(RUNTIME_STATE_HEADER)]
    assert len(blocks) == 1, view
    return blocks[0]


def _summaries_and_long_answers(request):
    if is_summary(request.json["messages"]):
        sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10))
        return chat_stream([f"<summary>\n{sections}\n</summary>"])  # says nothing of calls or plans
    return chat_stream(["Here are the figures for every region in detail. " * 20])


def test_ctx36_a_call_with_an_unknown_outcome_is_still_listed_after_the_second_compaction(fake_session, strict):
    strict.handler = _summaries_and_long_answers
    # Every question compacts first (user_turns), so the placeholder is summarized at the first.
    session = fake_session(tools=("delegate",), window=16_000, context_policy={"user_turns": 1,
                                                                               "target_ratio": 0.05})
    assert _ask(session, "Question 1: compare the regions. " + "Detail. " * 60).status == Run.Status.COMPLETED
    # The first question, pinned by default (CTX-50), would stay verbatim and leave this short
    # history nothing to gain from a count-triggered compaction: the person unpins it.
    pin_set(session=session, seq=1, pinned=False, by=session.user_id)
    interrupted_after_calls(session, [("pay-1", "delegate", '{"task": "pay the invoice"}')])  # never resumed
    blocks = []
    for n in (3, 4):
        run = _ask(session, f"Question {n}: did the payment go through? " + "Detail. " * 60)
        assert run.status == Run.Status.COMPLETED, run.error
        blocks.append(_block(CompactionSnapshot.objects.get(instance__run=run).messages))
    for block in blocks:
        assert "Tool calls with an unknown outcome" in block and block.count("pay the invoice") == 1
        assert "(call pay-1)" in block and "Pending tool calls" not in block
    second = CompactionSnapshot.objects.filter(instance__run__session=session).order_by("-id").first()
    assert not any("pay the invoice" in str(m["content"]) for m in second.messages if m["content"] != blocks[1])


def test_ctx36_after_an_interruption_the_call_in_flight_is_listed_once_in_one_state(fake_session, strict):
    strict.handler = _summaries_and_long_answers
    session = fake_session(tools=("delegate",), window=16_000, context_policy={"target_ratio": 0.05})
    for n in range(2):
        assert _ask(session, f"Question {n}: compare the regions. " + "Detail. " * 60).status == Run.Status.COMPLETED
    run = interrupted_after_calls(session, [("toolu 01!", "delegate", '{"task": "pay the invoice"}')])
    compaction_request(session=session)
    assert compaction_manual(run_id=run.pk) == "compacted"
    block = _block(CompactionSnapshot.objects.get(instance__run=run).messages)
    # Not pending under the id the records hold and unknown under the one the view gave it:
    # the run ended with the call unanswered, so it is unknown, once, under its own id.
    assert block.count("pay the invoice") == 1 and "(call toolu 01!)" in block
    assert "Tool calls with an unknown outcome" in block and "Pending tool calls" not in block


def test_loop4_a_later_question_starts_with_the_sessions_plan_and_its_compactions_carry_it(fake_session, strict):
    def handler(request):
        messages = request.json["messages"]
        if is_summary(messages):
            return _summaries_and_long_answers(request)
        if "make a plan" in str(messages[-1]["content"]):
            return chat_stream(tool_calls=[_plan_call()])
        return chat_stream(["Here are the figures for every region in detail. " * 20])

    strict.handler = handler
    session = fake_session(tools=("update_plan",), window=16_000, context_policy={"target_ratio": 0.05})
    assert _ask(session, "Question 1: make a plan to compare the regions.").status == Run.Status.COMPLETED
    for n in (2, 3):
        assert _ask(session, f"Question {n}: go on. " + "Detail. " * 60).status == Run.Status.COMPLETED
    later = Run.objects.filter(session=session).order_by("-id").first()
    assert main_instance(run=later).frame["plan"] == PLAN  # the agent never wrote it in this run
    status, run = compaction_request(session=session)
    assert run == later and compaction_manual(run_id=run.pk) == "compacted"
    assert plan_text(PLAN) in _block(CompactionSnapshot.objects.get(instance__run=later).messages)
    # A plan the agent replaces is the one the next question carries.
    replaced = [{"step": "Write the answer", "status": "in_progress"}]
    strict.handler = lambda request: (chat_stream(tool_calls=[_plan_call(replaced, "plan-2")])
                                      if "replan" in str(request.json["messages"][-1]["content"])
                                      else chat_stream(["Done."]))
    assert _ask(session, "Question 4: replan.").status == Run.Status.COMPLETED
    assert main_instance(run=_ask(session, "Question 5: and now?")).frame["plan"] == replaced


def test_loop4_a_plan_stored_as_text_before_plans_were_lists_is_carried_as_that_text(fake_session, strict):
    strict.handler = lambda request: chat_stream(["Noted."])
    session = fake_session()
    first = _ask(session, "Question 1: where do we stand?")
    legacy = "1. Read the logs of the payment service\n2. Report to Dana"
    instance = Instance.objects.get(pk=main_instance(run=first).pk)
    instance.frame = {**instance.frame, "plan": legacy}  # as frames were written before plans had steps
    instance.save(update_fields=["frame"])
    later = question_ask(session=session, content="Question 2: go on.")
    carried = main_instance(run=later).frame["plan"]
    # Not a list of its characters, which plan_text reads as no plan at all.
    assert carried == legacy and plan_text(carried) == legacy
    assert frame_initial(plan=legacy)["plan"] == legacy and frame_initial(plan=PLAN)["plan"] == PLAN
    assert frame_initial(plan=PLAN)["plan"] is not PLAN and frame_initial(plan="")["plan"] is None


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
