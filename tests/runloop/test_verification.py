"""LOOP-9: the completion check — done, failed, and never reported when skipped."""
from __future__ import annotations

import pytest

from runloop.loop import run_execute
from sessions.models import ModelCall, Run, SessionMessage
from sessions.selectors.instances import main_instance
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, error

pytestmark = pytest.mark.django_db(transaction=True)
# Every scenario runs on both wires: OpenAI-style chat completions and Anthropic\'s Messages API (CAT-7).
DIALECTS = ("openai", "anthropic")


def _verifying_session(fake_session):
    session = fake_session()
    version = session.version
    type(version).objects.filter(pk=version.pk).update(verify_before_complete=True)
    session.version.refresh_from_db()
    return session


def _script(verdict_response):
    def handler(request):
        system = request.json["messages"][0]["content"]
        if system.startswith("You check a candidate answer"):
            return verdict_response
        return chat_stream(["The answer is 42."])
    return handler


def _ask(session):
    run = question_ask(session=session, content="What is six times seven?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_loop9_a_passed_check_is_recorded_and_is_not_a_model_step(fake_session, strict):
    strict.handler = _script(chat_stream(["VERIFIED\nThe arithmetic is right."]))
    run = _ask(_verifying_session(fake_session))
    assert run.status == Run.Status.COMPLETED
    assert run.counters["verification"] == {"status": "passed", "reason": "The arithmetic is right."}
    assert main_instance(run=run).model_steps == 1
    assert ModelCall.objects.filter(run=run, purpose="verification").count() == 1
    assert SessionMessage.objects.filter(run=run, kind="assistant").count() == 1
    assert strict.rejections == []


def test_loop9_a_check_that_fails_to_run_keeps_the_answer_and_says_not_done(fake_session, strict):
    strict.handler = _script(error(500, "down"))
    run = _ask(_verifying_session(fake_session))
    assert run.status == Run.Status.COMPLETED
    assert run.counters["verification"]["status"] == "not_done"
    answer = SessionMessage.objects.get(run=run, kind="assistant").message
    assert answer["content"] == "The answer is 42."


def test_loop9_a_check_that_cannot_fit_is_skipped_not_reported_done(fake_session, strict):
    long_answer = "All the details: " + "forty-two " * 1_500  # fits as an answer, not inside the check

    def handler(request):
        if request.json["messages"][0]["content"].startswith("You check a candidate answer"):
            return chat_stream(["VERIFIED"])
        return chat_stream([long_answer])

    strict.handler = handler
    session = fake_session(window=4_000)
    type(session.version).objects.filter(pk=session.version.pk).update(verify_before_complete=True)
    run = _ask(session)
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.counters["verification"]["status"] == "not_done"
    assert "does not fit" in run.counters["verification"]["reason"]
    assert not ModelCall.objects.filter(run=run, purpose="verification").exists()
