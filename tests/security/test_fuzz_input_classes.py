"""Every route outside the console against the input classes of issue #44 item 9: never a 5xx.

The API's operations come from its schema, read by schemathesis as in ``test_fuzz.py``
(which generates inputs from it, sends 200 KB of nesting to every body and 4,301 digits to
every parameter); the chat pages and the rest of the URL conf are listed here by route. For each: the odd numbers of
``tests/security/fuzzing.py`` in every id of the path and every query parameter, NUL in
every query parameter and in every text field of every body (nested ones included), every
malformed host in every URL field (as JSON and as a form), and past-64-bit and negative
integers in every integer field — as alice, who administers the space (the API's admin
paths) and owns the session (the chat's). Every answer is below 500, every 4xx of the API
is in the one error shape, no trace is logged, and every route of the URL conf outside
``/admin/`` was sent something (``test_fuzz_console.py`` covers the console).

Bounded: about 800 requests, no network past 127.0.0.1 (``outbound``), SSE streams cut
after half a second; run on PostgreSQL as well as SQLite (NUL fails only on PostgreSQL).
"""
from __future__ import annotations

import logging
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.conftest import token_for
from tests.security.fuzzing import (
    HUGE_INT,
    MALFORMED_URLS,
    NUL,
    ODD_NUMBERS,
    Prober,
    every_route,
    operations_of_the_schema,
    path_with,
    traces_logged,
)

pytestmark = pytest.mark.django_db(transaction=True)

URL_FIELDS = frozenset({"url", "base_url"})
# A valid body per operation, so a mutated field is the one thing wrong and reaches the
# code behind the serializer. Every operation with a URL field must have one (checked).
BASE_BODIES: dict[str, dict[str, Any]] = {
    "POST /api/models/discover": {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
                                  "api_key": "sk-fuzz"},
    "POST /api/v1/model-connections": {"name": "Fuzzed", "provider": "openai_compatible", "model": "m",
                                       "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-fuzz"},
    "PATCH /api/v1/model-connections/{connection_id}": {"base_url": "http://127.0.0.1:9/v2", "api_key": "sk-fuzz"},
    "POST /api/v1/tool-servers": {"name": "fuzz_new", "url": "http://127.0.0.1:9/mcp"},
    "PATCH /api/v1/tool-servers/{server_id}": {"url": "http://127.0.0.1:9/other"},
    "POST /api/v1/agents": {"name": "Fuzz", "model_connection": "CONNECTION", "instructions": "Be brief."},
    "PATCH /api/v1/agents/{agent_id}": {"name": "Fuzz", "instructions": "Be brief."},
    "POST /api/v1/sessions": {"agent": "AGENT"},
    "POST /api/v1/sessions/import": {"agent": "AGENT", "title": "Imported",
                                     "transcript": [{"role": "user", "content": "hi"},
                                                    {"role": "assistant", "content": "hello"}]},
    "POST /api/v1/sessions/{session_id}/questions": {"content": "hi"},
    "POST /api/v1/runs/{run_id}/supplements": {"content": "more"},
    # TOOL-10: the answer to a tool server's question (the API's and the chat's address).
    "POST /api/v1/runs/{run_id}/inputs": {"input_id": 1, "action": "accept", "content": {"name": "x"}},
    "POST /chat/runs/{run_id}/inputs": {"input_id": 1, "action": "decline"},
    "POST /api/v1/runs/{run_id}/approvals": {"call_id": "call_1", "decision": "approve"},
    "POST /sessions/new/questions": {"agent": "AGENT", "content": "hi"},
    # MEM-4: the person's own memory for an agent (the fuzzed agent keeps none: a write is a 409).
    "PUT /api/v1/agents/{agent_id}/memory": {"use_memory": False},
    "PUT /api/v1/agents/{agent_id}/memory/{path}": {"content": "A note."},
    "POST /api/v1/auth/token": {"username": "alice", "password": "alice-password-1", "client": "fuzz"},
}
# Query parameters of the pages outside the schema, by route (those that read none get one
# made up: a NUL or an odd number there must be ignored or refused, never a crash).
PAGE_PARAMETERS: dict[str, list[str]] = {
    "": ["q"], "login/": ["next"], "logout/": ["next"], "sessions/new": ["agent"],
    "sessions/<int:session_id>/": ["before", "q"], "chat/runs/<int:run_id>/text": ["after", "upto"],
    "chat/sessions": ["q", "current"],
    "chat/runs/<int:run_id>/fragment": ["after"], "healthz": ["details"], "api/schema/": ["format", "lang"],
    "api/docs/": ["q"], "chat/sessions/<int:session_id>/state": ["after"], "favicon.ico": ["v"],
}
# Pages that read no number: NUL and two odd numbers are enough (the schema takes 0.15 s to draw).
STATIC_PAGES = frozenset({"api/schema/", "api/docs/", "healthz", "login/", "logout/", "favicon.ico"})


