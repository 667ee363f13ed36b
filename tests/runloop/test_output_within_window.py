"""Output within the window, and ``length`` named for its real cause (CAT-12).

A server whose context fills stops the answer with finish reason ``length`` long before
the agent's output limit (llama-cpp-python's server ends generation when prompt + answer
reach its ``n_ctx``: 221 tokens of a 4,096-token limit). The chat names that cause — the
server's context filled — and never says "cut at 4,096 tokens". An answer that really
reached its output limit keeps saying so. Every request's ``max_tokens`` fits what the
window leaves after its prompt.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context import Budget, length_cause
from sessions.models import Run, SessionMessage
from tests.fakes.fake_provider import chat_stream
from tests.runloop.driving import ask_and_run as ask
from web.transcript import Answer, items_from_records

pytestmark = pytest.mark.django_db(transaction=True)
SHORT = "The server stopped me here because its context is full, after only a few words of"


def answer_of(run) -> Answer:
    records = SessionMessage.objects.filter(run=run).order_by("seq")
    return next(item for item in items_from_records(records) if isinstance(item, Answer))


def test_an_answer_the_servers_full_context_ended_is_named_so_not_cut_at_the_output_limit(fake_session, strict):
    strict.handler = lambda request: chat_stream([SHORT], finish_reason="length")  # no usage, as llama.cpp streams
    run = ask(fake_session(tools=()), "Tell me everything.")
    assert run.status == Run.Status.COMPLETED, run.error
    record = SessionMessage.objects.get(run=run, kind="assistant").message
    assert (record["output_limit"], record["length_cause"]) == (1_024, "context_filled")
    note = answer_of(run).limit_note
    assert "context window filled up" in note and "output limit of 1,024 tokens" in note
    assert "cut at" not in note


def test_the_providers_completion_count_decides_when_it_has_one(fake_session, strict):
    strict.handler = lambda request: chat_stream([SHORT], finish_reason="length",
                                                 usage={"prompt_tokens": 40, "completion_tokens": 1_024})
    run = ask(fake_session(tools=()), "Tell me everything.")
    record = SessionMessage.objects.get(run=run, kind="assistant").message
    assert (record["answer_tokens"], record["length_cause"]) == (1_024, "output_limit")
    assert answer_of(run).limit_note == "The answer was cut at 1,024 tokens (this agent's output limit)."


@given(window=st.integers(2, 300_000), output=st.integers(1, 300_000), margin=st.integers(0, 5_000),
       figure=st.integers(-10, 400_000))
def test_output_room_never_exceeds_the_limit_nor_what_the_window_leaves(window, output, margin, figure):
    if window - output - margin < 1:
        return
    budget = Budget(context_window=window, max_output_tokens=output, safety_margin_tokens=margin)
    room = budget.output_room(figure)
    assert 1 <= room <= output
    assert room <= max(1, window - max(0, figure))
    if budget.fits(figure):
        assert room == output  # a request under CTX-39 keeps its whole output limit


@pytest.mark.parametrize(("limit", "written", "cause"), [
    (4_096, 221, "context_filled"), (4_096, 4_096, "output_limit"), (4_096, 2_100, "output_limit"),
    (4_096, None, "output_limit"), (1_024, 511, "context_filled"),
])
def test_length_cause(limit, written, cause):
    assert length_cause(output_limit=limit, answer_tokens=written) == cause
