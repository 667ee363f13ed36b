"""What the chat and the inspector are shown about a step's context: the projector's
repairs kept with the call that sent them, and the meter's ``context_measured`` event.

Driven by the real loop against the strict fake on both wires.
"""
from __future__ import annotations

import pytest

from agents.selectors import version_budget
from context.records import UNKNOWN_OUTCOME_TEXT
from runloop.loop import run_execute
from sessions.models import ModelCall, Run, RunEvent
from sessions.run_errors import RunError
from sessions.selectors.instances import main_instance
from sessions.selectors.model_calls import model_call_entries, model_call_repairs
from sessions.services.model_steps import step_save_assistant
from sessions.services.questions import question_ask
from sessions.services.runs import run_claim, run_finish
from tests.fakes.fake_provider import chat_stream

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


def _ask(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _interrupted_with_unanswered_call(session, call_id: str) -> Run:
    run = run_claim(run_id=question_ask(session=session, content="Pay the invoice.").pk)
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "delegate", "arguments": '{"task": "pay"}'}}]}
    step_save_assistant(run=run, instance=main_instance(run=run), message=message, entry_key="assistant-1")
    assert run_finish(run=run, status=Run.Status.INTERRUPTED, reason="the worker stopped responding",
                      error=RunError("interrupted", "resume", retryable=True))
    return run


def test_ctx3_ctx5_the_repairs_of_a_request_are_kept_with_its_call(fake_session, strict, dialect):
    strict.handler = lambda request: chat_stream(["I cannot tell whether it was paid."])
    session = fake_session(tools=("delegate",))
    _interrupted_with_unanswered_call(session, "pay:1/a")
    run = _ask(session, "Was it paid?")
    assert run.status == Run.Status.COMPLETED, run.error
    call = ModelCall.objects.get(run=run, purpose=ModelCall.Purpose.ACTION)
    repairs = model_call_repairs(call=call)
    assert [r["kind"] for r in repairs] == ["id_rewritten", "unknown_outcome"]
    assert all(r["reason"] and isinstance(r["seq"], int) for r in repairs)
    if dialect == "anthropic":  # a native body merges turns: no positions to mislead with
        assert [r["position"] for r in repairs] == [None, None]
    else:  # system, question, the call, its placeholder
        entries = model_call_entries(call=call)
        assert entries[repairs[0]["position"]].message["tool_calls"][0]["id"] == repairs[0]["call_id"]
        placeholder = entries[repairs[1]["position"]].message
        assert placeholder["role"] == "tool" and UNKNOWN_OUTCOME_TEXT in str(placeholder["content"])
    assert strict.rejections == []


def test_ctx3_a_clean_history_has_no_repairs(fake_session, strict):
    strict.handler = lambda request: chat_stream(["Hello."])
    run = _ask(fake_session(), "Hi")
    assert model_call_repairs(call=ModelCall.objects.get(run=run)) == []


def _measured(run: Run) -> list[dict]:
    return [e.payload for e in RunEvent.objects.filter(run=run, type="context_measured").order_by("seq")]


def test_the_meter_reads_the_providers_count_and_the_versions_thresholds(fake_session, strict):
    strict.handler = lambda request: chat_stream(["A short answer."], usage={
        "prompt_tokens": 5_000, "completion_tokens": 4, "total_tokens": 5_004})
    session = fake_session()
    run = _ask(session, "How full is it?")
    [measured] = _measured(run)
    budget = version_budget(version=session.version)
    assert measured["measured_by"] == "provider"
    # What was sent, plus the answer the next request carries (calibrated by this very count).
    assert 5_000 < measured["tokens"] < 6_000
    assert (measured["effective_input_tokens"], measured["trigger_tokens"], measured["target_tokens"]) == (
        budget["effective_input_tokens"], budget["trigger_tokens"], budget["target_tokens"])


def test_the_meter_falls_back_to_the_calibrated_estimate_without_usage_and_grows_each_step(fake_session, strict,
                                                                                          dialect):
    replies = iter([chat_stream(tool_calls=[{"id": "t1", "name": "current_time", "arguments": "{}"}]),
                    chat_stream(["It is late."])])
    strict.handler = lambda request: next(replies)
    run = _ask(fake_session(), "What time is it?")
    first, second = _measured(run)
    # The Messages API always reports usage; an OpenAI-compatible server here sends none.
    expected = "provider" if dialect == "anthropic" else "estimate"
    assert first["measured_by"] == second["measured_by"] == expected
    assert 0 < first["tokens"] < second["tokens"]
