"""Long lists stay under a statement's bound on parameters (PostgreSQL with server-side
binding carries at most 65,535 in one statement: core/db/postgresql; SQLite fewer).

A request of more distinct pieces than one statement may carry is still logged, and its
pieces found again; Django's own batches (a cascade deleting a space's runs, a bulk
update) are cut to fit.
"""
from __future__ import annotations

import pytest
from django.db import connection

from sessions.models import SentBlob
from sessions.services.model_calls import blobs_store

pytestmark = pytest.mark.django_db

PIECES = 20_000  # four parameters each: 80,000 in one INSERT would be refused, on either database
EVENTS = 14_000  # five parameters each: 70,000


def test_a_request_of_more_pieces_than_one_statement_carries_is_stored_and_found_again(alice, make_session):
    session = make_session(alice)
    pieces = [{"role": "user", "content": f"piece {number}"} for number in range(PIECES)]
    ids = blobs_store(session_id=session.pk, pieces=pieces)
    assert len(set(ids)) == PIECES and SentBlob.objects.filter(session=session).count() == PIECES
    assert blobs_store(session_id=session.pk, pieces=pieces) == ids  # every piece seen before, read back


def test_a_batch_of_more_events_than_one_statement_carries_is_stored_whole(alice, make_session):
    from sessions.models import RunEvent
    from sessions.services.events import events_write
    from sessions.services.questions import question_ask

    run = question_ask(session=make_session(alice), content="Many steps")
    events = [("tool_progress", {"step": number}) for number in range(EVENTS)]
    written = events_write(run_id=run.pk, events=events)
    assert [event.seq for event in written] == list(range(1, EVENTS + 1))
    stored = RunEvent.objects.filter(run=run).order_by("seq")
    assert stored.count() == EVENTS and stored.last().payload == {"step": EVENTS - 1}


@pytest.mark.usefixtures("require_postgres")
def test_djangos_batches_fit_a_statement():
    assert connection.ops.bulk_batch_size(["id"], [None] * 100_000) == 65_535
    assert connection.ops.bulk_batch_size(["pk", "pk", "status"], [None] * 100_000) == 21_845
    assert connection.ops.bulk_batch_size(["id"], [None] * 10) == 10
