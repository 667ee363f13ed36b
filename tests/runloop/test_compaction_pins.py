"""CTX-50 Pins end to end on the strict fakes, both wires: the first question (pinned by
default) and a message the agent pinned with ``update_plan`` stay verbatim -- outside the
summary -- in every action request after chained compactions with a junk summarizer."""
from __future__ import annotations

import json
import re

import pytest

from sessions.models import CompactionSnapshot, Instance, Run, SessionMessage
from sessions.selectors.pins import pins_of_session
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary
from tests.runloop.test_compaction import SMALL, VERY_LONG, ask

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

GOAL = "Question 1. The goal: keep the North-West margin above 12% in every plan you propose."
CODE_WORD = "The code word for the release is PAPAYA-7."
PIN_OPENING = "[Pinned message, record seq "
# A reply that ignores the instruction (the junk of the continuity benchmark): long enough, not repetitive, no goal.
JUNK = ("1. The Blue Whale: the largest animal. 2. The Shrimp: small and many. 3. The Octopus: eight arms. "
        "4. The Seahorse: the male carries the young. 5. The Manta Ray: wide wings. 6. The Starfish: regrows. "
        "7. The Clownfish: lives in anemones. 8. The Sea Turtle: travels far. 9. The Narwhal: one long tooth.")


def _texts(request) -> list[str]:
    """Every text piece of an action request's messages (a merged message's blocks one by one)."""
    out = []
    for message in request.json["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [part.get("text", "") for part in content if isinstance(part, dict)]
    return out


def _verbatim_outside_the_summary(texts: list[str], words: str) -> int:
    """How often ``words`` stand whole outside any continuation summary (the Anthropic wire
    merges consecutive user messages, so a quote may share a text with its neighbours)."""
    return sum(re.sub(r"<summary>.*?</summary>", "", text, flags=re.S).count(words) for text in texts)


class Provider:
    def __init__(self) -> None:
        self.summary_calls = 0
        self.pin_seq: int | None = None
        self.plans = 0
        self.answered = False

    def __call__(self, request):
        messages = request.json["messages"]
        if is_summary(messages):
            self.summary_calls += 1
            return chat_stream([JUNK])
        if self.pin_seq is not None and messages[-1]["role"] == "user":  # the agent pins, once
            seq, self.pin_seq = self.pin_seq, None
            self.plans += 1
            return chat_stream(tool_calls=[{"id": "plan-1", "name": "update_plan", "arguments": json.dumps(
                {"steps": [{"step": "Keep the release code word", "status": "in_progress"}], "pin": [seq]})}])
        if not self.answered:  # the first answer carries the fact the agent will pin (only it:
            # after a compaction the Anthropic wire's merged view is as short as the first request)
            self.answered = True
            return chat_stream([CODE_WORD])
        return chat_stream(["Noted. " + "Growth is steady across the regions this quarter. " * 5])


def _action_requests(fake):
    return [r for r in fake.requests if not is_summary(r.json["messages"])]


def test_ctx50_the_first_question_and_an_agent_pin_stay_verbatim_through_three_compactions_of_junk(
        fake_session, fake, strict):
    provider = Provider()
    strict.handler = provider
    session = fake_session(**{**SMALL, "tools": ("update_plan",)})
    assert ask(session, GOAL).status == Run.Status.COMPLETED
    answer = SessionMessage.objects.get(session=session, kind="assistant")
    assert answer.message["content"] == CODE_WORD
    provider.pin_seq = answer.seq
    snapshots = CompactionSnapshot.objects.filter(instance__run__session=session)
    number = 2
    while snapshots.count() < 3:
        assert number < 14, "the history never compacted three times"
        run = ask(session, f"Question {number}. {VERY_LONG}")
        assert run.status == Run.Status.COMPLETED, (number, run.error)
        number += 1
    assert strict.rejections == [] and provider.summary_calls >= 3 and provider.plans == 1
    # The pins are records: the first question by default, the answer by the agent.
    pins = {pin.seq: pin for pin in pins_of_session(session_id=session.pk)}
    assert pins[1].default and pins[answer.seq].by == "agent"
    requests = _action_requests(fake)
    pinned_from = next(i for i, r in enumerate(requests) if CODE_WORD in json.dumps(r.json) and i > 0
                       and any(m.get("role") == "tool" for m in r.json["messages"]))
    for index, request in enumerate(requests):
        texts = _texts(request)
        assert _verbatim_outside_the_summary(texts, GOAL) == 1, index
        if index >= pinned_from:
            assert _verbatim_outside_the_summary(texts, CODE_WORD) == 1, index
    # After the compactions both are placed as quotes that say they are not new messages.
    last = _texts(requests[-1])
    joined = "\n".join(last)
    assert joined.count(PIN_OPENING) == 2 and joined.count("It is not a new message") == 2
    assert any(t.startswith("This session is being continued") for t in last)
    metrics = snapshots.order_by("-id").first().metrics
    assert metrics["pins_kept"] == 2 and metrics["pins_summarized"] == 0


def test_ctx50_update_plan_with_a_seq_that_names_no_message_fails_whole(fake_session, fake, strict):
    """A bad pin fails the call, plan and all, in words the agent can act on; nothing is written."""
    call = {"id": "plan-1", "name": "update_plan", "arguments": json.dumps(
        {"steps": [{"step": "Keep the goal", "status": "in_progress"}], "pin": [1, 999]})}
    replies = iter([chat_stream(tool_calls=[call]), chat_stream(["Understood."])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=("update_plan",))
    run = ask(session, GOAL)
    assert run.status == Run.Status.COMPLETED, run.error
    tool_message = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"][0]
    assert "Cannot pin: No such message in this session." in tool_message["content"]
    assert not SessionMessage.objects.filter(session=session, kind="pin").exists()
    assert Instance.objects.get(run=run, key="main").frame.get("plan") is None
    assert pins_of_session(session_id=session.pk)[0].default  # the goal, pinned by default, still is
