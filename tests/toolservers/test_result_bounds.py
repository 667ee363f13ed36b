"""What a tool server's result may put in a record (TOOL-4, CTX-7): its structured content
under the same cap as its text, and its images only once they decode as the image they say
they are (RUN-13's rules for uploads). Real SDK servers, real runs."""
from __future__ import annotations

import json

import pytest

from agentloom.agents.tool_registry import Tool
from sessions.models import Run
from tests.fakes.fake_provider import chat_stream, sequence
from tests.toolservers.runs import ask_and_run, call, results, session_with

pytestmark = pytest.mark.django_db(transaction=True)
CAP = Tool.__dataclass_fields__["output_limit"].default  # characters of one result kept in the records


def registered_with(client, server):
    response = client.post("/api/v1/tool-servers", {"name": "tests", "url": server.url, "headers": server.headers},
                           format="json")
    assert response.status_code == 201, response.json()


def test_tool4_a_huge_structured_content_is_not_stored_whole_and_the_records_say_so(
        as_alice, space, alice, fake, dialect, strict, mcp_server):
    def rows(count: int) -> dict[str, list[str]]:
        """A table of ``count`` rows, as structured content (and its JSON as text, by the SDK)."""
        return {"rows": [f"row {i:07d} of the report" for i in range(count)]}

    mcp_server.mcp.add_tool(rows)
    registered_with(as_alice, mcp_server)
    session = session_with(space, alice, fake, dialect, ["tests.rows"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__rows", {"count": 100_000})]),
                              chat_stream(["A long table."]))
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    result = results(session)[0]
    whole = len(json.dumps(rows(100_000), ensure_ascii=False))
    assert whole > 2 * CAP  # what the server sent, twice over the cap
    assert "structured_content" not in result
    assert result["structured_content_omitted"] == {"characters": whole, "limit": CAP}
    assert len(result["content"]) <= CAP and result["content"].startswith("{")  # the text's head and tail
    page = as_alice.get(f"/api/v1/sessions/{session.pk}/messages")
    assert page.status_code == 200 and len(page.content) < CAP + 200_000


def test_tool4_structured_content_under_the_cap_is_kept_whole(as_alice, space, alice, fake, dialect, strict,
                                                              mcp_server):
    registered_with(as_alice, mcp_server)
    session = session_with(space, alice, fake, dialect, ["tests.add"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__add", {"a": 2, "b": 3})]), chat_stream(["5."]))
    assert ask_and_run(session).status == Run.Status.COMPLETED
    result = results(session)[0]
    assert result["structured_content"] == {"sum": 5} and "structured_content_omitted" not in result
