"""SIGKILL at each step of the loop (LOOP-1, RUN-6), with a real worker process.

The worker is the real Celery worker plus a sink that kills its own process right after a
chosen event is committed (``tests.faults.worker_main``), or a probe tool that kills it
after its side effect. Then, as an operator would: the reaper marks the run interrupted,
the user resumes it, and it completes. Each case checks that the records are the records
before plus exactly the expected appends (nothing lost, nothing twice), that no call with
a stored result ran again, that a non-idempotent call pending at the kill was never re-run,
and that the provider never received an invalid request.
"""
from __future__ import annotations

import json
import threading

import pytest

from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.dispatch import dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import Hang, chat_stream
from tests.faults.probe import probe_runs
from tests.faults.support import FaultWorker, assert_appended, celery_dispatcher, event_seqs_are_gap_free, ledger

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

CALC = {"id": "k-calc", "name": "calculator", "arguments": json.dumps({"expression": "6*7"})}
PROBE = {"id": "k-probe", "name": "fault_probe", "arguments": json.dumps({"tag": "once"})}


class Provider:
    """First call: ``first`` (a tool call or a slow answer); after tool results, or once
    the test says the worker is gone, a final answer."""

    def __init__(self, first, *, hang_first: bool = False) -> None:
        self.first = first
        self.hang_first = hang_first
        self.arrived = threading.Event()
        self.resumed = threading.Event()

    def __call__(self, request):
        messages = request.json["messages"]
        question = max(i for i, m in enumerate(messages) if m["role"] == "user")
        answered_tools = any(m["role"] == "tool" for m in messages[question:])
        if self.resumed.is_set() or answered_tools:
            return chat_stream(["All done."])
        self.arrived.set()
        if self.hang_first:
            return Hang(seconds=20)
        return self.first


def _kill_and_resume(session, strict, private_redis, tmp_path, provider, *, kill_at=None, kill_in_tool=False,
                     kill_on_arrival=False) -> Run:
    strict.handler = provider
    dispatch, close = celery_dispatcher(private_redis.url)
    dispatcher_set(dispatch)
    try:
        with FaultWorker(broker_url=private_redis.url, log_path=tmp_path / "worker.log", kill_at=kill_at,
                         kill_in_tool=kill_in_tool) as worker:
            run = question_ask(session=session, content="Work through it")
            if kill_on_arrival:
                assert provider.arrived.wait(timeout=60), worker.output()
                worker.kill()
            else:
                assert worker.died_by_sigkill(timeout=60), f"the worker did not die at {kill_at}:\n{worker.output()}"
    finally:
        dispatcher_set(lambda run_id: None)
        close()
    provider.resumed.set()
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # the kill left it mid-flight
    assert runs_reap_interrupted(stale_after=0) == [run.pk]
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.INTERRUPTED and run.error["retryable"] is True
    run_resume(run=run)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert SessionMessage.objects.filter(run=run, kind="assistant").last().message["content"] == "All done."
    assert strict.rejections == []
    event_seqs_are_gap_free(run)
    return run


def _result(run, key) -> dict:
    return SessionMessage.objects.get(run=run, entry_key=key).message


def test_a_worker_killed_while_waiting_for_the_model_resumes_and_asks_again(
        session_with_history, strict, private_redis, tmp_path):
    session = session_with_history()
    before = ledger(session)
    provider = Provider(None, hang_first=True)
    _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_on_arrival=True)
    assert_appended(session, before, [("user", "question"), ("run_status", "status-0"), ("run_status", "resumed-1"),
                                      ("assistant", "assistant-1"), ("run_status", "status-1")])


def test_a_worker_killed_mid_stream_saves_no_half_answer_and_resumes(session_with_history, strict, private_redis,
                                                                      tmp_path):
    session = session_with_history()
    before = ledger(session)
    provider = Provider(chat_stream(["Some ", "words ", "then ", "silence"], delay=0.3))
    run = _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_at="message_delta")
    assert RunEvent.objects.filter(run=run, type="message_delta").exists()  # text had streamed before the kill
    assert_appended(session, before, [("user", "question"), ("run_status", "status-0"), ("run_status", "resumed-1"),
                                      ("assistant", "assistant-1"), ("run_status", "status-1")])


