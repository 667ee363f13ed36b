"""LOOP-3: a model server that asks for a wait (``Retry-After``).

A short wait is waited out in place and the call asked again. A wait longer than
``AGENTLOOM_PROVIDER_RETRY_MAX_DELAY`` holds no worker thread: the run goes back to the
queue until then (``Run.not_before``), the chat says until when and that nothing is lost,
and whichever worker is alive when it is due takes it up -- the one that let go of it may
be gone by then.
"""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from runloop.housekeeping import Housekeeper
from runloop.loop import run_execute
from sessions.models import ModelCall, Run, RunEvent, SessionMessage
from sessions.services import dispatch
from sessions.services.questions import question_ask
from sessions.services.run_slots import runs_wake_waiting
from tests.fakes.fake_provider import chat_stream, error, sequence

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


@pytest.fixture
def sent():
    """The runs handed to a worker (the registered dispatcher of a deployment, recorded)."""
    before = dispatch.dispatcher_get()
    handed: list[int] = []
    dispatch.dispatcher_set(handed.append)
    yield handed
    dispatch.dispatcher_set(before)


def wait_until(moment, *, bound: float = 15.0) -> None:
    deadline = time.monotonic() + bound
    while timezone.now() < moment:
        assert time.monotonic() < deadline, "the wait never came due"
        time.sleep(0.05)


def test_a_long_retry_after_frees_the_worker_and_another_worker_takes_the_run_up_when_due(
        fake_session, fake, strict, settings, sent, alice):
    settings.AGENTLOOM_PROVIDER_RETRY_MAX_DELAY = 0.5
    strict.handler = sequence(error(429, "Rate limit reached, retry later.", type="rate_limit_error",
                                    code="rate_limit_exceeded", retry_after=2),
                              chat_stream(["Back, with the answer."]))
    session = fake_session()
    run = question_ask(session=session, content="What is the capital of France?")
    sent.clear()
    asked_at = timezone.now()
    run_execute(run_id=run.pk)  # returns at once: nothing waits in this thread
    run.refresh_from_db()

    assert run.status == Run.Status.QUEUED and run.waiting_reason == Run.Waiting.MODEL_SERVER
    assert run.attempt == 1 and run.error is None
    assert asked_at + timedelta(seconds=1.5) <= run.not_before <= timezone.now() + timedelta(seconds=2)
    waiting = RunEvent.objects.get(run=run, type="run_waiting").payload
    assert waiting["reason"] == "model_server" and waiting["code"] == "rate_limited"
    assert waiting["until"] == run.not_before.isoformat()
    assert waiting["text"] == (f"Waiting for the model server until {run.not_before:%H:%M} UTC: it asked us to wait "
                               "before asking again. Nothing is lost; the answer goes on by itself then.")
    assert len(fake.requests) == 1 and sent == []
    assert list(ModelCall.objects.filter(run=run).values_list("outcome", flat=True)) == ["rate_limited"]
    # The API says until when; a reloaded chat page carries it for its words.
    client = Client()
    client.force_login(alice)
    body = client.get(f"/api/v1/runs/{run.pk}").json()
    assert (body["status"], body["waiting_reason"]) == ("queued", "model_server") and body["not_before"]
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert (f'data-status="queued" data-waiting="model_server" data-not-before="{run.not_before.isoformat()}"'
            in page)

    # Too early: a stray delivery claims nothing, and the sweep sends nothing.
    run_execute(run_id=run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED and len(fake.requests) == 1
    assert runs_wake_waiting() == [] and sent == []

    # The worker that let go of it is gone; a new one starts once the wait is due.
    wait_until(run.not_before)
    Housekeeper(name="worker-b@host").tick(first=True)
    assert sent == [run.pk]
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.not_before is None and run.waiting_reason == ""
    assert [m.message["content"] for m in SessionMessage.objects.filter(run=run, kind="assistant")] == [
        "Back, with the answer."]
    first, second = (request.json["messages"] for request in fake.requests)
    assert second[-1] == first[-1]  # the same question, asked again
    assert RunEvent.objects.filter(run=run, type="run_started").order_by("seq").last().payload == {"attempt": 1}
    assert strict.rejections == []


def test_a_run_waiting_for_the_server_can_be_stopped(fake_session, strict, settings, alice):
    from rest_framework.test import APIClient

    settings.AGENTLOOM_PROVIDER_RETRY_MAX_DELAY = 0.5
    strict.handler = sequence(error(503, "busy", retry_after=600))
    run = question_ask(session=fake_session(), content="Anything?")
    run_execute(run_id=run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    client = APIClient()
    client.force_authenticate(alice)
    assert client.post(f"/api/v1/runs/{run.pk}/cancel").status_code in (200, 202)
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED


def test_a_short_retry_after_is_waited_out_in_place(fake_session, fake, strict):
    strict.handler = sequence(error(429, "Rate limit reached.", retry_after=0.2), chat_stream(["Now."]))
    run = question_ask(session=fake_session(), content="What is the capital of France?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert len(fake.requests) == 2 and not RunEvent.objects.filter(run=run, type="run_waiting").exists()
    [retry] = [e.payload for e in RunEvent.objects.filter(run=run, type="run_error")]
    assert retry["code"] == "rate_limited" and retry["retrying_in"] == 0.2
