"""Summary and verification calls honour the configured read time-out, like action calls.

Every model call of a run goes through one client-opening function with the run's limits
(``AGENTLOOM_PROVIDER_READ_TIMEOUT``; 0.4 s in this suite). A provider that starts an
answer and then goes silent must time out after that, not after the 120 s default.
"""
from __future__ import annotations

import time

import pytest

from runloop.compaction_manual import compaction_manual
from runloop.loop import run_execute
from sessions.models import ModelCall, Run
from sessions.services.manual_compaction import compaction_request
from sessions.services.pins import pin_set
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary

pytestmark = pytest.mark.django_db(transaction=True)

SILENCE = 40.0  # seconds between the first and the second chunk: a hundred times the read time-out
VERIFY_SYSTEM_START = "You check a candidate answer"


def _stalls(request) -> bool:
    first = request.json["messages"][0]["content"]
    return is_summary(request.json["messages"]) or first.startswith(VERIFY_SYSTEM_START)


def _handler(request):
    if _stalls(request):
        return chat_stream(["<summary>\n1. Started", " and then went silent"], delay=SILENCE)
    return chat_stream(["An answer to keep. " * 20])


def test_a_summary_call_that_goes_silent_times_out_after_the_configured_read_timeout(fake_session, strict):
    strict.handler = _handler
    # History above the target, under the trigger: only a manual compaction summarizes it.
    session = fake_session(tools=(), window=16_000, context_policy={"target_ratio": 0.05})
    for n in range(2):
        run = question_ask(session=session, content=f"Question {n}: tell me about the figures. " + "Detail. " * 120)
        run_execute(run_id=run.pk)
        assert run.__class__.objects.get(pk=run.pk).status == Run.Status.COMPLETED
    # The first question, pinned by default (CTX-50), would stay verbatim and leave this short
    # history nothing to summarize: the person unpins it.
    pin_set(session=session, seq=1, pinned=False, by=session.user_id)
    status, run = compaction_request(session=session)
    assert status == "queued"
    started = time.monotonic()
    assert compaction_manual(run_id=run.pk) == "not_compacted"
    elapsed = time.monotonic() - started
    summary = ModelCall.objects.filter(run=run, purpose="compaction").order_by("id")
    assert summary.exists() and {call.outcome for call in summary} == {"provider_unavailable"}
    assert elapsed < SILENCE  # 0.4 s per attempt, never the 120 s default
    assert strict.rejections == []


def test_a_verification_call_that_goes_silent_times_out_after_the_configured_read_timeout(fake_session, strict):
    strict.handler = _handler
    session = fake_session(tools=())
    type(session.version).objects.filter(pk=session.version.pk).update(verify_before_complete=True)
    session.version.refresh_from_db()
    run = question_ask(session=session, content="What are the figures?")
    started = time.monotonic()
    run_execute(run_id=run.pk)
    elapsed = time.monotonic() - started
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.counters["verification"] == {"status": "not_done",
                                            "reason": "the check could not run (provider_unavailable)"}
    assert ModelCall.objects.get(run=run, purpose="verification").outcome == "provider_unavailable"
    assert elapsed < SILENCE  # two attempts of 0.4 s, never the 120 s default
    assert strict.rejections == []