def test_a_worker_killed_after_the_assistant_message_is_saved_runs_no_unsafe_call_on_resume(
        session_with_history, strict, private_redis, tmp_path, probe):
    session = session_with_history(tools=["calculator", "fault_probe"])
    before = ledger(session)
    provider = Provider(chat_stream(tool_calls=[CALC, PROBE]))
    run = _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_at="tool_call_detected")
    assert probe_runs(probe) == []  # the non-idempotent call never ran, before or after the kill
    calculator = _result(run, "result-1-0")
    assert calculator["status"] == "ok" and calculator["content"] == "6*7 = 42"  # idempotent: run on resume
    assert _result(run, "result-1-1")["status"] == "unknown"
    assert_appended(session, before, [("user", "question"), ("assistant", "assistant-1"),
                                      ("run_status", "status-0"), ("run_status", "resumed-1"),
                                      ("tool_result", "result-1-0"), ("tool_result", "result-1-1"),
                                      ("assistant", "assistant-2"), ("run_status", "status-1")])


def test_a_worker_killed_while_a_tool_runs_never_runs_that_call_again(session_with_history, strict, private_redis,
                                                                       tmp_path, probe):
    session = session_with_history(tools=["calculator", "fault_probe"])
    before = ledger(session)
    provider = Provider(chat_stream(tool_calls=[PROBE]))
    run = _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_in_tool=True)
    assert len(probe_runs(probe)) == 1  # its effect happened once, at the kill; never again
    result = _result(run, "result-1-0")
    assert result["status"] == "unknown" and "may or may not" in result["content"]
    assert_appended(session, before, [("user", "question"), ("assistant", "assistant-1"),
                                      ("run_status", "status-0"), ("run_status", "resumed-1"),
                                      ("tool_result", "result-1-0"), ("assistant", "assistant-2"),
                                      ("run_status", "status-1")])


def test_a_worker_killed_after_a_tool_result_is_saved_keeps_that_result_and_never_reruns(
        session_with_history, strict, private_redis, tmp_path, probe):
    session = session_with_history(tools=["calculator", "fault_probe"])
    before = ledger(session)
    provider = Provider(chat_stream(tool_calls=[PROBE]))
    run = _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_at="tool_finished")
    assert len(probe_runs(probe)) == 1
    assert _result(run, "result-1-0") == {"role": "tool", "tool_call_id": "k-probe", "name": "fault_probe",
                                          "content": "probe once done", "status": "ok"}
    assert RunEvent.objects.filter(run=run, type="tool_started").count() == 1
    assert_appended(session, before, [("user", "question"), ("assistant", "assistant-1"),
                                      ("tool_result", "result-1-0"), ("run_status", "status-0"),
                                      ("run_status", "resumed-1"),
                                      ("assistant", "assistant-2"), ("run_status", "status-1")])


def test_a_worker_killed_right_after_claiming_the_run_resumes_from_the_question(session_with_history, strict,
                                                                                 private_redis, tmp_path):
    session = session_with_history()
    before = ledger(session)
    provider = Provider(chat_stream(["unused"]))
    _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_at="run_started")
    assert not provider.arrived.is_set()  # killed before any model call
    assert_appended(session, before, [("user", "question"), ("run_status", "status-0"), ("run_status", "resumed-1"),
                                      ("assistant", "assistant-1"), ("run_status", "status-1")])


def test_a_resumed_run_leaves_no_pending_call_behind(session_with_history, strict, private_redis, tmp_path, probe):
    from sessions.models import Instance
    from sessions.selectors.instances import calls_pending

    session = session_with_history(tools=["fault_probe"])
    provider = Provider(chat_stream(tool_calls=[PROBE]))
    run = _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_at="tool_finished")
    assert calls_pending(instance=Instance.objects.get(run=run, key="main")) == []  # a view may be saved again
