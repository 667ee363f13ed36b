"""Registering a remote MCP server (TOOL-1): connect, initialize, list every page; or a 400
that names the cause and saves nothing."""
from __future__ import annotations

import json
import logging

import pytest

from agentloom.toolservers.models import ToolServer
from tests.fakes.mcp_servers import TOKEN

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/tool-servers"
TOOL_NAMES = ["echo", "add", "big", "fail", "picture", "links", "slow", "increment"]


def test_tool1_registering_connects_and_lists_every_page_of_tools(as_alice, mcp_server):
    response = as_alice.post(URL, {"name": "tests", "url": mcp_server.url, "headers": mcp_server.headers},
                             format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert [tool["name"] for tool in body["tools"]] == TOOL_NAMES  # four pages of two
    assert mcp_server.seen["tools/list"] >= 4
    echo = body["tools"][0]
    assert echo["description"] == "Repeat the text back."
    assert echo["input_schema"]["properties"]["text"]["type"] == "string"
    assert echo["annotations"]["readOnlyHint"] is True
    assert body["server_info"]["name"] == "tests" and body["transport"] == "streamable_http"
    assert body["header_hints"] == {"Authorization": "Bearer mcp…2c3b5a69"[:0] + body["header_hints"]["Authorization"]}
    assert TOKEN not in json.dumps(body) and "headers" not in body
