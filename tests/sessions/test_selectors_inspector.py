"""The context inspector's pairing (``sessions.selectors.inspector.model_call_pairings``):
which call each model call is compared with, and what changed — the one answer the API
and the console both shape.

alice's session has two runs; calls are logged through the loop's own services.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions.models import Instance, ModelCall, Run
from sessions.selectors.inspector import CallPairing, model_call_pairings
from sessions.selectors.instances import main_instance
from sessions.services.model_calls import model_call_close, model_call_open
from sessions.services.questions import question_ask
from sessions.services.retention import call_logs_prune
from sessions.services.runs import run_finish
from tests.sessions.helpers import claim

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "Be brief."}
Q1, A1 = {"role": "user", "content": "What is 6*7?"}, {"role": "assistant", "content": "42."}
Q2, A2 = {"role": "user", "content": "And 6*8?"}, {"role": "assistant", "content": "48."}
CALCULATOR = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
CLOCK = {"type": "function", "function": {"name": "current_time", "parameters": {"type": "object"}}}


def logged(run: Run, messages: list[dict], *, purpose: str = "action", instance: Instance | None = None,
           tools: list[dict] | None = None) -> ModelCall:
    """A model call as the loop logs it: opened with its body, closed with its usage."""
    call = model_call_open(run=run, instance=instance or main_instance(run=run), purpose=purpose,
                           provider="openai_compatible", model="qwen3-8b", estimator_id="tiktoken-o200k_base-v1",
                           estimated_tokens=100, body={"model": "qwen3-8b", "messages": messages,
                                                       "tools": [CALCULATOR] if tools is None else tools},
                           estimates=[10] * len(messages))
    model_call_close(call=call, outcome="ok", usage={"prompt_tokens": 110, "completion_tokens": 5})
    return call


@dataclass
class Conversation:
    first: Run
    second: Run
    calls: dict[str, ModelCall]


@pytest.fixture
def conversation(make_session, alice) -> Conversation:
    """Run 1: two action calls, a sub-agent's call, then a summary call. Run 2: the next
    question's action call, a second one that also offers the clock, and a sub-agent's first call."""
    session = make_session(alice)
    first = claim(question_ask(session=session, content=Q1["content"]))
    helper = Instance.objects.create(run=first, parent=main_instance(run=first), key="sub-1", depth=1)
    calls = {"first_ask": logged(first, [SYSTEM, Q1]), "first_answer": logged(first, [SYSTEM, Q1, A1]),
             "helper": logged(first, [SYSTEM, {"role": "user", "content": "Check the sum."}], instance=helper),
             "summary": logged(first, [{"role": "user", "content": "Summarize."}], purpose="compaction")}
    assert run_finish(run=first, status=Run.Status.COMPLETED)
    second = claim(question_ask(session=session, content=Q2["content"]))
    sub = Instance.objects.create(run=second, parent=main_instance(run=second), key="sub-1", depth=1)
    calls["next_ask"] = logged(second, [SYSTEM, Q1, A1, Q2])
    calls["with_clock"] = logged(second, [SYSTEM, Q1, A1, Q2, A2], tools=[CALCULATOR, CLOCK])
    calls["sub_first"] = logged(second, [SYSTEM, {"role": "user", "content": "Count the pages."}], instance=sub)
    return Conversation(first=first, second=second, calls=calls)


def by_call(pairings: list[CallPairing]) -> dict[int, CallPairing]:
    return {pairing.call.pk: pairing for pairing in pairings}


def test_a_runs_first_main_call_is_compared_with_the_previous_runs_last_call_of_its_purpose(conversation):
    calls = conversation.calls
    pairings = model_call_pairings(run=conversation.second)
    assert [p.call.pk for p in pairings] == [calls[k].pk for k in ("next_ask", "with_clock", "sub_first")]
    opening = by_call(pairings)[calls["next_ask"].pk]
    # Neither the summary call nor the sub-agent's, though they came later: a main
    # instance's action call extends the main instance's last action call.
    assert opening.previous == calls["first_answer"] and opening.previous_in_earlier_run
    assert opening.diff is not None and opening.diff.counts == {"kept": 3, "rewritten": 0, "added": 1, "removed": 0}
    assert (opening.first_changed, opening.tools_changed, opening.pruned) == (3, False, None)
    assert [e.message for e in opening.previous_entries] == [SYSTEM, Q1, A1]


def test_a_sub_agents_first_call_has_nothing_to_compare_with(conversation):
    sub_first = by_call(model_call_pairings(run=conversation.second))[conversation.calls["sub_first"].pk]
    assert (sub_first.previous, sub_first.diff, sub_first.first_changed, sub_first.tools_changed) == \
        (None, None, None, False)


def test_a_changed_tool_list_leaves_a_prompt_cache_nothing_to_match(conversation):
    calls = conversation.calls
    with_clock = by_call(model_call_pairings(run=conversation.second))[calls["with_clock"].pk]
    assert with_clock.previous == calls["next_ask"] and not with_clock.previous_in_earlier_run
    assert with_clock.tools_changed and [t["function"]["name"] for t in with_clock.tools] == \
        ["calculator", "current_time"]
    # The messages only grew by one, but the tools come before every message.
    assert with_clock.diff is not None and with_clock.diff.first_changed == 4
    assert with_clock.first_changed == 0


def test_a_page_names_the_earlier_calls_it_compares_with_before_they_are_read(conversation):
    calls, heard = conversation.calls, []
    [later] = model_call_pairings(run=conversation.second, ids=[calls["with_clock"].pk], before_read=heard.append)
    [opening] = model_call_pairings(run=conversation.second, ids=[calls["next_ask"].pk], before_read=heard.append)
    model_call_pairings(run=conversation.second, before_read=heard.append)
    assert heard == [[calls["next_ask"].pk], [calls["first_answer"].pk], [calls["first_answer"].pk]]
    assert later.previous == calls["next_ask"] and opening.previous == calls["first_answer"]
    assert model_call_pairings(run=conversation.second, ids=[], before_read=heard.append) == []
    assert heard[-1] == []


def test_a_copy_dropped_after_the_retention_period_compares_nothing(conversation):
    calls = conversation.calls
    ModelCall.objects.filter(run=conversation.first).update(created_at=timezone.now() - timedelta(days=10))
    agent = conversation.first.session.agent
    type(agent).objects.filter(pk=agent.pk).update(call_log_retention_days=7)
    call_logs_prune()
    opening = by_call(model_call_pairings(run=conversation.second))[calls["next_ask"].pk]
    assert opening.previous == calls["first_answer"] and opening.pruned == calls["first_answer"].pk
    assert (opening.diff, opening.first_changed, opening.tools_changed) == (None, None, False)
