"""The offline demo model at its default pace: a person's Stop lands mid-answer (LOOP-7)
and Resume goes on from where the answer stopped. Waits on the first words, never on time."""
from __future__ import annotations

import pytest

from runloop.loop import run_execute
from sessions.models import Run, SessionMessage
from sessions.services import events as events_module
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume

pytestmark = pytest.mark.django_db(transaction=True)


def _answers(session):
    return [m.message for m in SessionMessage.objects.filter(session=session, kind="assistant").order_by("seq")]


def test_stop_after_the_first_words_of_the_default_paced_demo_keeps_them_and_resume_goes_on(
        settings, make_session, alice):
    settings.AGENTLOOM_DEMO_WORD_SECONDS = settings.AGENTLOOM_DEMO_WORD_SECONDS_DEFAULT
    session = make_session(alice)
    run = question_ask(session=session, content="Tell me about owls")

    def stop_at_the_first_words(event):  # what a person does who sees the answer begin
        if event.type == "message_delta" and event.run_id == run.pk:
            Run.objects.filter(pk=run.pk).update(cancel_requested=True)

    events_module.sinks.append(stop_at_the_first_words)
    try:
        run_execute(run_id=run.pk)
    finally:
        events_module.sinks.remove(stop_at_the_first_words)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED, run.status
    [partial] = _answers(session)
    assert partial["partial"] is True and partial["content"].startswith("(Offline demo model)")
    assert "real answers." not in partial["content"]  # stopped before its end

    settings.AGENTLOOM_DEMO_WORD_SECONDS = 0  # the rest at once: this test waits for nothing
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    rest = _answers(session)[-1]["content"]
    assert not rest.lstrip().startswith("(Offline demo model)")  # it goes on, it does not start again
    whole = " ".join((partial["content"] + rest).split())
    assert whole.startswith("(Offline demo model) You asked: “Tell me about owls”. I received 2 messages.")
    assert whole.endswith("Connect a real provider in the admin console for real answers.")
