"""Server tools in runs, on both wires (TOOL-3, TOOL-4): frozen definitions byte for byte, one
protocol session per run and server, results as records, 0 invalid requests."""
from __future__ import annotations

import json

import pytest

from agentloom.runloop.loop import run_execute
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.history import question_ask
from tests.fakes.fake_provider import chat_stream, sequence

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


def ask_and_run(session, content="Go") -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def call(name, arguments, call_id="c1"):
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def results(session):
    return [m.message for m in SessionMessage.objects.filter(session=session, kind="tool_result").order_by("seq")]


def test_tool4_a_server_tool_runs_end_to_end(server_agent, strict, fake, mcp_server):
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__echo", {"text": "hello"})]),
                              chat_stream(["It said hello."]))
    session = server_agent(["calculator", "tests.echo"])
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    assert results(session)[0]["content"] == "hello" and results(session)[0]["status"] == "ok"
    assert strict.rejections == []
