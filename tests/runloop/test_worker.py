"""A real worker process: delivery, one execution per run, SIGKILL and resume (LOOP-1, RUN-6)."""
from __future__ import annotations

import json
import threading

import pytest
from rest_framework.test import APIClient

from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from runloop.tasks import dispatch_run
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.dispatch import dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import Hang, chat_stream, sequence
from tests.runloop.worker import Worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


def _status(run_id: int) -> str:
    return Run.objects.get(pk=run_id).status


def test_loop1_a_question_asked_through_the_api_is_answered_by_a_worker_process(fake_session, strict, alice):
    strict.handler = sequence(chat_stream(tool_calls=[{"id": "c", "name": "calculator",
                                                       "arguments": json.dumps({"expression": "2+3"})}]),
                              chat_stream(["It is 5."]))
    session = fake_session()
    dispatcher_set(dispatch_run)
    client = APIClient()
    client.force_authenticate(alice)
    with Worker():
        run_id = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "2+3?"},
                             format="json").json()["id"]
        wait_for(lambda: _status(run_id) in {"completed", "failed"}, timeout=60)
    assert _status(run_id) == "completed", Run.objects.get(pk=run_id).error
    assert list(SessionMessage.objects.filter(session=session).order_by("seq").values_list("kind", flat=True)) == [
        "user", "assistant", "tool_result", "assistant", "run_status"]
    assert strict.rejections == []


def test_loop1_a_second_delivery_of_the_same_run_does_nothing(fake_session, fake, strict):
    strict.handler = sequence(chat_stream(["Once."], delay=0.05))
    run = question_ask(session=fake_session(), content="Hi")
    threads = [threading.Thread(target=run_execute, kwargs={"run_id": run.pk}) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert RunEvent.objects.filter(run=run, type="run_started").count() == 1
    assert SessionMessage.objects.filter(run=run, kind="assistant").count() == 1
    assert len(fake.requests) == 1 and strict.rejections == []


def test_loop1_a_worker_killed_after_a_tool_result_resumes_without_rerunning_the_tool(fake_session, fake, strict):
    arrived = threading.Event()

    def handler(request):
        answered = [m for m in request.json["messages"] if m["role"] == "tool"]
        if not answered:
            return chat_stream(tool_calls=[{"id": "c1", "name": "calculator",
                                            "arguments": json.dumps({"expression": "40+2"})}])
        if not resumed.is_set():
            arrived.set()
            return Hang(seconds=20)
        return chat_stream(["It is 42."])

    resumed = threading.Event()
    strict.handler = handler
    session = fake_session()
    dispatcher_set(dispatch_run)
    run = question_ask(session=session, content="40+2?")
    with Worker() as worker:
        assert arrived.wait(timeout=60), "the second model call never came"
        worker.kill()
    before = list(SessionMessage.objects.filter(session=session).order_by("seq").values_list("seq", "kind"))
    assert [kind for _, kind in before] == ["user", "assistant", "tool_result"]
    assert runs_reap_interrupted(stale_after=0) == [run.pk]
    assert _status(run.pk) == "interrupted"

    resumed.set()
    dispatcher_set(lambda run_id: None)
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    assert _status(run.pk) == "completed"
    after = list(SessionMessage.objects.filter(session=session).order_by("seq").values_list("seq", "kind"))
    assert after[:3] == before  # nothing lost, nothing duplicated
    assert [kind for _, kind in after[3:]] == ["run_status", "run_status", "assistant", "run_status"]  # ended, resumed
    assert RunEvent.objects.filter(run=run, type="tool_started").count() == 1  # never re-run
    assert strict.rejections == []


def test_run6_a_non_idempotent_call_pending_at_the_kill_gets_an_unknown_result_on_resume(fake_session, fake, strict):
    arrived = threading.Event()
    resumed = threading.Event()

    def handler(request):
        messages = request.json["messages"]
        if messages[1]["content"] == "sub task":  # the delegated sub-agent's call
            if not resumed.is_set():
                arrived.set()
                return Hang(seconds=20)
            return chat_stream(["sub answer"])
        if not any(m["role"] == "tool" for m in messages):
            return chat_stream(tool_calls=[{"id": "d1", "name": "delegate",
                                            "arguments": json.dumps({"task": "sub task"})}])
        return chat_stream(["Finished."])

    strict.handler = handler
    session = fake_session()
    dispatcher_set(dispatch_run)
    run = question_ask(session=session, content="Delegate it")
    with Worker() as worker:
        assert arrived.wait(timeout=60)
        worker.kill()
    runs_reap_interrupted(stale_after=0)
    resumed.set()
    dispatcher_set(lambda run_id: None)
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    assert _status(run.pk) == "completed"
    result = SessionMessage.objects.get(run=run, kind="tool_result", instance__parent__isnull=True).message
    assert result["status"] == "unknown" and "may or may not" in result["content"]
    assert RunEvent.objects.filter(run=run, type="sub_instance_started").count() == 1  # never re-run
    assert strict.rejections == []