@pytest.fixture
def world(alice, bob, space, agent, version, make_session, outbound, monkeypatch):
    from models_catalog.services import connection_create
    from runloop.loop import run_execute
    from sessions import event_stream as stream
    from sessions.services.files import file_store
    from sessions.services.questions import question_ask
    from toolservers.models import ToolServer

    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.5)  # an event stream of a live run ends by itself
    connection = connection_create(space=space, data={
        "name": "Local", "provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m",
        "api_key": "sk-fuzz-stored"})
    server = ToolServer.objects.create(space=space, name="fuzzed", url="http://127.0.0.1:9/mcp")  # nobody there
    session = make_session(alice)
    run = question_ask(session=session, content="What is 2+2?")
    run_execute(run_id=run.pk)  # the offline demo model answers: a finished run with events
    attached = file_store(session=session, user=alice, name="notes.txt", data=b"a note\n")
    return {"session_id": session.pk, "run_id": run.pk, "agent_id": agent.pk, "connection_id": connection.pk,
            "space_id": space.pk, "server_id": server.pk, "file_id": attached.pk, "token": token_for(alice)}


def _filled(body: dict[str, Any], ids: dict[str, Any]) -> dict[str, Any]:
    names = {"AGENT": ids["agent_id"], "CONNECTION": ids["connection_id"]}
    return {key: names.get(value, value) if isinstance(value, str) else value for key, value in body.items()}


def _with_nul_at(value: Any) -> list[Any]:
    """``value`` once per string leaf (keys included), with that leaf holding a NUL."""
    if isinstance(value, str):
        return [NUL]
    if isinstance(value, list):
        return [[*value[:i], variant, *value[i + 1:]] for i, item in enumerate(value) for variant in _with_nul_at(item)]
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            found += [{**value, key: variant} for variant in _with_nul_at(item)]
            found.append({**{k: v for k, v in value.items() if k != key}, key + "\x00": item})
        return found
    return []


def _body_schema(operation) -> dict[str, Any]:
    """The JSON body's properties (``$ref``s into the schema's bundle resolved)."""
    for body in operation.body:
        if body.media_type != "application/json":
            continue
        schema = body.definition.get("schema", {})
        bundle = schema.get("x-bundled", {})
        while "$ref" in schema:
            schema = {**bundle.get(schema["$ref"].rsplit("/", 1)[-1], {}), "x-bundled": bundle}
        return schema.get("properties", {})
    return {}


def _mutations(key: str, base: dict[str, Any], properties: dict[str, Any]) -> list[dict[str, Any]]:
    bodies = [*_with_nul_at(base)]
    for name, schema in properties.items():
        if name in URL_FIELDS:
            assert key in BASE_BODIES, f"{key} has a URL field ({name}) and no valid body to send it in"
            bodies += [{**base, name: url} for url in MALFORMED_URLS]
        elif schema.get("type") == "string" and name not in base:
            bodies.append({**base, name: NUL})
        elif schema.get("type") == "integer":
            bodies += [{**base, name: HUGE_INT}, {**base, name: -1}]
        elif schema.get("type") == "object":
            bodies += [{**base, name: {"X-Fuzz": NUL}}, {**base, name: {"X-\x00": "v"}}]
    return bodies


