"""An answer larger than its output limit, and a record larger than any request (CTX-7, CTX-42).

A provider that ignores ``max_tokens`` and streams megabytes must neither fill the
database nor end the session: the loop cuts the answer at a bound tied to the output
limit and records it as stopped there, and the projection shows any oversized record
with its head and tail, so the next question is answered.
"""
from __future__ import annotations

import pytest

from context.truncation import answer_bound
from models_catalog.models import ModelConnection
from sessions.models import ModelCall, Run, RunEvent, SessionMessage
from sessions.services.imports import session_import
from tests.fakes.fake_provider import chat_stream
from tests.runloop.driving import ask_and_run as ask
from web.transcript import Answer, items_from_records

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

OUTPUT = 256  # max_output_tokens: the answer's bound is 32 characters a token, 8,192
RUNAWAY = "The answer goes on and on, paying no attention to its limit. " * 20  # 1,220 characters a chunk
CHUNKS = 2_500  # about 3 MB in all


class IgnoresMaxTokens:
    """A server that streams its whole answer whatever ``max_tokens`` says, then ``stop``;
    every later request gets a short answer. Each request's messages are kept."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    def __call__(self, request):
        self.requests.append(request.json)
        assert request.json["max_tokens"] == OUTPUT  # it was told, and ignores it
        if len(self.requests) == 1:
            return chat_stream([RUNAWAY] * CHUNKS)
        return chat_stream(["In short: it went on too long."], usage={"prompt_tokens": 3_000,
                                                                       "completion_tokens": 9})


def _with_output_limit(session, output: int):
    version = session.version
    ModelConnection.objects.filter(pk=version.model_connection_id).update(max_output_tokens=output)
    type(version).objects.filter(pk=version.pk).update(max_output_tokens=output)
    version.refresh_from_db()
    return session



def test_ctx7_a_runaway_answer_is_cut_at_its_bound_recorded_as_cut_and_the_session_goes_on(fake_session, strict):
    server = strict.handler = IgnoresMaxTokens()
    session = _with_output_limit(fake_session(tools=()), OUTPUT)
    first = ask(session, "Tell me everything.")
    assert first.status == Run.Status.COMPLETED, first.error
    bound = answer_bound(OUTPUT)
    assert bound == 8_192
    record = SessionMessage.objects.get(run=first, kind="assistant")
    assert record.message["content"] == (RUNAWAY * 7)[:bound]  # the head, up to the bound; nothing more stored
    assert record.message["finish_reason"] == "length" and not record.message["partial"]
    streamed = sum(len(e.payload.get("text", "")) for e in RunEvent.objects.filter(run=first, type="message_delta"))
    assert streamed == bound  # what the chat was sent is bounded too
    assert ModelCall.objects.get(run=first).outcome == "output_limit"
    # The screen says the answer was cut at its output limit, and what to do next.
    answer = next(item for item in items_from_records(SessionMessage.objects.filter(run=first).order_by("seq"))
                  if isinstance(item, Answer))
    assert answer.cut_at_limit
    assert answer.limit_note == f"The answer was cut at {OUTPUT} tokens (this agent's output limit)."
    # The next question of the same session is answered, with the cut answer in its history.
    second = ask(session, "And in one line?")
    assert second.status == Run.Status.COMPLETED, second.error
    assert strict.rejections == []
    history = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in history] == [record.message["content"]]


def test_ctx42_an_imported_answer_of_a_million_characters_is_shown_in_part_and_the_next_question_is_answered(
        fake_agent_factory, alice, strict):
    # A record over any window (here from an import; before answers were bounded, from a
    # provider that ignored its limit) used to make every later question context_overflow.
    answer = "Chapter one begins here.\n" + "Lorem ipsum dolor sit amet. " * 36_000 + "THE LAST LINE."
    agent, _ = fake_agent_factory(tools=())
    session = session_import(user=alice, agent_id=agent.pk, transcript=[
        {"role": "user", "content": "Write me a very long book."}, {"role": "assistant", "content": answer}])
    seen: list[dict] = []
    strict.handler = lambda request: seen.append(request.json) or chat_stream(["It ends with its last line."])
    run = ask(session, "How does it end?")
    assert run.status == Run.Status.COMPLETED, run.error
    assert list(ModelCall.objects.filter(run=run).values_list("purpose", flat=True)) == ["action"]  # no summary needed
    assert len(seen) == 1 and strict.rejections == []
    shown = [m for m in seen[0]["messages"] if m["role"] == "assistant"][0]["content"]
    # At most what the connection's output limit (1,024 tokens) lets a model write in one answer.
    assert len(shown) <= answer_bound(1_024) and shown.startswith("Chapter one begins here.")
    assert shown.endswith("THE LAST LINE.")
    assert f"of {len(answer)} characters omitted from the middle" in shown and "read_record" in shown
    stored = SessionMessage.objects.filter(session=session, kind="assistant").order_by("seq").first()
    assert stored.message["content"] == answer  # the records keep every character
