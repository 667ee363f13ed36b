"""The first words of an answer leave as soon as the stream goes on after them (issue #29):
a person sees the first token when it comes, not a flush interval later. After them the
text is coalesced as before (a few events a second), and an answer that comes whole in one
piece is still written once, with its step (issue #25's bound for an answer step)."""
from __future__ import annotations

import pytest

from sessions.models import RunEvent
from sessions.services.events import DeltaBuffer
from sessions.services.questions import question_ask

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _texts(run) -> list[str]:
    return [e.payload["text"] for e in RunEvent.objects.filter(run=run, type="message_delta").order_by("seq")]


def test_the_first_words_leave_when_more_follow_then_the_rest_a_few_times_a_second(alice, make_session):
    run = question_ask(session=make_session(alice), content="Tell me")
    clock = Clock()
    buffer = DeltaBuffer(run.pk, "message_delta", clock=clock)
    buffer.add("Once")
    assert _texts(run) == []  # alone, it may be the whole answer: it waits for its step
    clock.now += 0.01
    buffer.add(" upon")
    assert _texts(run) == ["Once upon"]  # the stream goes on: the first words are out at once
    for word in (" a", " time", " there"):
        clock.now += 0.01
        buffer.add(word)
    assert _texts(run) == ["Once upon"]  # then coalesced, by the clock
    clock.now += buffer.flush_seconds
    buffer.add(" was")
    assert _texts(run) == ["Once upon", " a time there was"]
    assert buffer.take() == []


def test_an_answer_in_one_piece_is_written_with_its_step_only(alice, make_session):
    run = question_ask(session=make_session(alice), content="Short, please")
    buffer = DeltaBuffer(run.pk, "message_delta", clock=Clock())
    buffer.add("All done.")
    assert _texts(run) == []
    assert buffer.take() == [("message_delta", {"text": "All done."})]


def test_first_words_that_could_begin_a_secret_wait_until_they_cannot(alice, make_session):
    run = question_ask(session=make_session(alice), content="Key?")
    secret = "sk-live-0123456789abcdef"
    held = {"sk-": 3, "sk-live": 7}  # how much of the tail could still grow into the secret
    buffer = DeltaBuffer(run.pk, "message_delta", clock=Clock(), redact=lambda text: text.replace(secret, "[redacted]"),
                         hold=lambda text: next((n for tail, n in held.items() if text.endswith(tail)), 0))
    buffer.add("Use ")
    buffer.add("sk-")
    assert _texts(run) == ["Use "]  # the words out, the possible key's start held (LOOP-8)
    buffer.add("live")
    buffer.add("-0123456789abcdef now")  # the rest is coalesced by the clock, then goes with the step
    assert "".join(_texts(run)) + buffer.take()[0][1]["text"] == "Use [redacted] now"