def test_no_route_outside_the_console_answers_5xx_to_any_input_class(world, alice, caplog):
    caplog.set_level(logging.DEBUG)
    api = Prober(Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {world['token']}"))
    for operation in operations_of_the_schema():
        key = f"{operation.method.upper()} {operation.path}"
        method, path = operation.method.upper(), path_with(operation, world)
        parameters = operation.definition.raw.get("parameters", [])
        base = _filled(BASE_BODIES.get(key, {}), world)
        # A NUL in a query string is refused before any view, whatever the operation (so even
        # DELETE /auth/tokens/current is sent, and revokes nothing).
        api.send(method, path, base, query={"fuzz": NUL}, as_json=True)
        if method == "GET":
            api.send(method, path)
        elif "requestBody" in operation.definition.raw:
            for body in _mutations(key, base, _body_schema(operation)):
                api.send(method, path, body, as_json=True)
            for url_field in URL_FIELDS & set(base):  # the same hosts through a form
                for url in MALFORMED_URLS:
                    api.send(method, path, {**{k: v for k, v in base.items() if not isinstance(v, list)},
                                            url_field: url})
        if any(p.get("in") == "path" for p in parameters):
            for odd in ODD_NUMBERS:
                api.send(method, path_with(operation, world, every_id=odd))
        for parameter in (p for p in parameters if p.get("in") == "query"):
            for odd in [*ODD_NUMBERS, NUL]:
                api.send(method, path, base, query={parameter["name"]: odd}, as_json=True)
    # An upload whose file name and extra field hold a NUL.
    api.send("POST", f"/api/v1/sessions/{world['session_id']}/files",
             {"file": SimpleUploadedFile("no\x00te.txt", b"text\n"), "note": NUL})

    chat = Client(raise_request_exception=False)
    chat.force_login(alice)
    pages = Prober(chat)
    for route, names in PAGE_PARAMETERS.items():
        path = "/" + route.replace("<int:session_id>", str(world["session_id"])).replace(
            "<int:run_id>", str(world["run_id"]))
        for value in [NUL, "²", "9" * 4301] if route in STATIC_PAGES else [*ODD_NUMBERS, NUL]:
            pages.send("GET", path, query=dict.fromkeys(names, value))
            if len(names) > 1:  # one odd, one fine: each is checked on its own
                for name in names:
                    pages.send("GET", path, query={**dict.fromkeys(names, "1"), name: value})
        if "<int:" in route:  # only runs of ASCII digits reach the view; the rest is the resolver's 404
            for odd in ["9" * 30, "9" * 4301, "²"]:
                pages.send("GET", "/" + route.replace("<int:session_id>", odd).replace("<int:run_id>", odd))
    for value in [*ODD_NUMBERS, NUL]:
        pages.send("POST", "/sessions/new", {"agent": value})
        pages.send("POST", "/sessions/new/questions", {"agent": value, "content": "hi"}, as_json=True)
    pages.send("POST", "/sessions/new/questions", {"agent": world["agent_id"], "content": NUL}, as_json=True)
    # TOOL-9: a decision from the chat's card, as JSON and as a form, with every field odd in turn.
    decide = f"/chat/runs/{world['run_id']}/approvals"
    decision = {"call_id": "call_1", "decision": "approve", "reason": "fine", "scope": "call"}
    for name in decision:
        for value in [*ODD_NUMBERS, NUL, HUGE_INT, -1]:
            pages.send("POST", decide, {**decision, name: value}, as_json=True)
            pages.send("POST", decide, {**decision, name: str(value)})
    for body in _with_nul_at(decision):
        pages.send("POST", decide, body, as_json=True)
    for odd in ["9" * 30, "9" * 4301]:
        pages.send("POST", f"/chat/runs/{odd}/approvals", decision, as_json=True)
    pages.send("POST", "/login/", {"username": NUL, "password": NUL})
    pages.send("POST", "/logout/", {"next": NUL})

    problems = api.problems + pages.problems
    outside_console = {route for route in every_route() if not route.startswith("admin/")}
    missed = sorted(outside_console - api.covered - pages.covered)
    assert missed == [], "routes nothing was sent to"
    assert not problems, "\n".join(problems[:40])
    assert traces_logged(caplog) == []
    assert api.sent + pages.sent >= 600
