"""Tool servers in the console (SPEC §10, TOOL-1, TOOL-2, TOOL-3, TOOL-6): add a server with its
headers masked, read each tool's description and annotations, refresh with what changed,
the operator's servers read-only, the agent's picker grouped by server, the version's
frozen tools with their drift."""
from __future__ import annotations

import json
import sys

import pytest
from django.contrib.admin import helpers

from tests.fakes.mcp_servers import TOKEN
from toolservers.config import servers_parse
from toolservers.models import ToolServer
from toolservers.services import operator_servers_sync

# Only the test's thread writes: the SDK runs on the bridge's loop, which never touches the database.
pytestmark = pytest.mark.django_db
ADD = "/admin/toolservers/toolserver/add/"


def add(console, space, server, headers: str):
    return console.post(ADD, {"space": space.pk, "name": "tests", "url": server.url, "timeout_seconds": 60,
                              "header_lines": headers}, follow=True)


def test_console_adds_a_server_whose_headers_are_masked_and_lists_each_tools_description_and_annotations(
        console, space, mcp_server):
    response = add(console, space, mcp_server, f"Authorization: Bearer {TOKEN}")
    assert response.status_code == 200
    server = ToolServer.objects.get(name="tests")
    page = console.get(f"/admin/toolservers/toolserver/{server.pk}/change/").content.decode()
    assert TOKEN not in page and "Bearer mcp…5a69" in page
    assert "Repeat the text back." in page and "read-only" in page and "increment" in page
    assert "no annotations (treated as having side effects)" in page  # increment says nothing of itself


def test_console_a_refused_token_is_an_error_on_the_headers_and_saves_nothing(console, space, mcp_server):
    response = add(console, space, mcp_server, "Authorization: Bearer not-the-token-42")
    page = response.content.decode()
    assert "refused the credentials" in page and "not-the-token-42" not in page
    assert not ToolServer.objects.exists()


def test_console_refresh_says_what_changed(console, space, registered, mcp_server):
    mcp_server.rename_tool("add", "sum")
    response = console.post("/admin/toolservers/toolserver/", {
        "action": "refresh", helpers.ACTION_CHECKBOX_NAME: [registered.pk]}, follow=True)
    assert "Server tests: Added sum; removed add." in response.content.decode()


def test_console_the_operators_servers_are_read_only(console, settings, space):
    settings.MCP_OPERATOR_SERVERS = servers_parse(json.dumps({"mcpServers": {"time": {
        "command": sys.executable, "args": ["-m", "mcp_server_time"], "env": {"TZ_KEY": "hidden-value-123"}}}}))
    operator_servers_sync()
    server = ToolServer.objects.get(name="time")
    page = console.get(f"/admin/toolservers/toolserver/{server.pk}/change/").content.decode()
    assert "get_current_time" in page and "mcp_server_time" in page and "TZ_KEY" in page
    assert "hidden-value-123" not in page and 'name="_save"' not in page
    refused = console.post(f"/admin/toolservers/toolserver/{server.pk}/change/", {"name": "evil"})
    assert refused.status_code == 403
    assert console.post(f"/admin/toolservers/toolserver/{server.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ToolServer.objects.get(pk=server.pk).name == "time"


def test_console_the_agent_picker_groups_server_tools_with_what_they_say_they_do(console, agent, registered):
    page = console.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert "tests (Acme server)" in page and 'value="tests.echo"' in page
    assert "echo — Repeat the text back. [read-only, not destructive, idempotent, not open world]" in page


def test_console_the_version_page_lists_the_frozen_tools_and_their_drift(console, agent, registered, mcp_server):
    from agents.services import agent_publish, agent_update
    from toolservers.services import toolserver_refresh

    agent_update(agent=agent, data={"tools": ["calculator", "tests.echo", "tests.increment"]})
    version = agent_publish(agent=agent)
    mcp_server.reschema_tool("echo")
    toolserver_refresh(server=registered)
    page = console.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert "tests__echo" in page and "input schema changed on the server" in page
    assert "tests__increment" in page and "as published" in page and "an unknown outcome on resume" in page
