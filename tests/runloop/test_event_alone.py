"""An event written outside any transaction (streamed text on its way) is one statement on
PostgreSQL (issue #29): its seq taken and its row inserted together, committed by itself,
then handed to the sinks, with the Stop flag the same statement read — what the
transaction of ``events_write`` does, in one round trip instead of four."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions.models import Run, RunEvent
from sessions.services import event_log as events_service  # the rows and their sinks
from sessions.services.events import event_emit
from sessions.services.questions import question_ask

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_event_alone_takes_the_next_seq_in_one_statement_and_reaches_the_sinks(alice, make_session, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (set DATABASE_URL=postgres://…; CI does)")
    run = question_ask(session=make_session(alice), content="Stream it")
    delivered: list[tuple[int, str]] = []
    monkeypatch.setattr(events_service, "sinks", [lambda event: delivered.append((event.seq, event.type))])
    flags: list[bool] = []
    event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    with CaptureQueriesContext(connection) as written:
        first = event_emit(run_id=run.pk, type="message_delta", data={"text": "Once"}, stop_flag=flags.append)
    assert len(written.captured_queries) == 1 and "BEGIN" not in written.captured_queries[0]["sql"].upper()
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)  # Stop pressed meanwhile
    second = event_emit(run_id=run.pk, type="message_delta", data={"text": " upon"}, stop_flag=flags.append)
    assert (first.seq, second.seq) == (2, 3) and flags == [False, True]
    assert list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", "type", "payload")) == [
        (1, "run_started", {"attempt": 0}), (2, "message_delta", {"text": "Once"}),
        (3, "message_delta", {"text": " upon"})]
    assert Run.objects.get(pk=run.pk).event_seq == 3
    assert delivered == [(1, "run_started"), (2, "message_delta"), (3, "message_delta")]
    with pytest.raises(Run.DoesNotExist):
        event_emit(run_id=run.pk + 1000, type="message_delta", data={"text": "nowhere"})
    assert not RunEvent.objects.filter(run_id=run.pk + 1000).exists()
