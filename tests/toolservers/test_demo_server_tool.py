"""The offline demo model calls a tool server's tool: the real ``mcp-server-time`` from the
package index, started over stdio, chosen by the question's words, given arguments built
from its schema, and answered from its result."""
from __future__ import annotations

import json
import sys

import pytest

from sessions.models import Run, SessionMessage
from tests.toolservers.runs import ask_and_run
from toolservers.config import servers_parse
from toolservers.services import operator_servers_sync

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_with_time_server(settings, space, alice, demo_connection):
    """Alice's session with an agent on the demo model that may use the time server's two tools."""
    from agents.services import agent_create, agent_publish
    from sessions.models import Session

    settings.MCP_OPERATOR_SERVERS = servers_parse(json.dumps({"mcpServers": {"time": {
        "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}}}))
    assert operator_servers_sync() == {"time": "ok"}
    agent = agent_create(space=space, name="Clock", model_connection=demo_connection, created_by=alice,
                         tools=["calculator", "time.get_current_time", "time.convert_time"])
    return Session.objects.create(space=space, user=alice, agent=agent,
                                  version=agent_publish(agent=agent, published_by=alice))


def test_the_demo_calls_the_time_servers_tools_with_the_cities_asked_and_answers_from_their_results(
        demo_with_time_server):
    session = demo_with_time_server
    run = ask_and_run(session, "What time is it in Tokyo?")
    assert run.status == Run.Status.COMPLETED, run.error
    [call_step, answer] = [m.message for m in SessionMessage.objects.filter(session=session, kind="assistant")
                           .order_by("seq")]
    [call] = call_step["tool_calls"]
    assert call["function"]["name"] == "time__get_current_time"
    assert json.loads(call["function"]["arguments"]) == {"timezone": "Asia/Tokyo"}
    result = SessionMessage.objects.get(session=session, kind="tool_result").message
    assert result["status"] == "ok", result
    told = json.loads(result["content"])
    assert told["timezone"] == "Asia/Tokyo"
    assert "`time · get_current_time` returned:" in answer["content"]
    assert f"datetime {told['datetime']}" in answer["content"]  # the answer is the server's own result

    # The server's other tool, for a question that names it, with both cities and the time.
    run = ask_and_run(session, "Convert 14:30 from London to New York")
    assert run.status == Run.Status.COMPLETED, run.error
    call = SessionMessage.objects.filter(run=run, kind="assistant").order_by("seq").first().message
    assert call["tool_calls"][0]["function"]["name"] == "time__convert_time"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {
        "source_timezone": "Europe/London", "time": "14:30", "target_timezone": "America/New_York"}
    result = SessionMessage.objects.get(run=run, kind="tool_result").message
    assert result["status"] == "ok" and json.loads(result["content"])["target"]["timezone"] == "America/New_York"
