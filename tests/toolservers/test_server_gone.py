"""A published version whose tool server no longer exists (deleted before deletes were
refused, or by the database): its calls say so, naming the server, and registering a
server of the same name in the space again repairs it (tools are matched by server name
within the space, docs/tool-servers.md)."""
from __future__ import annotations

import pytest

from sessions.models import Run
from tests.fakes.fake_provider import chat_stream, sequence
from tests.toolservers.runs import ask_and_run, call, results
from toolservers.models import ToolServer

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_call_to_a_deleted_server_names_it_and_registering_the_name_again_repairs_the_version(
        server_agent, strict, as_alice, registered, mcp_server):
    session = server_agent(["tests.echo"])
    ToolServer.objects.filter(pk=registered.pk).delete()  # as the database would, past the services' rule
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__echo", {"text": "hi"})]),
                              chat_stream(["The tool is gone."]),
                              chat_stream(tool_calls=[call("tests__echo", {"text": "back"}, "c2")]),
                              chat_stream(["It is back."]))
    assert ask_and_run(session).status == Run.Status.COMPLETED
    refused = results(session)[0]
    assert refused["status"] == "error"
    assert refused["content"].startswith("The tool server 'tests' no longer exists: it was deleted after this agent "
                                         "was published, so the tool was not called.")
    assert "register a server named 'tests' in this space again" in refused["content"]

    again = as_alice.post("/api/v1/tool-servers", {"name": "tests", "url": mcp_server.url,
                                                   "headers": mcp_server.headers}, format="json")
    assert again.status_code == 201
    assert ask_and_run(session, "Again").status == Run.Status.COMPLETED
    repaired = results(session)[1]
    assert repaired["status"] == "ok" and repaired["content"] == "back"
