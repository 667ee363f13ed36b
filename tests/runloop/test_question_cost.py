"""A question costs a fixed, small number of statements, however long the session (issue #29).

Under load every statement is CPU twice over (Django composing it, PostgreSQL planning
it), so the path every question takes is counted: asking it (the question service) and
answering it (the worker's whole run, claim to ``run_finished``), on whichever database
the suite runs on. Statements are SQL that reads or writes rows; SAVEPOINT/RELEASE and
each transaction's BEGIN and COMMIT are not counted (see ``test_step_cost``).

The 12th question of a session costs what the 2nd did: nothing per question reads the
session's history beyond what the model is sent.
"""
from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from runloop.loop import run_execute
from sessions.models import Run
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.runloop.test_step_cost import SAVEPOINTS, TRANSACTIONS, _starts

pytestmark = pytest.mark.django_db(transaction=True)

# Was 18: two COUNTs, an instance inserted then read back and updated, a de-duplicating
# read of a run's first record, two UPDATEs of the session; then 12: its creator's
# membership and a manual compaction's hold read apart; then 11: what the run carries over
# from the session's main line (last seq, counts, best view, last frame) read apart.
ASK_STATEMENTS = 8
# Was 38: a scan for runs to reap, the claim read twice and checked apart, three EXISTS
# about the session apart (and every question read for files), a Stop check beside the
# beat, a first attempt's main line searched for steps and calls, the main instance read
# twice at the end; then 28: the run's status record appended through a locking,
# de-duplicating read of what its transition already makes new; then 26: the claimed run's
# model connection read apart; then 25: a heartbeat at the first token, right after the
# claim had written one; then 24: a first attempt's new main instance searched for a
# compaction snapshot before this execution could have made one; then 23: the main
# instance read at the end, then its step count saved apart. Then 24 on purpose: the
# first words of an answer streamed in pieces are written as soon as more follow (their
# seqs and their row), not with the next flush 0.15 s later (time to first token); then
# 23: the main instance read apart from the claim; then 22: the seq of run_started taken
# apart from the claim (and its commit, too). On PostgreSQL that was 21 until the claim
# locked its person's row first (issue #44: one person's running runs are bounded, and
# claims of one person take turns); SQLite's transactions serialize claims without it.
RUN_STATEMENTS = 22


def _statements(queries: list[dict]) -> list[str]:
    return [q["sql"] for q in queries if not _starts(q, SAVEPOINTS) and not _starts(q, TRANSACTIONS)]


def _question(session, number: int) -> tuple[list[str], list[str]]:
    database = connections["default"]
    with CaptureQueriesContext(database) as asked:
        run = question_ask(session=session, content=f"Question {number}")
    with CaptureQueriesContext(database) as answered:
        run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    return _statements(asked.captured_queries), _statements(answered.captured_queries)


def test_a_question_and_its_answer_cost_a_few_statements_the_same_late_in_a_session(fake_session, strict):
    strict.handler = lambda request: chat_stream(["An ", "answer."], usage={"prompt_tokens": 20,
                                                                             "completion_tokens": 2})
    session = fake_session()
    _question(session, 1)  # the first question makes the session's first view
    ask, run = _question(session, 2)
    assert len(ask) <= ASK_STATEMENTS, "\n".join(s[:100] for s in ask)
    assert len(run) <= RUN_STATEMENTS, "\n".join(s[:100] for s in run)
    for number in range(3, 12):
        _question(session, number)
    late_ask, late_run = _question(session, 12)
    assert (len(late_ask), len(late_run)) == (len(ask), len(run))


def test_a_runs_first_call_stores_only_what_the_session_had_not_logged(fake_session, strict):
    """The first call of a run sends the session's history, which earlier runs logged: its
    log inserts only the new pieces (the question), however long the session (issue #29:
    it encrypted every piece for an INSERT that skipped all but one)."""
    strict.handler = lambda request: chat_stream(["An ", "answer."], usage={"prompt_tokens": 20,
                                                                             "completion_tokens": 2})
    session = fake_session()
    for number in range(1, 12):
        _question(session, number)
    run = question_ask(session=session, content="Question 12")
    with CaptureQueriesContext(connections["default"]) as answered:
        run_execute(run_id=run.pk)
    blobs = 'INSERT INTO "agent_sessions_sentblob"'
    inserts = [q["sql"] for q in answered.captured_queries if q["sql"].startswith(blobs)]
    assert len(inserts) == 1
    rows = inserts[0].split(" VALUES ", 1)[1].split(" ON CONFLICT", 1)[0].count("), (") + 1
    assert rows == 1, inserts[0][:300]
