"""The rows every question writes and reads, without Django composing their statements
(core/db_rows.py, issue #29), on either database. ``rows_insert`` writes what ``save``
would: every column as ``save`` prepares it (encrypted, JSON, ``auto_now_add``), each object
given its own primary key, a batch past a statement's bound on parameters written whole.
``models_from_row`` reads what ``select_related`` would: the same objects, fields decrypted
and parsed, and None where an outer join found nothing."""
from __future__ import annotations

import pytest
from django.db import connection

from core.db_rows import rows_insert
from sessions.models import Instance, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from sessions.services.runs import run_claim

pytestmark = pytest.mark.django_db


def _columns(model, pk) -> dict:
    return {field.attname: getattr(model.objects.get(pk=pk), field.attname) for field in model._meta.concrete_fields
            if field.attname not in ("id", "created_at")}


def test_a_row_reads_back_as_the_same_row_saved_by_django(alice, make_session):
    session = make_session(alice)
    saved = Run.objects.create(session=session, version=session.version, budget={"max_model_calls": 7},
                               counters={"model_calls": 2}, inherited_watermark=3)
    fast = Run(session=session, version=session.version, budget={"max_model_calls": 7}, counters={"model_calls": 2},
               inherited_watermark=3, status=Run.Status.CANCELLED)
    rows_insert([fast])
    assert fast.pk is not None and fast.pk != saved.pk and not fast._state.adding
    assert fast.created_at is not None  # auto_now_add, as save stamps it
    Run.objects.filter(pk=saved.pk).update(status=Run.Status.CANCELLED)
    assert _columns(Run, fast.pk) == _columns(Run, saved.pk)
    with connection.cursor() as cursor:  # the counters are stored encrypted, as save stores them
        cursor.execute(f'SELECT "counters" FROM "{Run._meta.db_table}" WHERE "id" = %s', [fast.pk])
        assert b"model_calls" not in bytes(cursor.fetchone()[0])


def test_more_rows_than_one_statement_carries_each_get_their_own_key(alice, make_session):
    session = make_session(alice)
    run = Run.objects.create(session=session, version=session.version)
    main = Instance.objects.create(run=run, key=Instance.MAIN)
    rows = [SessionMessage(session=session, seq=seq, run=run, instance=main, kind="user", entry_key=f"q-{seq}",
                           message={"role": "user", "content": f"question {seq}"}) for seq in range(1, 2_001)]
    rows_insert(rows)
    stored = dict(SessionMessage.objects.filter(session=session).values_list("pk", "seq"))
    assert len(stored) == 2_000 and {row.pk: row.seq for row in rows} == stored
    assert SessionMessage.objects.get(pk=rows[-1].pk).message == {"role": "user", "content": "question 2000"}


def _fields(obj) -> dict:
    return {field.attname: getattr(obj, field.attname) for field in type(obj)._meta.concrete_fields}


@pytest.mark.parametrize("with_connection", [True, False])
def test_a_claimed_run_reads_as_djangos_select_related_read(alice, make_session, with_connection):
    session = make_session(alice)
    if not with_connection:  # a version whose connection was deleted (SET_NULL)
        type(session.version).objects.filter(pk=session.version_id).update(model_connection=None)
    run = run_claim(run_id=question_ask(session=session, content="Compare me").pk)
    django = Run.objects.select_related("session", "version", "version__model_connection").get(pk=run.pk)
    assert _fields(run) == _fields(django) and _fields(run.session) == _fields(django.session)
    assert _fields(run.version) == _fields(django.version)
    if with_connection:
        assert _fields(run.version.model_connection) == _fields(django.version.model_connection)
        assert run.version.model_connection.api_key == django.version.model_connection.api_key  # decrypted
    else:
        assert run.version.model_connection is None
    assert not run._state.adding and run.session.title == "Compare me"  # an encrypted field, read back
    main = Instance.objects.get(run=run, key=Instance.MAIN)  # the loop's first read, made with the claim
    assert _fields(run.main_as_claimed) == _fields(main) and run.main_as_claimed.run is run
    # The claim wrote the attempt's run_started with it; a second claim takes nothing, writes nothing.
    assert run_claim(run_id=run.pk) is None
    assert list(RunEvent.objects.filter(run=run).values_list("seq", "type", "payload")) == [
        (1, "run_started", {"attempt": 0})]


def test_a_session_read_for_its_creator_is_djangos_read_and_nobody_elses(alice, bob, space, make_session):
    from core.errors import NotFound
    from core.spaces.models import Membership
    from sessions.selectors.sessions import session_get_for_user, session_list_for_user

    session = make_session(alice, title="Alice's plans")
    read = session_get_for_user(session_id=session.pk, user=alice)
    django = session_list_for_user(user=alice).get(pk=session.pk)
    assert _fields(read) == _fields(django) and read.title == "Alice's plans"  # encrypted, read back
    assert _fields(read.agent) == _fields(django.agent) and _fields(read.version) == _fields(django.version)
    assert not read._state.adding
    bobs = make_session(bob)
    for user, session_id in ((bob, session.pk), (alice, bobs.pk), (alice, 0), (alice, 2**63), (alice, "x")):
        with pytest.raises(NotFound):  # not the creator, not an id, past any id: 404 alike
            session_get_for_user(session_id=session_id, user=user)
    Membership.objects.filter(space=space, user=alice).delete()  # RUN-11: leaving the space closes it
    with pytest.raises(NotFound):
        session_get_for_user(session_id=session.pk, user=alice)
