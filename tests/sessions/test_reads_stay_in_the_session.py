"""What every question reads about its session reads that session's rows, not the table's
(issue #29). The ask's carry-over (``main_line_carried``) ordered every main instance of
every session to find the session's latest frame, and a run's traits (``session_traits``)
scanned every model call of every session, whenever PostgreSQL's statistics lagged — as
they do while tables grow, and for plans prepared early — so a question cost more with
each question anyone had asked (the traits now read no call at all: where a session's
calls went is on its row, ``Session.action_model``). Checked with PostgreSQL's own count of the rows each
scan returned, in a database where other sessions hold thousands of runs."""
from __future__ import annotations

import json

import pytest
from django.db import connection

from sessions.models import Instance, ModelCall, Run, Session
from sessions.selectors.sessions import session_traits
from sessions.services.model_calls import session_action_model_note
from sessions.services.questions import main_line_carried, question_ask

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("require_postgres")]

OTHERS = 2_000


def _scanned(sql: str, params: list) -> dict[str, int]:
    """Rows each table's scans returned when ``sql`` ran, from EXPLAIN ANALYZE."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    rows: dict[str, int] = {}

    def walk(node: dict) -> None:
        if "Relation Name" in node:
            rows[node["Relation Name"]] = rows.get(node["Relation Name"], 0) + int(
                node["Actual Rows"] * node.get("Actual Loops", 1))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return rows


@pytest.fixture
def crowded(alice, bob, make_session):
    """Bob's busy session: OTHERS runs, each with its main instance and a model call."""
    busy = make_session(bob)
    runs = Run.objects.bulk_create([Run(session=busy, version=busy.version, status=Run.Status.COMPLETED)
                                    for _ in range(OTHERS)])
    instances = Instance.objects.bulk_create([Instance(run=run, key=Instance.MAIN) for run in runs])
    ModelCall.objects.bulk_create([ModelCall(run=run, instance=instance, provider="openai", model="gpt-4o",
                                             estimator_id="o200k") for run, instance in zip(runs, instances)])
    return make_session(alice)


def test_the_carry_over_of_a_new_question_reads_only_its_sessions_instances(crowded, settings):
    session = crowded
    question_ask(session=session, content="First")
    settings.DEBUG = True  # the statement as sent, for EXPLAIN
    connection.queries_log.clear()
    main_line_carried(session_id=session.pk)
    rows = _scanned(connection.queries[-1]["sql"], [])
    assert rows.get("agent_sessions_instance", 0) <= 1, rows
    assert rows.get("agent_sessions_run", 0) <= 1, rows


def test_a_runs_traits_read_only_its_sessions_model_calls(crowded, settings):
    session = crowded
    question_ask(session=session, content="First")
    settings.DEBUG = True
    connection.queries_log.clear()
    traits = session_traits(session_id=session.pk, provider="anthropic", model="claude")
    rows = _scanned(connection.queries[-1]["sql"], [])
    assert traits.other_models is False
    assert rows.get("agent_sessions_modelcall", 0) == 0, rows  # its session has none, and Bob's are not read
    assert rows.get("agent_sessions_session", 0) == 1, rows


def test_a_runs_traits_read_no_call_once_its_session_noted_where_they_went(crowded, settings):
    busy = Session.objects.exclude(pk=crowded.pk).get()  # Bob's: 2,000 calls, all to one model
    session_action_model_note(session_id=busy.pk, provider="openai", model="gpt-4o")
    settings.DEBUG = True
    connection.queries_log.clear()
    traits = session_traits(session_id=busy.pk, provider="anthropic", model="claude")
    rows = _scanned(connection.queries[-1]["sql"], [])
    assert traits.other_models is True
    assert rows.get("agent_sessions_modelcall", 0) == 0, rows
