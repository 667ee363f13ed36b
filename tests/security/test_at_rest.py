"""User and model text is encrypted at rest wherever it is stored (SPEC §11): session
titles and run counters (a completion check's reason is the model's words) included; the
console neither shows nor searches a title without an audited read. Existing rows are
carried over by the migration. (API tokens: ``test_tokens.py``; the data files:
``tests/foundation/test_run_command.py``.)"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from sessions.models import Run, Session
from sessions.services.questions import question_ask

pytestmark = pytest.mark.django_db

QUESTION = "Draft my resignation letter to Globex"


def _raw(table: str, column: str, pk: int) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "{column}" FROM "{table}" WHERE id = %s', [pk])  # noqa: S608 - fixed names
        value = cursor.fetchone()[0]
    return bytes(value) if isinstance(value, (bytes, memoryview)) else str(value).encode()


def test_a_sessions_title_is_stored_encrypted_and_read_back_by_its_owner(alice, make_session):
    session = make_session(alice)
    question_ask(session=session, content=QUESTION)
    assert b"Globex" not in _raw("agent_sessions_session", "title", session.pk)
    session.refresh_from_db()
    assert session.title == QUESTION
    browser = Client()
    browser.force_login(alice)
    assert QUESTION in browser.get(f"/sessions/{session.pk}/").content.decode()


def test_a_runs_counters_are_stored_encrypted(alice, make_session):
    run = question_ask(session=make_session(alice), content="Hello")
    Run.objects.filter(pk=run.pk).update(counters={"model_calls": 2, "verification": {
        "status": "failed", "reason": "The answer omits the Globex clause"}})
    assert b"Globex" not in _raw("agent_sessions_run", "counters", run.pk)
    run.refresh_from_db()
    assert run.counters["verification"]["reason"] == "The answer omits the Globex clause"


def test_the_console_neither_shows_nor_searches_titles_nor_shows_a_verification_reason(alice, make_session,
                                                                                      django_user_model):
    session = make_session(alice)
    run = question_ask(session=session, content=QUESTION)
    Run.objects.filter(pk=run.pk).update(counters={"model_calls": 1, "verification": {
        "status": "failed", "reason": "The answer omits the Globex clause"}})
    root = django_user_model.objects.create_superuser(username="root", password="root-password-1")
    console = Client()
    console.force_login(root)
    for url in ("/admin/agent_sessions/session/",
                "/admin/agent_sessions/run/", f"/admin/agent_sessions/run/{run.pk}/change/",
                "/admin/agent_sessions/sessionmessage/"):
        page = console.get(url)
        assert page.status_code == 200, url
        assert "Globex" not in page.content.decode(), url
    # The session's page shows no title; its runs' questions are shown there, audited
    # (tests/admin_console/test_session_questions.py).
    page = console.get(f"/admin/agent_sessions/session/{session.pk}/change/").content.decode()
    assert "field-title" not in page and "Title:" not in page
    for url in ("/admin/agent_sessions/session/?q=Globex", "/admin/agent_sessions/run/?q=Globex"):
        assert "0 results" in console.get(url).content.decode(), url  # a title is not a search key
    assert "failed" in console.get(f"/admin/agent_sessions/run/{run.pk}/change/").content.decode()
    # Editing the session in the console cannot change the title either.
    console.post(f"/admin/agent_sessions/session/{session.pk}/change/", {"title": "Renamed"})
    session.refresh_from_db()
    assert session.title == QUESTION


@pytest.mark.django_db(transaction=True)
def test_titles_and_counters_stored_in_clear_by_an_earlier_version_are_encrypted_by_the_migration(alice,
                                                                                               make_session):
    from django.db.migrations.executor import MigrationExecutor

    run = question_ask(session=make_session(alice), content="placeholder")
    executor = MigrationExecutor(connection)
    executor.migrate([("agent_sessions", "0005_model_call_pruned_at")])
    with connection.cursor() as cursor:  # rows as the earlier version wrote them
        cursor.execute("UPDATE agent_sessions_session SET title = %s", [QUESTION])
        cursor.execute("UPDATE agent_sessions_run SET counters = %s",
                       ['{"model_calls": 3, "verification": {"status": "passed", "reason": "Globex is named"}}'])
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # every app: going back took the apps built on it back too
    session = Session.objects.get()
    assert session.title == QUESTION
    assert Run.objects.get(pk=run.pk).counters == {"model_calls": 3,
                                                   "verification": {"status": "passed", "reason": "Globex is named"}}
    assert b"Globex" not in _raw("agent_sessions_session", "title", session.pk)
    assert b"Globex" not in _raw("agent_sessions_run", "counters", run.pk)
