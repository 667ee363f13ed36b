"""Infrastructure faults with a real worker process: Redis and PostgreSQL going away mid-run.

Redis is this test's own ``redis-server`` (never the machine's): it is both the worker's
broker and the pub/sub that wakes SSE streams, and it is SIGKILLed and restarted while
the run streams. PostgreSQL is the machine's; only the worker's own backends are
terminated (found by the ``application_name`` the worker connects with).
"""
from __future__ import annotations

import json
import logging
import threading
import time

import httpx
import pytest
from django.db import connection

from runloop.loop import run_execute
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services import event_log as events  # the rows and their sinks
from sessions.services.dispatch import dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.conftest import token_for
from tests.fakes.fake_provider import chat_stream
from tests.faults.support import (
    WORKER_APP_NAME,
    FaultWorker,
    assert_appended,
    celery_dispatcher,
    event_seqs_are_gap_free,
    ledger,
    wait_for,
)
from tests.runloop.livesrv import LiveServer, read_sse

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

CALC = {"id": "i-calc", "name": "calculator", "arguments": json.dumps({"expression": "2**10"})}
TERMINAL = {Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.INTERRUPTED}


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _status(run_id: int) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run_id)


def test_redis_killed_and_restarted_mid_run_loses_no_event_and_the_run_completes(
        session_with_history, strict, private_redis, tmp_path, alice, settings, monkeypatch):
    session = session_with_history()
    settings.REDIS_URL = private_redis.url  # the live server's SSE streams wake on this Redis
    monkeypatch.setattr(events, "_redis_client", None)  # the sink caches its client per process
    before = ledger(session)
    second_call = threading.Event()

    def provider(request):
        messages = request.json["messages"]
        question = max(i for i, m in enumerate(messages) if m["role"] == "user")
        if not any(m["role"] == "tool" for m in messages[question:]):
            return chat_stream(tool_calls=[CALC])
        second_call.set()
        return chat_stream([f"word{i} " for i in range(12)], delay=0.25)  # ~3 s of streaming

    strict.handler = provider
    dispatch, close = celery_dispatcher(private_redis.url)
    dispatcher_set(dispatch)
    frames: list[dict] = []
    token = token_for(alice)
    try:
        with FaultWorker(broker_url=private_redis.url, log_path=tmp_path / "worker.log") as worker, \
                LiveServer() as server:
            stream_warnings = _Collect()
            logging.getLogger("agentloom.stream").addHandler(stream_warnings)  # after uvicorn set up logging
            run = question_ask(session=session, content="Count it")

            def follow() -> None:
                with httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token}"},
                                  timeout=httpx.Timeout(10, read=20)) as client:
                    with client.stream("GET", f"/api/v1/runs/{run.pk}/events") as response:
                        frames.extend(read_sse(response.iter_lines()))

            reader = threading.Thread(target=follow, daemon=True)
            reader.start()
            assert second_call.wait(timeout=60), worker.output()
            private_redis.kill()
            before_outage = RunEvent.objects.filter(run=run).count()
            time.sleep(1.5)  # the run keeps streaming while Redis is gone
            during_outage = RunEvent.objects.filter(run=run).count() - before_outage
            private_redis.start()
            wait_for(lambda: _status(run.pk) in TERMINAL, timeout=60, what="the run to end")
            reader.join(timeout=30)
            assert not reader.is_alive(), "the SSE stream did not end after run_finished"
            log = worker.output()
    finally:
        dispatcher_set(lambda run_id: None)
        close()
        logging.getLogger("agentloom.stream").handlers[:] = [
            h for h in logging.getLogger("agentloom.stream").handlers if not isinstance(h, _Collect)]
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, (run.error, log[-3000:])
    types = event_seqs_are_gap_free(run)
    assert during_outage >= 2 and types[-1] == "run_finished"  # events were produced while Redis was down
    # Every event reached the SSE client exactly once and in order, across the outage.
    assert [int(f["id"]) for f in frames] == list(range(1, len(types) + 1))
    assert [f["event"] for f in frames] == types
    text = "".join(json.loads(f["data"]).get("text", "") for f in frames if f["event"] == "message_delta")
    assert text == "".join(f"word{i} " for i in range(12))
    assert SessionMessage.objects.get(run=run, entry_key="assistant-2").message["content"] == text
    assert_appended(session, before, [("user", "question"), ("assistant", "assistant-1"), ("tool_result", "result-1-0"),
                                      ("assistant", "assistant-2"), ("run_status", "status-0")])
    assert strict.rejections == []
    assert "redis_sink failed" in log  # the worker noticed, and went on
    assert any("falling back to polling" in message for message in stream_warnings.messages)


