"""A tool's JSON Schema is resolved within itself (TOOL-6): no ``$ref`` is ever fetched, an
unresolvable one leaves the tool out at registration, and at call time (a version frozen
before that check) it is a tool error and the run goes on.

The servers are real: an SDK-built MCP server whose tool lists a hand-written schema, and a
loopback HTTP server that counts every request a ``$ref`` to it would make.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import BaseModel

from sessions.models import Run
from tests.fakes.fake_provider import chat_stream, sequence
from tests.toolservers.runs import ask_and_run, call, chat_requests, never_ask, results, session_with

# A run is executed on this thread but its tool calls on others: they need committed rows.
in_runs = pytest.mark.django_db(transaction=True)
SECRET = "METADATA-ONLY-INSIDE-7f3a"


class _Counted(ThreadingHTTPServer):
    hits = 0


class _Answer(BaseHTTPRequestHandler):
    """What an internal address would answer: a schema whose words would reach the model."""

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        self.server.hits += 1  # type: ignore[attr-defined]
        body = json.dumps({"enum": [SECRET]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def inside() -> Iterator[_Counted]:
    """A loopback HTTP server standing for an internal or metadata address; ``hits`` counts requests."""
    server = _Counted(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def remote_schema(port: int) -> dict:
    return {"type": "object", "properties": {"query": {"$ref": f"http://127.0.0.1:{port}/x"}}, "required": ["query"]}


MISSING = {"type": "object", "$defs": {}, "properties": {"query": {"$ref": "#/$defs/Missing"}}, "required": ["query"]}


def frozen_before_the_check(server, entry_schema) -> None:
    """The server's last listing as it was stored before listings were checked for
    references: the tool with its schema, so a version published from it freezes it."""
    tools = server.tools + [{"name": "lookup", "description": "Look something up.", "input_schema": entry_schema,
                             "annotations": {"readOnlyHint": True}}]
    type(server).objects.filter(pk=server.pk).update(tools_json=json.dumps(tools), skipped=[])


@pytest.mark.django_db
def test_tool6_a_remote_ref_is_never_fetched_at_registration_and_the_tool_is_left_out(as_alice, mcp_server, inside):
    mcp_server.offer_with_schema(lookup, remote_schema(inside.server_port))
    response = as_alice.post("/api/v1/tool-servers", {"name": "tests", "url": mcp_server.url,
                                                      "headers": mcp_server.headers}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert "lookup" not in [tool["name"] for tool in body["tools"]] and "echo" in [t["name"] for t in body["tools"]]
    skipped = {item["name"]: item["reason"] for item in body["skipped"]}
    assert f"http://127.0.0.1:{inside.server_port}/x" in skipped["lookup"]
    assert "within the schema" in skipped["lookup"]
    assert inside.hits == 0


@pytest.mark.django_db
def test_tool6_choosing_a_tool_left_out_for_its_reference_is_a_400_saying_why(as_alice, mcp_server, space):
    from models_catalog.models import ModelConnection

    mcp_server.offer_with_schema(lookup, MISSING)
    assert as_alice.post("/api/v1/tool-servers", {"name": "tests", "url": mcp_server.url,
                                                  "headers": mcp_server.headers}, format="json").status_code == 201
    connection = ModelConnection.objects.create(space=space, name="Demo", provider="demo", model="agentloom-demo")
    response = as_alice.post("/api/v1/agents", {"name": "A", "model_connection": connection.pk,
                                                "tools": ["tests.lookup"]}, format="json")
    assert response.status_code == 400
    assert "#/$defs/Missing" in response.json()["error"]["fields"]["tools"]


@in_runs
def test_tool6_a_remote_ref_frozen_in_an_older_version_is_a_tool_error_and_never_fetched(
        server_agent, registered, strict, fake, mcp_server, inside):
    mcp_server.offer_with_schema(lookup, remote_schema(inside.server_port))
    frozen_before_the_check(registered, remote_schema(inside.server_port))
    session = server_agent(["tests.lookup"], overrides=never_ask(["tests.lookup"]))
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__lookup", {"query": "x"})]),
                              chat_stream(["The tool could not be used."]))
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    result = results(session)[0]
    assert result["status"] == "error" and f"http://127.0.0.1:{inside.server_port}/x" in result["content"]
    assert inside.hits == 0 and mcp_server.seen["tools/call"] == 0
    assert all(SECRET not in json.dumps(r.json) for r in chat_requests(fake))


@in_runs
def test_tool6_a_missing_local_ref_frozen_in_an_older_version_is_a_tool_error_not_a_failed_run(
        server_agent, registered, strict, mcp_server):
    mcp_server.offer_with_schema(lookup, MISSING)
    frozen_before_the_check(registered, MISSING)
    session = server_agent(["tests.lookup"], overrides=never_ask(["tests.lookup"]))
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__lookup", {"query": "x"})]),
                              chat_stream(["The tool could not be used."]))
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    result = results(session)[0]
    assert result["status"] == "error" and "#/$defs/Missing" in result["content"]
    assert mcp_server.seen["tools/call"] == 0


class Point(BaseModel):
    x: int
    y: int


@in_runs
def test_tool4_a_local_ref_still_checks_arguments(as_alice, space, alice, fake, dialect, strict, mcp_server):
    def place(point: Point) -> str:
        """Place a point."""
        return f"placed at {point.x},{point.y}"

    mcp_server.mcp.add_tool(place)  # the SDK's own schema for a model argument: {"$ref": "#/$defs/Point"}
    response = as_alice.post("/api/v1/tool-servers", {"name": "tests", "url": mcp_server.url,
                                                      "headers": mcp_server.headers}, format="json")
    listed = {tool["name"]: tool for tool in response.json()["tools"]}
    assert listed["place"]["input_schema"]["properties"]["point"]["$ref"] == "#/$defs/Point"
    session = session_with(space, alice, fake, dialect, ["tests.place"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__place", {"point": {"x": "one", "y": 2}}, "c1")]),
                              chat_stream(tool_calls=[call("tests__place", {"point": {"x": 1, "y": 2}}, "c2")]),
                              chat_stream(["Placed."]))
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    first, second = results(session)
    assert first["status"] == "error" and "'one' is not of type 'integer'" in first["content"]
    assert second["status"] == "ok" and second["content"] == "placed at 1,2"
    assert mcp_server.seen["tools/call"] == 1


# --- the walk, literal in and literal out -----------------------------------------------------


@pytest.mark.parametrize("schema", [
    {"type": "object", "$defs": {"P": {"type": "integer"}}, "properties": {"p": {"$ref": "#/$defs/P"}}},
    {"type": "object", "properties": {"p": {"$anchor": "point", "type": "integer"}, "q": {"$ref": "#point"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
     "definitions": {"P": {"type": "integer"}}, "properties": {"p": {"$ref": "#/definitions/P"}}},
    # An embedded resource with its own $id is within the schema, whatever its URI looks like.
    {"$id": "https://tools.example/root.json", "type": "object",
     "$defs": {"a": {"$id": "a.json", "type": "string"}}, "properties": {"x": {"$ref": "a.json"}}},
    {"type": "object", "properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},  # bundled
    {"type": "object", "properties": {"tree": {"$ref": "#"}}},
], ids=["defs", "anchor", "draft-07", "embedded-id", "meta-schema", "root"])
def test_tool6_references_within_the_schema_resolve(schema):
    from toolservers.schemas import schema_check, unresolvable_reference

    assert unresolvable_reference(schema) is None
    schema_check(schema)


@pytest.mark.parametrize("schema, reference", [
    ({"type": "object", "properties": {"p": {"$ref": "http://169.254.169.254/latest/meta-data/"}}},
     "http://169.254.169.254/latest/meta-data/"),
    ({"type": "object", "properties": {"p": {"$ref": "#/$defs/Missing"}}}, "#/$defs/Missing"),
    ({"type": "object", "properties": {"p": {"$ref": "#nowhere"}}}, "#nowhere"),
    ({"type": "object", "properties": {"p": {"anyOf": [{"type": "string"}, {"items": {"$ref": "other.json"}}]}}},
     "other.json"),
    ({"$id": "https://tools.example/root.json", "type": "object", "properties": {"p": {"$ref": "b.json"}}},
     "b.json"),
    ({"type": "object", "properties": {"p": {"$dynamicRef": "https://tools.example/meta#node"}}},
     "https://tools.example/meta#node"),
], ids=["metadata", "missing-pointer", "missing-anchor", "nested", "relative-to-id", "dynamic"])
def test_tool6_a_reference_outside_the_schema_is_named_and_never_fetched(schema, reference, inside):
    from toolservers.schemas import SchemaReferenceError, schema_check, unresolvable_reference

    assert unresolvable_reference(schema) == reference
    with pytest.raises(SchemaReferenceError) as refused:
        schema_check(schema)
    assert reference in str(refused.value) and "within the schema" in str(refused.value)
    loopback = {"type": "object", "properties": {"p": {"$ref": f"http://127.0.0.1:{inside.server_port}/x"}}}
    assert unresolvable_reference(loopback) == f"http://127.0.0.1:{inside.server_port}/x"
    assert inside.hits == 0
