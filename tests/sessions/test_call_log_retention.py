"""Retention (per agent): old copies of what model calls received are dropped; records stay."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from models_catalog.providers.chat_http import body_bytes
from runloop.loop import run_execute
from sessions.models import ModelCall, Run, SentBlob, SessionMessage
from sessions.selectors.model_calls import model_call_body, model_call_entries
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.runloop.conftest import fake, fake_agent_factory, fake_session, strict  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_copies_older_than_the_agents_retention_are_dropped_and_the_records_stay(fake_session, strict, fake):
    strict.handler = lambda request: chat_stream(["VERIFIED\nFine. " * 20])
    session = fake_session(tools=())
    version = type(session.version).objects.filter(pk=session.version_id)
    version.update(verify_before_complete=True)  # the old run's check sends a prompt only it used
    session.version.refresh_from_db()
    old = question_ask(session=session, content="An old question. " * 30)
    run_execute(run_id=old.pk)
    version.update(verify_before_complete=False)
    session.version.refresh_from_db()
    new = question_ask(session=session, content="A new question.")
    run_execute(run_id=new.pk)
    assert Run.objects.filter(session=session, status=Run.Status.COMPLETED).count() == 2
    records_before = list(SessionMessage.objects.filter(session=session).values_list("seq", "kind"))
    blobs_before = SentBlob.objects.filter(session=session).count()
    ModelCall.objects.filter(run=old).update(created_at=timezone.now() - timedelta(days=10))
    type(session.agent).objects.filter(pk=session.agent_id).update(call_log_retention_days=7)

    call_command("prune_call_logs", verbosity=0)

    old_call = ModelCall.objects.get(run=old, purpose="action")
    assert model_call_entries(call=old_call) == [] and old_call.request.get("pruned") is True
    assert old_call.estimated_tokens > 0 and old_call.outcome == "ok"  # the call's figures stay on the row
    new_call = ModelCall.objects.get(run=new)
    assert body_bytes(model_call_body(call=new_call)) == fake.requests[-1].body  # still exact
    assert list(SessionMessage.objects.filter(session=session).values_list("seq", "kind")) == records_before
    # Pieces only the old call used are gone; exactly the ones the new call refers to are kept.
    referenced = set(new_call.request["add"]) | set(new_call.request["blobs"].values())
    assert set(SentBlob.objects.filter(session=session).values_list("pk", flat=True)) == referenced
    assert blobs_before > len(referenced)


def test_without_a_retention_nothing_is_dropped(fake_session, strict):
    strict.handler = lambda request: chat_stream(["Fine."])
    session = fake_session(tools=())
    run = question_ask(session=session, content="Keep me.")
    run_execute(run_id=run.pk)
    ModelCall.objects.update(created_at=timezone.now() - timedelta(days=999))
    call_command("prune_call_logs", verbosity=0)
    assert all(not call.request.get("pruned") for call in ModelCall.objects.all())


def test_the_reaper_lease_holder_prunes_past_retention_at_most_once_an_hour(fake_session, strict):
    from runloop.housekeeping import PRUNE_CALL_LOGS_EVERY, Housekeeper

    strict.handler = lambda request: chat_stream(["Fine."])
    session = fake_session(tools=())
    type(session.agent).objects.filter(pk=session.agent_id).update(call_log_retention_days=7)
    long_ago = timezone.now() - timedelta(days=30)

    def old_run() -> ModelCall:
        run = question_ask(session=session, content="Old news.")
        run_execute(run_id=run.pk)
        ModelCall.objects.filter(run=run).update(created_at=long_ago)
        return ModelCall.objects.get(run=run)

    first = old_run()
    keeper = Housekeeper(name="housekeeping-test:1")
    keeper.tick(first=True)  # the first worker takes the lease
    first.refresh_from_db()
    assert first.request == {"v": 2, "pruned": True} and first.pruned_at is not None

    second = old_run()
    keeper.tick()  # within the hour: not again
    second.refresh_from_db()
    assert second.pruned_at is None and model_call_entries(call=second) != []

    keeper._pruned_at -= PRUNE_CALL_LOGS_EVERY
    keeper.tick()
    second.refresh_from_db()
    assert second.pruned_at is not None and model_call_entries(call=second) == []
