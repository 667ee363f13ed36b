"""Provider faults (LOOP-3) against the strict fake provider on a real socket.

Each test runs the real loop in-process (``run_execute``) on a session that already has
history, and checks three things: the run ends the way the spec says (retried and
completed, or failed with a clear, retryable error and no trace), the records are the
records before plus exactly what the run appended, and the provider never received an
invalid request — retries included.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from runloop.loop import run_execute
from sessions.models import ModelCall, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import Hang, Reset, SSEResponse, chat_chunks, chat_stream, error
from tests.faults.support import assert_appended, event_seqs_are_gap_free, ledger

pytestmark = pytest.mark.django_db(transaction=True)

ANSWERED = [("user", "question"), ("assistant", "assistant-1"), ("run_status", "status-0")]
FAILED = [("user", "question"), ("run_status", "status-0")]
PROVIDER_SECRET = "PROVIDER-BODY-SECRET-never-shown"


class Script:
    """Answers the n-th chat request with ``replies[n]`` (the last repeats) and notes when."""

    def __init__(self, *replies) -> None:
        self.replies = list(replies)
        self.times: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, request):
        with self.lock:
            self.times.append(time.monotonic())
            index = min(len(self.times) - 1, len(self.replies) - 1)
        reply = self.replies[index]
        return reply() if callable(reply) else reply


def ask(session, content="Now the faulty one"):
    run = question_ask(session=session, content=content)
    started = time.monotonic()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run, time.monotonic() - started


def saved_answer(run) -> str:
    return SessionMessage.objects.get(run=run, kind="assistant").message["content"]


def errors_announced(run) -> list[dict]:
    return [e.payload for e in RunEvent.objects.filter(run=run, type="run_error").order_by("seq")]


def assert_clear_failure(run, code: str) -> None:
    assert run.status == Run.Status.FAILED
    assert run.error["code"] == code and run.error["retryable"] is True, run.error
    text = json.dumps(run.error) + json.dumps(errors_announced(run))
    assert "Traceback" not in text and PROVIDER_SECRET not in text
    assert run.error["message"] and len(run.error["message"]) < 300


# --- 429 ------------------------------------------------------------------------------------------


def test_a_429_with_retry_after_waits_that_long_then_the_run_completes(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    script = Script(error(429, PROVIDER_SECRET, retry_after="1"), chat_stream(["After the pause."]))
    strict.handler = script
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "After the pause."
    assert len(script.times) == 2 and script.times[1] - script.times[0] >= 0.95  # Retry-After honoured
    announced = errors_announced(run)
    assert [(e["code"], e["retrying_in"]) for e in announced] == [("rate_limited", 1.0)]
    assert PROVIDER_SECRET not in json.dumps(announced)
    assert_appended(session, before, ANSWERED)
    assert strict.rejections == []


def test_a_429_asking_for_longer_than_the_back_off_bound_fails_clearly_and_resumes_later(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    script = Script(error(429, PROVIDER_SECRET, retry_after="3600"), chat_stream(["Later, then."]))
    strict.handler = script
    run, elapsed = ask(session)
    assert len(script.times) == 1 and elapsed < 60  # no worker held for an hour
    assert_clear_failure(run, "rate_limited")
    assert_appended(session, before, FAILED)

    run_resume(run=run)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "Later, then."
    assert_appended(session, before, [*FAILED, ("run_status", "resumed-1"), ("assistant", "assistant-1"),
                                      ("run_status", "status-1")])
    assert strict.rejections == []


# --- 5xx ------------------------------------------------------------------------------------------


def test_server_errors_are_retried_with_bounded_back_off_until_an_answer(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    script = Script(error(500, PROVIDER_SECRET), error(503, PROVIDER_SECRET), chat_stream(["Third time lucky."]))
    strict.handler = script
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "Third time lucky."
    assert [e["attempt"] for e in errors_announced(run)] == [1, 2]
    assert_appended(session, before, ANSWERED)
    assert ModelCall.objects.get(run=run).outcome == "ok"
    assert strict.rejections == []


def test_server_errors_on_every_attempt_fail_the_run_clearly_after_the_bound(session_with_history, strict, settings):
    session = session_with_history()
    before = ledger(session)
    script = Script(error(502, PROVIDER_SECRET))
    strict.handler = script
    run, _ = ask(session)
    assert len(script.times) == settings.AGENTLOOM_PROVIDER_ATTEMPTS  # bounded, not forever
    assert_clear_failure(run, "provider_unavailable")
    assert ModelCall.objects.get(run=run).outcome == "provider_unavailable"
    assert_appended(session, before, FAILED)
    assert strict.rejections == []


def test_a_401_is_never_retried_and_is_not_resumable(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    script = Script(error(401, PROVIDER_SECRET, code="invalid_api_key"))
    strict.handler = script
    run, _ = ask(session)
    assert len(script.times) == 1
    assert run.status == Run.Status.FAILED and run.error["code"] == "auth" and run.error["retryable"] is False
    assert PROVIDER_SECRET not in json.dumps(run.error)
    assert_appended(session, before, FAILED)


# --- time-outs and silence ------------------------------------------------------------------------


def test_a_provider_that_stalls_once_times_out_and_the_retry_answers(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    script = Script(Hang(seconds=60), chat_stream(["Woke up."]))
    strict.handler = script
    run, elapsed = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "Woke up."
    assert elapsed < 30  # AGENTLOOM_PROVIDER_READ_TIMEOUT (0.4 s here), not the 60 s stall
    assert errors_announced(run)[0]["code"] == "provider_unavailable"
    assert_appended(session, before, ANSWERED)
    assert strict.rejections == []


def test_a_stream_that_stalls_half_way_is_retried_and_only_the_full_answer_is_saved(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    script = Script(chat_stream(["Half ", "an ", "answer"], delay=30), chat_stream(["A whole ", "answer."]))
    strict.handler = script
    run, elapsed = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "A whole answer."
    assert elapsed < 25  # the read time-out, not the 30 s pauses
    assert errors_announced(run)[0]["reset"] is True  # the client is told to drop the partial text
    assert_appended(session, before, ANSWERED)


def test_a_provider_that_never_answers_fails_the_run_clearly_in_bounded_time(session_with_history, strict, settings):
    session = session_with_history()
    before = ledger(session)
    script = Script(Hang(seconds=60))
    strict.handler = script
    run, elapsed = ask(session)
    attempts = settings.AGENTLOOM_PROVIDER_ATTEMPTS
    assert len(script.times) == attempts
    assert elapsed < 45  # each attempt gives up at the read time-out, never after the 60 s silence
    assert_clear_failure(run, "provider_unavailable")
    assert "in time" in run.error["message"]
    assert_appended(session, before, FAILED)
    assert event_seqs_are_gap_free(run)[-1] == "run_finished"


# --- dropped connections --------------------------------------------------------------------------


def test_a_connection_reset_mid_stream_is_retried_and_the_partial_text_is_not_saved(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    script = Script(chat_stream(["Par", "tial ", "text ", "lost"], reset_after=4, delay=0.2),
                    chat_stream(["Complete ", "answer."]))
    strict.handler = script
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "Complete answer."
    deltas = [e.payload["text"] for e in RunEvent.objects.filter(run=run, type="message_delta").order_by("seq")]
    assert "Par" in "".join(deltas)  # the first attempt's text did stream…
    assert errors_announced(run)[0]["reset"] is True  # …and the client was told to discard it
    assert_appended(session, before, ANSWERED)
    assert strict.rejections == []


def test_a_connection_dropped_before_any_answer_is_retried(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    strict.handler = Script(Reset(), Reset(), chat_stream(["Through."]))
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "Through."
    assert_appended(session, before, ANSWERED)


def test_a_stream_closed_cleanly_before_its_end_is_not_taken_for_an_answer(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    strict.handler = Script(chat_stream(["Cut ", "short"], close_after=3), chat_stream(["In full."]))
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "In full."
    assert_appended(session, before, ANSWERED)


def test_a_tool_call_cut_mid_arguments_is_never_executed(session_with_history, strict, extra_sink):
    session = session_with_history()
    before = ledger(session)
    call = {"id": "cut-1", "name": "calculator", "arguments": json.dumps({"expression": "6*7"})}
    full = chat_chunks(tool_calls=[call], split=4)
    strict.handler = Script(SSEResponse(events=full[:4], done=False, reset_after=4),  # arguments half sent
                            chat_stream(tool_calls=[call]), chat_stream(["It is 42."]))
    started = []
    extra_sink(lambda event: started.append(event.payload) if event.type == "tool_started" else None)
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED
    assert len(started) == 1  # the half-streamed call never ran
    assert_appended(session, before, [("user", "question"), ("assistant", "assistant-1"), ("tool_result", "result-1-0"),
                                      ("assistant", "assistant-2"), ("run_status", "status-0")])
    assert strict.rejections == []


# --- malformed streams ----------------------------------------------------------------------------


def _chunk(content: str) -> dict:
    return {"id": "x", "object": "chat.completion.chunk", "model": "fake-model",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


@pytest.mark.parametrize("garbage", [
    b"data: {not json at all\n\n",
    b"data: [1, 2, 3]\n\n",
    b"data: \"a string\"\n\n",
    b"data: \xff\xfe\xfd\n\n",
    b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n',
], ids=["not-json", "json-array", "json-string", "not-utf8", "error-mid-stream"])
def test_a_malformed_chunk_mid_stream_is_retried_and_never_saved(session_with_history, strict, garbage):
    session = session_with_history()
    before = ledger(session)
    broken = SSEResponse(events=[_chunk("Hello "), garbage, _chunk("world")])
    strict.handler = Script(broken, chat_stream(["Clean answer."]))
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "Clean answer."
    assert_appended(session, before, ANSWERED)
    assert strict.rejections == []


def test_harmless_oddities_of_a_stream_are_tolerated_on_the_first_attempt(session_with_history, strict):
    session = session_with_history()
    before = ledger(session)
    chunks = chat_chunks(["Odd ", "but ", "fine."])
    events = [b": keep-alive comment\n\n", chunks[0], b"event: ping\ndata: {}\n\n",
              b"data: " + json.dumps(chunks[1]).encode() + b"\r\n\r\n",  # CRLF line ends
              {"id": "x", "object": "chat.completion.chunk", "choices": []},  # an empty chunk
              *chunks[2:]]
    script = Script(SSEResponse(events=events))
    strict.handler = script
    run, _ = ask(session)
    assert run.status == Run.Status.COMPLETED and saved_answer(run) == "Odd but fine."
    assert len(script.times) == 1
    assert_appended(session, before, ANSWERED)


def test_a_provider_that_only_sends_garbage_fails_the_run_clearly(session_with_history, strict, settings):
    session = session_with_history()
    before = ledger(session)
    script = Script(SSEResponse(events=[b"data: <html>502 Bad Gateway</html>\n\n"]))
    strict.handler = script
    run, _ = ask(session)
    assert len(script.times) == settings.AGENTLOOM_PROVIDER_ATTEMPTS
    assert_clear_failure(run, "provider_unavailable")
    assert "malformed" in run.error["message"]
    assert_appended(session, before, FAILED)
    assert strict.rejections == []
