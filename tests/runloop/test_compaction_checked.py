"""CTX-48 end to end, on both wires: a summarizer whose replies ignore the instruction never
has them committed; the summary written by code carries the person's goal and a standing
instruction through chained compactions into every later request."""
from __future__ import annotations

import pytest

from context.compaction.code_summary import CODE_SUMMARY_MARK
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

FILLER = "Please keep this detail in mind: " + "the quarterly figures show steady growth across regions. " * 28
SMALL = {"tools": (), "window": 4_000, "provider": "openai", "model": "gpt-4o-mini"}
SEA_ANIMALS = ("1. The Blue Whale: the largest animal on Earth.\n2. The Shrimp: small and many.\n"
               "3. The Octopus: eight arms.\n4. The Jellyfish: no brain.")
GOAL = "GOAL-7 compare the regions"
FRENCH = "FRENCH always answer in French"


def ask(session, content):
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_ctx48_a_junk_summarizer_over_three_compactions_keeps_the_goal_and_the_standing_instruction(
        fake_session, strict):
    calls = {"summary": 0, "action": 0}
    actions = []  # the action requests, OpenAI-shaped on both wires (the bridge translates)

    def handler(request):
        if is_summary(request.json["messages"]):
            calls["summary"] += 1
            return chat_stream([SEA_ANIMALS])  # ignores the instruction, every time
        calls["action"] += 1
        actions.append(request.json)
        return chat_stream([f"Noted, answer {calls['action']}. " + "Growth is steady. " * 6])

    strict.handler = handler
    session = fake_session(**SMALL)
    questions = [f"{GOAL}. {FILLER}", f"{FRENCH}. {FILLER}"]
    snapshots = CompactionSnapshot.objects.filter(instance__run__session=session)
    number = 0
    while snapshots.count() < 3:
        number += 1
        assert number <= 14, "three compactions never happened"
        question = questions[number - 1] if number <= len(questions) else f"Question {number}. {FILLER}"
        run = ask(session, question)
        assert run.status == Run.Status.COMPLETED, (number, run.error)
    assert strict.rejections == []
    # Every committed summary was written by code, never the sea animals, and says so.
    for snapshot in snapshots:
        assert snapshot.metrics["summary_source"] == "code"
        assert all("missing_sections" in verdict["problems"] for verdict in snapshot.metrics["summary_check"])
    records = SessionMessage.objects.filter(session=session, kind="compaction_summary")
    summaries = [r.message["summary"] for r in records]
    assert len(summaries) >= 3 and all(CODE_SUMMARY_MARK in s and "Blue Whale" not in s for s in summaries)
    # Every action request after the first compaction still carries the goal and the instruction.
    first = RunEvent.objects.filter(run__session=session, type="compacted").order_by("id").first()
    assert first is not None
    later = [body for body in actions if any("This session is being continued" in _text(m) for m in body["messages"])]
    assert len(later) >= 3
    for body in later:
        text = "\n".join(_text(m) for m in body["messages"])
        assert "GOAL-7" in text and "FRENCH" in text
        assert "Blue Whale" not in text


def _text(message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def test_ctx48_the_offline_demo_models_canned_reply_is_never_committed_as_a_summary(space, demo_connection, alice):
    """The demo model answers a summary request as it answers anything: a short canned reply.
    That is no summary; the platform writes one from the records, and says so."""
    from agents.services import agent_create, agent_publish
    from runloop.compaction_manual import compaction_manual
    from sessions.models import Session
    from sessions.services.manual_compaction import compaction_request

    agent = agent_create(space=space, name="Demo", model_connection=demo_connection, instructions="Be brief.",
                         tools=[], context_policy={"target_ratio": 0.05}, created_by=alice)
    session = Session.objects.create(space=space, user=alice, agent=agent,
                                     version=agent_publish(agent=agent, published_by=alice))
    for n in range(4):
        assert ask(session, f"Question {n}: the figures, please. " + "Detail. " * 150).status == Run.Status.COMPLETED
    _, run = compaction_request(session=session)
    assert compaction_manual(run_id=run.pk) == "compacted"
    snapshot = CompactionSnapshot.objects.get(instance__run=run)
    assert snapshot.metrics["summary_source"] == "code"
    assert all(verdict["problems"] for verdict in snapshot.metrics["summary_check"])
    summary = SessionMessage.objects.get(run=run, kind="compaction_summary").message["summary"]
    assert CODE_SUMMARY_MARK in summary and not summary.startswith("(Offline demo model)")
    assert summary.index("Question 0") < summary.index("Question 1") < summary.index("Question 2")
