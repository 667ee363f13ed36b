"""A step's own work is the same late in a run as early (LOOP-1, issue #46), counted, not timed.

What the loop's thread does between two requests to the model is counted as the calls it
makes — Python functions and built-ins alike (``sys.setprofile``'s ``call`` and ``c_call``):
a loop over every message of the run, a comparison of every message by value where an
identity check was meant, a list rebuilt whole, each adds calls in proportion to the run's
length, while the work of a step — records, events, its tool, the call log — is the same
at step 60 as at step 10. Counts do not depend on how busy the machine is; only what the
clock decides (a heartbeat due, a calibration saved every eighth step) varies from one step
to the next, which the medians of ten steps leave out.

Issue #46 measured a step at 300 against one at 20 at ×1.31–1.56 in time: every message of
an ``openai_compatible`` body was made anew each step (string contents), so the estimates
and the call log compared all of them by value. docs/performance.md has the figures.
"""
from __future__ import annotations

import json
import statistics
import sys

import pytest

from runloop.loop import run_execute
from sessions.models import Run
from sessions.services.history import question_ask
from tests.fakes.fake_provider import chat_stream

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_STEPS = 70
WORDS = " ".join(["figure"] * 40)


def _calls_per_step(session, strict, *, text: str | None) -> list[int]:
    """The calls the loop's thread made in each step of a run of TOOL_STEPS tool calls."""
    counted = [0]
    marks: list[int] = []

    def count(frame, event, arg) -> None:
        if event == "call" or event == "c_call":
            counted[0] += 1

    def handler(request):  # the fake's own thread: not counted
        marks.append(counted[0])
        done = sum(1 for m in request.json["messages"] if m["role"] == "tool")
        if done < TOOL_STEPS:
            return chat_stream([text] if text else [], tool_calls=[
                {"id": f"c{done}", "name": "calculator", "arguments": json.dumps({"expression": f"{done}+1"})}])
        return chat_stream(["All done."])

    strict.handler = handler
    run = question_ask(session=session, content="Add one, many times.")
    sys.setprofile(count)
    try:
        run_execute(run_id=run.pk)
    finally:
        sys.setprofile(None)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    return [b - a for a, b in zip(marks, marks[1:])]


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("text", [None, WORDS], ids=["calls-only", "with-text"])
def test_a_step_late_in_a_run_makes_as_many_calls_as_one_early(fake_session, strict, text, dialect):
    # On the OpenAI wire an openai_compatible connection: its bodies carry string contents
    # (issue #45), and a turn that only calls a tool has its null content changed every step.
    session = fake_session(tools=("calculator",), limits={"max_model_calls": 200, "max_tool_calls": 200})
    steps = _calls_per_step(session, strict, text=text)
    assert len(steps) == TOOL_STEPS
    early, late = statistics.median(steps[10:20]), statistics.median(steps[-10:])
    # Before the fix a late step made about 20 calls more per message in the body (140
    # messages more by step 70); a flat step stays within a few calls of an early one.
    assert late <= early * 1.02, (early, late, steps)
