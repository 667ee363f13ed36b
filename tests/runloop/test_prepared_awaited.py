"""CTX-45 when a conversation outgrows the summary being prepared for it: a request that
no longer fits waits for the summary a worker is making, and commits it, instead of
paying for another inline (which threw the one being made away: one prepared summary in
five was used in a chat where the person asked faster than the summaries were made).
"""
from __future__ import annotations

import threading

import pytest
from django.db import connections

from runloop.loop import run_execute
from sessions.models import ModelCall, PreparedCompaction, Run, RunEvent
from sessions.services.questions import question_ask
from tests.runloop.test_prepared_compaction import ASKED, LONG, SMALL, SlowSummaries, ask, compactions, preparations
from tests.runloop.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["preparations"]  # the fixture, used by name


def _awaited(run: Run) -> bool:
    return any(event.payload.get("prepared_awaited") for event in  # the payload is encrypted: read, not queried
               RunEvent.objects.filter(run=run, type="compaction_started"))


def _in_thread(run: Run) -> threading.Thread:
    def work() -> None:
        try:
            run_execute(run_id=run.pk)
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def provider(strict, preparations):
    """Summaries wait until the test opens the gate (opened at the end whatever happened,
    so that the preparation's worker thread ends)."""
    slow = SlowSummaries()
    strict.handler = slow
    slow.gate.clear()
    yield slow
    slow.gate.set()


def _outgrown(session, provider) -> tuple[Run, threading.Thread]:
    """Ask until a summary is being prepared, then on (each request sent as it is, while it
    fits) until a run waits for that summary: that run and its thread."""
    number = 1
    while not PreparedCompaction.objects.filter(session=session).exists():
        ask(session, f"{ASKED} {number}. {LONG}")
        number += 1
        assert number < 14, "the session never reached the prepare point"
    wait_for(provider.summaries_started.is_set, timeout=60)  # a worker took it and asked the model
    for asked in range(number, number + 10):
        run = question_ask(session=session, content=f"{ASKED} {asked}. {LONG * 2}")
        thread = _in_thread(run)
        wait_for(lambda run=run, thread=thread: _awaited(run) or not thread.is_alive(), timeout=60)
        if _awaited(run):
            return run, thread
        thread.join(timeout=30)
    pytest.fail("the conversation never outgrew the request's room")


def test_a_request_that_no_longer_fits_waits_for_the_summary_being_prepared_and_commits_it(
        fake_session, strict, provider):
    session = fake_session(**SMALL)
    run, thread = _outgrown(session, provider)
    summaries = provider.summary_requests
    assert not compactions(session)  # nothing was summarized inline meanwhile
    provider.gate.set()  # the summary being prepared is finished
    thread.join(timeout=60)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error

    [snapshot] = compactions(session)
    assert snapshot.metrics["prepared"] is True and snapshot.metrics["prepared_awaited_ms"] >= 0
    assert provider.summary_requests == summaries  # no second summary was paid for
    assert not ModelCall.objects.filter(run=run, purpose=ModelCall.Purpose.COMPACTION).exists()
    [prepared] = PreparedCompaction.objects.filter(session=session)
    assert (prepared.status, prepared.reason) == ("used", "committed")
    assert strict.rejections == []


def test_a_stop_while_the_run_waits_for_the_summary_being_prepared_ends_the_wait(fake_session, provider):
    from sessions.services.run_controls import run_cancel

    session = fake_session(**SMALL)
    run, thread = _outgrown(session, provider)
    run_cancel(run=run)
    thread.join(timeout=30)
    assert not thread.is_alive()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert not compactions(session)
