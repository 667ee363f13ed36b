"""The data model of SPEC §2: constraints, immutability, append-only records."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from agents.models import AgentVersion, ImmutableVersionError
from core.errors import ActiveRunConflict, ValidationFailed
from sessions.models import Instance, Run, SessionMessage
from sessions.services.records import NewRecord, record_append, records_append
from sessions.services.runs import run_create

pytestmark = pytest.mark.django_db


def test_a_published_version_refuses_to_change(version):
    version.instructions = "Something else entirely."
    with pytest.raises(ImmutableVersionError):
        version.save()
    version.refresh_from_db()
    assert version.instructions == "Be brief."


def test_saving_an_unchanged_version_is_harmless(version):
    version.save()
    assert AgentVersion.objects.get(pk=version.pk).version == 1


def test_publishing_twice_numbers_versions_and_freezes_the_policy(agent, version):
    from agents.services import agent_publish

    agent.instructions = "Be thorough."
    agent.save()
    second = agent_publish(agent=agent)
    assert (version.version, second.version) == (1, 2)
    assert second.instructions == "Be thorough."
    assert AgentVersion.objects.get(pk=version.pk).instructions == "Be brief."
    assert second.context_policy["context_ratio"] == 0.8


def test_run1_a_second_active_run_is_refused(make_session, alice):
    session = make_session(alice)
    first = run_create(session=session)
    with pytest.raises(ActiveRunConflict):
        run_create(session=session)
    assert Run.objects.filter(session=session).count() == 1
    assert Instance.objects.filter(run=first, key="main").exists()


def test_run1_the_database_itself_refuses_two_active_runs(make_session, alice):
    session = make_session(alice)
    run_create(session=session)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(session=session, version=session.version, status=Run.Status.RUNNING)


def test_run1_a_finished_run_lets_the_next_question_in(make_session, alice):
    session = make_session(alice)
    first = run_create(session=session)
    Run.objects.filter(pk=first.pk).update(status=Run.Status.COMPLETED)
    second = run_create(session=session)
    assert second.status == Run.Status.QUEUED


def test_records_get_increasing_seqs_and_a_duplicate_entry_key_inserts_nothing(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)
    main = run.instances.get()
    first = record_append(session=session, run=run, instance=main, kind="user",
                          message={"role": "user", "content": "Hi"}, entry_key="q")
    again = record_append(session=session, run=run, instance=main, kind="user",
                          message={"role": "user", "content": "Hi"}, entry_key="q")
    rows = records_append(session=session, run=run, instance=main, records=[
        NewRecord("assistant", {"role": "assistant", "content": "Hello"}, "a1"),
        NewRecord("assistant", {"role": "assistant", "content": "Hello"}, "a1"),
        NewRecord("run_status", {"status": "completed"}, "end"),
    ])
    assert first.seq == 1 and again is None
    assert [r.seq for r in rows] == [2, 3]
    assert list(SessionMessage.objects.filter(session=session).values_list("seq", "kind")) == [
        (1, "user"), (2, "assistant"), (3, "run_status")
    ]
    session.refresh_from_db()
    assert session.last_seq == 3


def test_a_record_must_be_plain_json(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)
    with pytest.raises(ValidationFailed):
        record_append(session=session, run=run, instance=run.instances.get(), kind="user",
                      message={"content": {1, 2}}, entry_key="bad")
    with pytest.raises(ValidationFailed):
        record_append(session=session, run=run, instance=run.instances.get(), kind="gossip",
                      message={"content": "x"}, entry_key="bad-kind")
    assert not SessionMessage.objects.exists()
