"""RUN-6 / CTX-4: a resumed run reads as reopened — what its model receives says each thing once.

The records are left as a worker killed after saving an assistant step leaves them (the
step's calls saved, no results, the reaper's ``interrupted`` status), using the real
services; then the run is resumed and driven by the real loop against the strict fake.
"""
from __future__ import annotations

import json

import pytest

from runloop.loop import run_execute
from sessions.models import Run, SessionMessage
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import chat_stream
from tests.sessions.helpers import interrupted_after_calls

pytestmark = pytest.mark.django_db(transaction=True)
# Every scenario runs on both wires: OpenAI-style chat completions and Anthropic\'s Messages API (CAT-7).
DIALECTS = ("openai", "anthropic")


def _resume(run) -> Run:
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _texts(request) -> list[str]:
    return [json.dumps(m.get("content")) for m in request.json["messages"]]


def test_run6_an_idempotent_call_run_again_on_resume_is_the_calls_result_and_nothing_else(fake_session, fake, strict):
    strict.handler = lambda request: chat_stream(["17 × 23 is 391."])
    session = fake_session(tools=("calculator",))
    run = _resume(interrupted_after_calls(session, [("c1", "calculator", '{"expression": "17*23"}')]))
    assert run.status == Run.Status.COMPLETED, run.error
    texts = _texts(fake.requests[-1])
    assert sum("391" in t for t in texts) == 1  # the re-run result, once, as the call's result
    assert not any("late tool result" in t or "unknown outcome" in t or "may or may not" in t for t in texts)
    assert [m["role"] for m in fake.requests[-1].json["messages"]] == ["system", "user", "assistant", "tool"]
    assert strict.rejections == []


def test_run6_a_call_that_may_not_be_repeated_is_said_unknown_once(fake_session, fake, strict):
    strict.handler = lambda request: chat_stream(["I cannot tell if it went through."])
    session = fake_session(tools=("delegate",))
    run = _resume(interrupted_after_calls(session, [("d1", "delegate", '{"task": "pay the invoice"}')]))
    assert run.status == Run.Status.COMPLETED, run.error
    texts = _texts(fake.requests[-1])
    assert sum("unknown outcome" in t or "may or may not" in t for t in texts) == 1
    assert not any("late tool result" in t for t in texts)
    assert SessionMessage.objects.filter(run=run, kind="run_status", entry_key="resumed-1").count() == 1
    assert strict.rejections == []
