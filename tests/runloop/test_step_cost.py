"""A step costs O(new): few round trips to the database, the same late in a session as early.

Counted between two requests to the model, on whichever database the suite runs on (both
log every statement, SAVEPOINT and RELEASE, and each transaction's BEGIN and COMMIT):

- statements: SQL that reads or writes rows;
- round trips: the statements plus SAVEPOINT/RELEASE — issue #25 counted 18 on PostgreSQL,
  6 of them savepoints from nested atomic blocks; each transaction's BEGIN and COMMIT are
  counted apart, as transactions.

The targets are the issue's: at most 12 round trips for a step that makes one tool call, at
most 8 for a step that answers, no growth with the length of the session — and the rule
they must not cost: every step is committed before the next model call starts (LOOP-1).
"""
from __future__ import annotations

import json

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from runloop.loop import run_execute
from sessions.models import Run, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_STEPS = 24
SAVEPOINTS = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")
TRANSACTIONS = ("BEGIN", "COMMIT", "ROLLBACK")  # BEGIN IMMEDIATE on SQLite


def _starts(query: dict, words: tuple[str, ...]) -> bool:
    return query["sql"].lstrip().upper().startswith(words)


def _cost(queries: list[dict]) -> dict[str, int]:
    savepoints = sum(1 for q in queries if _starts(q, SAVEPOINTS))
    control = sum(1 for q in queries if _starts(q, TRANSACTIONS) and not _starts(q, SAVEPOINTS))
    statements = len(queries) - savepoints - control
    return {"statements": statements, "round_trips": statements + savepoints, "savepoints": savepoints,
            "commits": sum(1 for q in queries if _starts(q, ("COMMIT",)))}


def test_a_tool_step_and_an_answer_step_cost_a_few_round_trips_however_long_the_run(fake_session, strict):
    database = connections["default"]  # this thread's connection: the loop runs here
    marks: list[int] = []
    unsaved: list[str] = []

    def handler(request):
        marks.append(len(database.queries_log))
        done = sum(1 for m in request.json["messages"] if m["role"] == "tool")
        # LOOP-1: what the steps before this call wrote is committed — another connection
        # (this server thread's) sees every answer and every result already.
        try:
            saved = SessionMessage.objects.filter(session=session, kind__in=("assistant", "tool_result")).count()
        finally:
            connections.close_all()
        if saved != 2 * done:
            unsaved.append(f"call {len(marks)}: {saved} records visible, {2 * done} sent")
        if done < TOOL_STEPS:  # no text: a slow stream's text is flushed on its own, by the clock
            return chat_stream(tool_calls=[{"id": f"c{done}", "name": "calculator",
                                            "arguments": json.dumps({"expression": f"{done}+1"})}])
        return chat_stream(["All done."])

    strict.handler = handler
    session = fake_session(tools=("calculator",), limits={"max_model_calls": 100, "max_tool_calls": 100})
    run = question_ask(session=session, content="Add one, many times.")
    with CaptureQueriesContext(database):
        database.queries_log.clear()
        run_execute(run_id=run.pk)
        queries = list(database.queries_log)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert unsaved == []
    # A step: from the model's answer to the next request (saving it, announcing its tool,
    # running it, saving the result, preparing the next request).
    steps = [queries[a:b] for a, b in zip(marks, marks[1:])]
    costs = [_cost(step) for step in steps]
    assert len(steps) == TOOL_STEPS
    tool_steps = costs[1:]
    assert all(cost["savepoints"] == 0 for cost in tool_steps), [  # nested atomic blocks: 2 round trips each
        q["sql"][:80] for q in steps[1] if _starts(q, SAVEPOINTS)]
    assert max(cost["round_trips"] for cost in tool_steps) <= 12, tool_steps
    # At most three commits — the answer (before its tool is announced), the announcement
    # (Stop read fresh), the result (before the next call): one more is a BEGIN and a
    # COMMIT more. That each came before the next call is what the handler checked.
    assert max(cost["commits"] for cost in tool_steps) <= 3, tool_steps
    assert costs[-1] == costs[1], (costs[1], costs[-1])  # flat: the 24th step costs what the 2nd did
    # The answer step: from the last answer to the end of the attempt (whose first write
    # saves the counted model steps).
    tail = queries[marks[-1]:]
    end = next(i for i, q in enumerate(tail)
               if '"model_steps" =' in q["sql"] and q["sql"].lstrip().startswith("UPDATE"))
    answer = _cost(tail[:end])
    assert answer["round_trips"] <= 8, (answer, [q["sql"][:80] for q in tail[:end]])
