"""What a question costs PostgreSQL in index writes (issue #29).

A step's UPDATE of its run (heartbeat, event seqs, counters) changes no indexed column, so
PostgreSQL rewrites the row in its own page without writing any of the table's indexes (a
HOT update), and the run table leaves room in its pages for it. The tables written at every
question have no index another one already covers: each was one more write per row.
"""
from __future__ import annotations

import pytest
from django.db import connection

from sessions.models import Instance, ModelCall, Run, RunEvent, SentBlob, Session, SessionMessage
from sessions.services.events import events_write
from sessions.services.ownership import run_touch
from sessions.services.questions import question_ask
from tests.sessions.helpers import claim

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("require_postgres")]

# Written at every question: a run, its main instance, its records, events and call log.
EVERY_QUESTION = (Session, Run, Instance, SessionMessage, RunEvent, ModelCall, SentBlob)


def _updates_of_runs() -> tuple[int, int]:
    """This transaction's updates of the run table so far: (all, HOT)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_tuples_updated(%s::regclass), "
                       "pg_stat_get_xact_tuples_hot_updated(%s::regclass)", [Run._meta.db_table] * 2)
        return cursor.fetchone()


def test_a_steps_writes_to_its_run_write_no_index(alice, make_session):
    run = claim(question_ask(session=make_session(alice), content="What is 6 × 7?"))
    updated, hot = _updates_of_runs()
    for step in range(3):
        run_touch(run=run, counters={"steps": step + 1}, events=2)  # a step's commit
        events_write(run_id=run.pk, events=[("tool_started", {"step": step})])  # an event of its own
    after_updated, after_hot = _updates_of_runs()
    assert after_updated - updated == 6
    assert after_hot - hot == 6, "a step's UPDATE of its run wrote the table's indexes (an indexed column changed)"


def test_the_run_table_leaves_room_in_its_pages_for_those_updates():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = %s::regclass", [Run._meta.db_table])
        options = cursor.fetchone()[0] or []
    assert "fillfactor=70" in options


def _indexes(table: str) -> list[tuple[str, list[str], bool]]:
    """The table's full (not partial) indexes, each with its columns in order and whether
    it is unique (a unique index is a constraint, never redundant)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.relname, array(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(num, pos) "
            "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.num ORDER BY k.pos), x.indisunique "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = %s::regclass AND x.indpred IS NULL", [table])
        return cursor.fetchall()


@pytest.mark.parametrize("model", EVERY_QUESTION, ids=lambda model: model.__name__)
def test_no_index_of_a_table_written_at_every_question_is_covered_by_another(model):
    indexes = _indexes(model._meta.db_table)
    covered = [(name, other) for name, columns, unique in indexes if not unique for other, longer, _ in indexes
               if other != name and len(longer) > len(columns) and longer[:len(columns)] == columns]
    assert covered == [], f"{model.__name__}: an index whose columns lead another index (name, covered by)"
    assert len(indexes) >= 2  # the primary key and at least one more: the query above reads them
