"""A step costs O(new): few statements, the same late in a session as early.

Statements are counted between two requests to the model (transaction control left out:
BEGIN, COMMIT, SAVEPOINT, RELEASE), on whichever database the suite runs on. The targets
are the issue's: at most 12 for a step that makes one tool call, at most 8 for a step that
answers, and no growth with the length of the session.
"""
from __future__ import annotations

import json

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from agentloom.runloop.loop import run_execute
from sessions.models import Run
from sessions.services.history import question_ask
from tests.fakes.fake_provider import chat_stream

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_STEPS = 24
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def _counted(queries: list[dict]) -> int:
    return sum(1 for query in queries if not query["sql"].lstrip().upper().startswith(CONTROL))


def test_a_tool_step_and_an_answer_step_cost_a_few_statements_however_long_the_run(fake_session, strict):
    database = connections["default"]  # this thread's connection: the loop runs here
    marks: list[int] = []

    def handler(request):
        marks.append(len(database.queries_log))
        done = sum(1 for m in request.json["messages"] if m["role"] == "tool")
        if done < TOOL_STEPS:
            return chat_stream([f"Step {done}."], tool_calls=[{"id": f"c{done}", "name": "calculator",
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
    # A step: from the model's answer to the next request (saving it, running its tool,
    # saving the result, preparing the next request).
    steps = [_counted(queries[a:b]) for a, b in zip(marks, marks[1:])]
    assert len(steps) == TOOL_STEPS
    assert max(steps[1:]) <= 12, steps
    assert steps[-1] == steps[1], steps  # flat: the 24th step costs what the 2nd did
    # The answer step: from the last answer to the end of the attempt (whose first write
    # saves the counted model steps).
    tail = queries[marks[-1]:]
    end = next(i for i, q in enumerate(tail)
               if '"model_steps" =' in q["sql"] and q["sql"].lstrip().startswith("UPDATE"))
    assert _counted(tail[:end]) <= 8, [q["sql"][:80] for q in tail[:end]]
