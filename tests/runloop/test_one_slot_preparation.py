"""CAT-11 with CTX-45: on a one-slot server, a summary prepared in the background yields
the server to a person's question waiting at the same time, and one that is no longer
wanted stops waiting. The strict fake on a real socket; the slot of "another call" is a
lease taken here, as another worker's would be."""
from __future__ import annotations

import threading

import pytest
from django.db import connections

from models_catalog.models import ModelConnection, ModelSlotWaiter
from models_catalog.slots import ACTION, BACKGROUND, slot_acquire
from runloop.loop import run_execute
from runloop.preparation import compaction_prepare
from sessions.models import PreparedCompaction, Run
from sessions.services.dispatch import preparation_dispatcher_set
from sessions.services.questions import question_ask
from tests.fakes.summaries import is_summary
from tests.runloop.test_prepared_compaction import ASKED, LONG, SMALL, SlowSummaries, ask
from tests.runloop.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued():
    """Preparations are queued, not run: the test runs each when it wants."""
    ids: list[int] = []
    preparation_dispatcher_set(ids.append)
    return ids


def _queued_preparation(session, queued: list[int]) -> int:
    for number in range(1, 13):
        ask(session, f"{ASKED} {number}. {LONG}")
        if queued:
            return queued[0]
    pytest.fail("the session never reached the prepare point")


def _in_thread(target, *args) -> threading.Thread:
    def run() -> None:
        try:
            target(*args)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.fixture
def one_slot_session(fake_session, strict, fake):
    provider = SlowSummaries()
    strict.handler = provider
    session = fake_session(**SMALL)
    ModelConnection.objects.filter(base_url=fake.base_url).update(concurrency=1, concurrency_source="manual")
    return session


def test_a_waiting_background_summary_yields_the_server_to_a_question_asked_after_it(one_slot_session, fake,
                                                                                      queued):
    prepared_id = _queued_preparation(one_slot_session, queued)
    busy = slot_acquire(base_url=fake.base_url, concurrency=1)  # another call is streaming
    assert busy is not None
    outcomes: list[str] = []
    summary = _in_thread(lambda: outcomes.append(compaction_prepare(prepared_id=prepared_id)))
    wait_for(lambda: ModelSlotWaiter.objects.filter(kind=BACKGROUND).exists(), timeout=60, interval=0.02)
    run = question_ask(session=one_slot_session, content="And the next question?")
    action = _in_thread(lambda: run_execute(run_id=run.pk))
    wait_for(lambda: ModelSlotWaiter.objects.filter(kind=ACTION).exists(), timeout=60, interval=0.02)
    asked_before = len(fake.requests)
    busy.release()
    action.join(timeout=120)
    summary.join(timeout=120)

    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
    after = [is_summary(request.json["messages"]) for request in fake.requests[asked_before:]]
    assert after and after[0] is False  # the question's call went first
    assert True in after and outcomes == ["ready"]  # and the summary was still made


def test_a_background_summary_discarded_while_it_waits_stops_waiting_and_asks_nothing(one_slot_session, fake,
                                                                                      queued):
    prepared_id = _queued_preparation(one_slot_session, queued)
    busy = slot_acquire(base_url=fake.base_url, concurrency=1)
    assert busy is not None
    outcomes: list[str] = []
    summary = _in_thread(lambda: outcomes.append(compaction_prepare(prepared_id=prepared_id)))
    wait_for(lambda: ModelSlotWaiter.objects.filter(kind=BACKGROUND).exists(), timeout=60, interval=0.02)
    asked_before = len(fake.requests)
    PreparedCompaction.objects.filter(pk=prepared_id).update(status=PreparedCompaction.Status.DISCARDED)
    summary.join(timeout=60)
    assert not summary.is_alive() and outcomes and outcomes[0] in ("failed", "discarded")
    assert len(fake.requests) == asked_before
    assert not ModelSlotWaiter.objects.exists()
    busy.release()