def _terminate_worker_backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE application_name = %s AND datname = current_database()", [WORKER_APP_NAME])
        return cursor.fetchone()[0]


def _outage_while_the_model_answers(session, strict, private_redis, tmp_path, reply, *, wait: float) -> Run:
    """The worker waits on the model; its database connections are cut; then the model answers."""
    arrived, release = threading.Event(), threading.Event()

    def provider(request):
        if not release.is_set():
            arrived.set()
            release.wait(timeout=20)
            return reply
        return chat_stream(["After ", "the ", "outage."])

    strict.handler = provider
    dispatch, close = celery_dispatcher(private_redis.url)
    dispatcher_set(dispatch)
    try:
        with FaultWorker(broker_url=private_redis.url, log_path=tmp_path / "worker.log") as worker:
            run = question_ask(session=session, content="Answer after the outage")
            assert arrived.wait(timeout=60), worker.output()
            assert _terminate_worker_backends() >= 1
            time.sleep(0.5)  # longer than the loop's Stop-check and delta-flush intervals
            release.set()
            try:
                wait_for(lambda: _status(run.pk) in TERMINAL, timeout=wait, what="the run to end")
            finally:
                release.set()
    finally:
        dispatcher_set(lambda run_id: None)
        close()
    run.refresh_from_db()
    return run


def test_a_connection_cut_during_a_commit_fails_the_run_clearly_with_no_half_state_and_resume_completes(
        session_with_history, strict, private_redis, tmp_path):
    session = session_with_history()
    before = ledger(session)
    # The first write after the answer starts streaming is the event log's transaction.
    run = _outage_while_the_model_answers(session, strict, private_redis, tmp_path,
                                          chat_stream(["Lost ", "in ", "the ", "outage."]), wait=20)
    assert run.status == Run.Status.FAILED
    assert run.error == {"code": "internal_error", "retryable": True,
                         "message": "Something went wrong on our side; you can resume the run."}
    assert_appended(session, before, [("user", "question"), ("run_status", "status-0")])  # no half-saved answer
    assert not RunEvent.objects.filter(run=run, type="message_delta").exists()  # the failed write left nothing

    run_resume(run=run)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert SessionMessage.objects.get(run=run, kind="assistant").message["content"] == "After the outage."
    assert_appended(session, before, [("user", "question"), ("run_status", "status-0"), ("run_status", "resumed-1"),
                                      ("assistant", "assistant-1"), ("run_status", "status-1")])
    event_seqs_are_gap_free(run)
    assert strict.rejections == []


def test_a_connection_cut_first_met_outside_a_transaction_still_ends_the_run_clearly(
        session_with_history, strict, private_redis, tmp_path):
    session = session_with_history()
    before = ledger(session)
    # A tool call streams no text, so the first query after the cut is the Stop check (autocommit).
    run = _outage_while_the_model_answers(session, strict, private_redis, tmp_path, chat_stream(tool_calls=[CALC]),
                                          wait=5)
    assert run.status == Run.Status.FAILED and run.error["retryable"] is True
    assert_appended(session, before, [("user", "question"), ("run_status", "status-0")])


def test_a_question_asked_while_redis_is_down_is_refused_cleanly_or_delivered_later(make_session, alice,
                                                                                     private_redis):
    from rest_framework.test import APIClient

    dispatch, close = celery_dispatcher(private_redis.url)
    dispatcher_set(dispatch)
    session = make_session(alice)
    private_redis.kill()
    client = APIClient()
    client.force_authenticate(alice)
    try:
        response = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "hi"}, format="json")
    finally:
        dispatcher_set(lambda run_id: None)
        close()
    if response.status_code == 503:  # refused: then nothing may be left behind
        assert Run.objects.filter(session=session).count() == 0 and ledger(session) == []
    else:
        assert response.status_code == 202, response.content[:200]
        # Never left queued forever: the run fails at once, clearly and resumably.
        run = Run.objects.get(session=session)
        assert run.status == Run.Status.FAILED and run.error["code"] == "queue_unavailable"
        assert run.error["retryable"] is True
        assert [kind for _, kind, _ in ledger(session)] == ["user", "run_status"]
