"""LOOP-8: secrets are kept out of the log for as long as they are in use, not only while
``run_execute`` runs.

A manual compaction (CTX-43) builds the run's state and calls the model with the run's
key after the run has ended; a tool past its time-out keeps running in its thread, past
its run's end, and logs what it raises when it finally does. Both against the strict
fake provider on loopback, the log read from the process's own handler and pytest's
capture with the decoders of ``tests.security.leaks``. No test waits on a clock: each
waits on an event or a thread, with a bound.
"""
from __future__ import annotations

import json
import logging
import threading

import pytest

from agents.tool_registry import Tool, register, registry
from core.log_redaction import secrets_held
from runloop import compaction
from runloop.compaction_manual import compaction_manual
from runloop.loop import run_execute
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.manual_compaction import compaction_request
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, error
from tests.runloop.conftest import FAKE_KEY
from tests.runloop.test_compaction import SMALL, VERY_LONG, Provider, ask, is_summary_request
from tests.security.leaks import leaks, process_log, written_forms

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_FORM = " ".join(written_forms(FAKE_KEY).values())
BOUND = 30  # seconds: only reached when the test fails


def _finished_session(fake_session, strict):
    """Two long questions answered, under the trigger: a manual compaction has work to do."""
    strict.handler = Provider()
    session = fake_session(**SMALL, context_policy={"target_ratio": 0.2})
    for n in range(1, 3):
        assert ask(session, f"Question {n}. {VERY_LONG}").status == Run.Status.COMPLETED
    return session


def test_loop8_a_manual_compaction_whose_summary_call_is_refused_quoting_the_key_logs_it_redacted(
        fake_session, strict, caplog):
    session = _finished_session(fake_session, strict)
    # A proxy in front of the model that refuses the key and quotes it back, in its
    # WWW-Authenticate header and its body; the HTTP client writes the answer's headers to
    # the log at DEBUG (LOG_LEVEL=DEBUG), while the call is in flight.
    refusal = error(401, f"Invalid API key: {EVERY_FORM}", code="invalid_api_key",
                    headers={"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{FAKE_KEY}"'})
    strict.handler = lambda request: refusal if is_summary_request(request) else chat_stream(["Noted."])
    _, run = compaction_request(session=session)
    caplog.set_level(logging.DEBUG)
    with process_log() as log:
        assert compaction_manual(run_id=run.pk) == "not_compacted"
    assert RunEvent.objects.filter(run=run, type="compaction_failed").exists()
    written = log.getvalue()
    assert "receive_response_headers.complete" in written and "error_description=\"[REDACTED]\"" in written
    assert leaks({"process log": written, "captured log": caplog.text}, FAKE_KEY) == {}
    assert secrets_held() == ()  # nothing held once it is over


def test_loop8_a_manual_compaction_that_fails_unexpectedly_logs_it_redacted_and_says_so(fake_session, strict,
                                                                                         caplog, monkeypatch):
    session = _finished_session(fake_session, strict)

    def summary_call_failing(state, *args, **kwargs):  # a fault in the call itself, quoting the key it was given
        raise RuntimeError(f"could not send: Authorization: Bearer {state.target.api_key}")

    monkeypatch.setattr(compaction, "collected_call", summary_call_failing)
    _, run = compaction_request(session=session)
    caplog.set_level(logging.INFO)
    with process_log() as log:
        # Nothing escapes to the task runner, which would log the exception after the
        # secrets were let go.
        assert compaction_manual(run_id=run.pk) == "failed"
    written = log.getvalue()
    assert "manual compaction of run" in written and "RuntimeError: could not send" in written
    assert "Bearer [REDACTED]" in written
    assert leaks({"process log": written, "captured log": caplog.text}, FAKE_KEY) == {}
    # The chat waiting for the compaction it asked for hears that it ended.
    assert RunEvent.objects.get(run=run, type="compaction_failed").payload == {"reason": "internal_error"}


def test_loop8_a_tool_that_outlives_its_time_out_and_its_run_then_raises_with_the_key_logs_it_redacted(
        fake_session, strict, caplog):
    started, release = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []

    def lookup(arguments, context):
        threads.append(threading.current_thread())
        started.set()
        release.wait(BOUND)  # past its time-out, past the run's end: until the test lets it go
        raise ValueError(f"Invalid IPv6 address: '[{arguments['host']}]'")  # what httpx says of a made-up host

    register(Tool(name="slow_lookup", description="Look a host up.", idempotent=True, timeout_seconds=0.2,
                  parameters={"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]},
                  run=lookup))
    try:
        strict.handler = lambda request: (
            chat_stream(["The lookup timed out."]) if any(m["role"] == "tool" for m in request.json["messages"])
            else chat_stream(tool_calls=[{"id": "look-1", "name": "slow_lookup",
                                          "arguments": json.dumps({"host": FAKE_KEY})}]))
        session = fake_session(tools=("slow_lookup",))
        caplog.set_level(logging.INFO)
        with process_log() as log:
            run = question_ask(session=session, content="Look it up.")
            run_execute(run_id=run.pk)
            run.refresh_from_db()
            assert run.status == Run.Status.COMPLETED, run.error
            result = SessionMessage.objects.get(run=run, kind="tool_result").message["content"]
            assert "did not finish within 0.2 seconds" in result
            assert started.is_set() and threads[0].is_alive()  # the run is over; its tool is not
            release.set()
            threads[0].join(BOUND)
            assert not threads[0].is_alive()
        written = log.getvalue()
        assert "tool slow_lookup raised" in written and "Invalid IPv6 address: '[[REDACTED]]'" in written
        assert leaks({"process log": written, "captured log": caplog.text}, FAKE_KEY) == {}
        assert secrets_held() == ()  # the thread let go of them when it ended
    finally:
        release.set()
        registry.pop("slow_lookup", None)
