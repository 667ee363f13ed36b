"""LOOP-8: the paths a review found where a key the model wrote was stored in clear.

- tool-call arguments with the key written as JSON escapes (they decode to the key);
- the ``delegate`` task, saved as the sub-instance's user record;
- the completion check's reason, stored in the run's counters and a record (redacted
  before it is cut to its length, or the cut could keep the start of a key);
- the result of a call settled on resume (RUN-6), written by another path than a step's.
"""
from __future__ import annotations

import json

import pytest

from runloop.loop import run_execute
from sessions.models import Instance, ModelCall, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import chat_stream
from tests.runloop.conftest import FAKE_KEY, fake, fake_agent_factory, fake_session, strict  # noqa: F401
from tests.security.leaks import strings
from tests.sessions.helpers import interrupted_after_calls

pytestmark = pytest.mark.django_db(transaction=True)

ESCAPED_KEY = "".join(f"\\u{ord(ch):04x}" for ch in FAKE_KEY)


def _everything_decrypted(session, run) -> dict[str, str]:
    return {
        "records": json.dumps([m.message for m in SessionMessage.objects.filter(session=session)]),
        "events": json.dumps([e.payload for e in RunEvent.objects.filter(run=run)]),
        "counters and error": json.dumps([run.counters, run.error]),
        "frames": json.dumps([i.frame for i in Instance.objects.filter(run=run)]),
        "model calls": json.dumps([c.request for c in ModelCall.objects.filter(run=run)]),
    }


def _leaks(places: dict[str, str]) -> list[str]:
    """Where the key is, written plainly, as JSON escapes, or inside JSON-encoded arguments."""
    return [where for where, text in places.items()
            if any(FAKE_KEY in s or ESCAPED_KEY in s for s in strings(json.loads(text)))]


def _run(session, content="Go.") -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_loop8_a_key_written_as_json_escapes_in_tool_call_arguments_is_redacted(fake_session, strict):
    arguments = '{"expression": "1+1 ' + ESCAPED_KEY + '"}'  # decodes to the key
    assert json.loads(arguments)["expression"].endswith(FAKE_KEY)
    replies = iter([chat_stream(tool_calls=[{"id": "esc-1", "name": "calculator", "arguments": arguments}]),
                    chat_stream(["Done."])])
    strict.handler = lambda request: next(replies)
    session = fake_session()
    run = _run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    places = _everything_decrypted(session, run)
    assert _leaks(places) == []
    stored = SessionMessage.objects.get(run=run, kind="assistant", entry_key="assistant-1").message
    assert json.loads(stored["tool_calls"][0]["function"]["arguments"]) == {"expression": "1+1 [REDACTED]"}


def test_loop8_a_delegated_task_with_the_key_is_redacted_in_the_sub_instances_record(fake_session, strict):
    task = json.dumps({"task": f"Use the key {FAKE_KEY} to check the balance."})
    replies = iter([chat_stream(tool_calls=[{"id": "del-1", "name": "delegate", "arguments": task}]),
                    chat_stream(["The sub-agent's answer."]), chat_stream(["All done."])])
    strict.handler = lambda request: next(replies)
    session = fake_session()
    run = _run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    sub_task = SessionMessage.objects.get(run=run, kind="user", in_main=False).message["content"]
    assert sub_task == "Use the key [REDACTED] to check the balance."
    assert _leaks(_everything_decrypted(session, run)) == []


def _checked_run(fake_session, strict, handler):
    """A run of a version that checks its answer before completing, against ``handler``."""
    strict.handler = handler
    session = fake_session()
    type(session.version).objects.filter(pk=session.version.pk).update(verify_before_complete=True)
    session.version.refresh_from_db()
    return _run(session), session


def test_loop8_a_completion_check_whose_reason_quotes_the_key_is_stored_redacted(fake_session, strict):
    def handler(request):
        if request.json["messages"][0]["content"].startswith("You check a candidate answer"):
            return chat_stream([f"VERIFIED\nThe answer used {FAKE_KEY} correctly."])
        return chat_stream(["The answer."])

    run, session = _checked_run(fake_session, strict, handler)
    assert run.counters["verification"] == {"status": "passed", "reason": "The answer used [REDACTED] correctly."}
    assert _leaks(_everything_decrypted(session, run)) == []


def test_loop8_a_completion_check_reason_cut_to_its_length_keeps_no_part_of_the_key(fake_session, strict):
    reason = "x" * 490 + f" {FAKE_KEY} and more"  # the 500-character cut falls inside the key

    def handler(request):
        if request.json["messages"][0]["content"].startswith("You check a candidate answer"):
            return chat_stream([f"NOT VERIFIED\n{reason}"])
        return chat_stream(["The answer."])

    run, session = _checked_run(fake_session, strict, handler)
    stored = run.counters["verification"]["reason"]
    assert stored.startswith("x" * 490 + " [REDACTED") and FAKE_KEY[:6] not in stored


def test_loop8_a_call_run_again_on_resume_stores_its_result_redacted(fake_session, strict):
    # The schema check names the unexpected argument in its error: here, the key itself.
    arguments = json.dumps({"expression": "1+1", FAKE_KEY.upper(): 1})
    strict.handler = lambda request: chat_stream(["Retried."])
    session = fake_session(tools=("calculator",))
    run = interrupted_after_calls(session, [("c1", "calculator", arguments)])
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    result = SessionMessage.objects.get(run=run, kind="tool_result").message
    assert result["status"] == "error" and "'[REDACTED]' was unexpected" in result["content"]
    assert FAKE_KEY.upper() not in json.dumps(result)
