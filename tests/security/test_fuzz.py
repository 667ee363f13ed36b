"""Schemathesis against ``/api/schema/`` (SPEC §9): every operation, with a token.

Valid and invalid inputs are generated from the schema and sent to the WSGI app. For
every answer: never a 5xx, and every 4xx in the one error shape. Path ids are steered
to real rows of the caller most of the time, so the fuzzer gets past the 404s into the
serializers and services. The whole run is bounded (a few examples per operation, no
deadline, SSE streams cut after a second) and cannot leave the machine: name resolution
and connections are limited to loopback while it runs.

Two more passes walk every operation of the schema by hand: a 200 KB body of ``[`` to
each one that takes a body, with a token and anonymously (a 4xx in the error shape, no
trace logged), and a 4,301-digit integer — past Python's conversion limit — in every
query and path parameter and in ``Last-Event-ID`` (never a 5xx).

The input classes the generator finds only by luck (malformed hosts in every URL field,
Unicode digits in every id, NUL in every text, late-failing console filters) are sent on
purpose to every route of the URL conf by ``test_fuzz_input_classes.py`` and
``test_fuzz_console.py``, with the operations read from the same schema (``fuzzing.py``).

Deeper runs by hand: ``FUZZ_EXAMPLES=200`` (examples per operation and mode) and
``FUZZ_RANDOM=1`` (a fresh seed instead of the fixed one CI uses).
"""
from __future__ import annotations

import logging
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.conftest import token_for
from tests.security.conftest import SECRET_KEY_OF_PROVIDER
from tests.security.fuzzing import operations_of_the_schema, path_with

pytestmark = pytest.mark.django_db(transaction=True)

MAX_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
RANDOM = os.environ.get("FUZZ_RANDOM") == "1"


@pytest.fixture
def world(alice, space, agent, version, make_session, outbound, monkeypatch):
    """Real rows for alice (an admin of Acme): a connection, an agent, a session with a finished run."""
    from models_catalog.services import connection_create
    from runloop.loop import run_execute
    from sessions import event_stream as stream
    from sessions.services.questions import question_ask

    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 1.0)  # an SSE call on a live run ends by itself
    connection = connection_create(space=space, data={
        "name": "Fuzzed", "provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
        "model": "m", "api_key": SECRET_KEY_OF_PROVIDER})
    from toolservers.models import ToolServer

    tool_server = ToolServer.objects.create(space=space, name="fuzzed", url="http://127.0.0.1:9/mcp")  # nobody there
    session = make_session(alice)
    run = question_ask(session=session, content="What is 2+2?")
    run_execute(run_id=run.pk)  # the offline demo model answers; the run ends with run_finished
    from sessions.services.files import file_store

    attached = file_store(session=session, user=alice, name="notes.txt", data=b"an attached note\n")
    return {
        "token": token_for(alice),
        "ids": {"session_id": session.pk, "run_id": run.pk, "agent_id": agent.pk, "connection_id": connection.pk,
                "space_id": space.pk, "server_id": tool_server.pk, "file_id": attached.pk},
    }


def _problem(case, response) -> str | None:
    where = f"{case.method} {case.formatted_path} → {response.status_code}: {response.text[:200]!r}"
    if response.status_code >= 500:
        return f"server error: {where}"
    if SECRET_KEY_OF_PROVIDER in response.text:
        return f"key leaked: {where}"
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            return f"not JSON: {where}"
        error = body.get("error") if isinstance(body, dict) else None
        if (not isinstance(error, dict) or set(body) != {"error"}
                or not {"code", "message"} <= set(error) <= {"code", "message", "fields"}
                or not isinstance(error["code"], str) or not isinstance(error["message"], str)
                or not isinstance(error.get("fields", {}), dict)):
            return f"not the error shape: {where}"
    return None


BODY_REFERENCES = {"agent": "agent_id", "model_connection": "connection_id", "space": "space_id"}


def _steer(case, ids: dict[str, int]) -> None:
    """Two generated ids in three become the caller's real row of that kind, in the path
    and in the body's references, so the fuzzer reaches the serializers and services."""
    for name, value in list((case.path_parameters or {}).items()):
        if name in ids and (not isinstance(value, int) or value % 3 != 0):
            case.path_parameters[name] = ids[name]
    body = case.body if isinstance(case.body, dict) else {}
    for field, kind in BODY_REFERENCES.items():
        if isinstance(body.get(field), int) and body[field] % 3 != 0:
            body[field] = ids[kind]


def test_every_operation_answers_without_5xx_and_every_4xx_in_the_one_error_shape(world):
    from django.core.wsgi import get_wsgi_application

    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, [f"{o.method} {o.path}" for o in operations]
    headers = {"Authorization": f"Token {world['token']}"}
    problems: dict[str, str] = {}
    calls = {"count": 0}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis_settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                                 phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
            def check(case) -> None:
                _steer(case, world["ids"])
                response = case.call(headers=headers)
                calls["count"] += 1
                problem = _problem(case, response)
                if problem:  # collected, not raised: one run reports every operation's problems
                    # check() runs within this iteration, so it reads this iteration's operation.
                    problems.setdefault(problem.split(":")[0] + f" {case.method} {operation.path} "  # noqa: B023
                                        f"{response.status_code}", problem)

            try:
                check()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing in this operation can be made invalid
    assert calls["count"] >= len(operations) * 2
    assert not problems, "\n".join(problems.values())


# --- deep nesting and huge integers on every operation of the schema ---------------------------

DEEP = "[" * 200_000
HUGE_INT = "9" * 4301


def _no_traces(caplog) -> list[str]:
    return [record.getMessage()[:200] for record in caplog.records
            if record.exc_info is not None or record.levelname in ("ERROR", "CRITICAL")]


def test_a_deeply_nested_body_is_a_4xx_on_every_operation_that_takes_one_for_everyone(world, caplog):
    from django.test import Client

    caplog.set_level(logging.DEBUG)
    token = Client(HTTP_AUTHORIZATION=f"Token {world['token']}")
    anonymous = Client()
    problems, sent = [], 0
    for operation in operations_of_the_schema():
        if "requestBody" not in operation.definition.raw:
            continue
        for who, client in (("token", token), ("anonymous", anonymous)):
            response = getattr(client, operation.method.lower())(path_with(operation, world["ids"]), DEEP,
                                                                 content_type="application/json")
            sent += 1
            if not 400 <= response.status_code < 500:
                problems.append(f"{who} {operation.method} {operation.path} → {response.status_code}")
            else:
                body = response.json()
                if set(body) != {"error"} or not {"code", "message"} <= set(body["error"]):
                    problems.append(f"{who} {operation.method} {operation.path}: not the error shape")
    assert sent >= 20
    assert problems == [] and _no_traces(caplog) == []


def test_a_huge_integer_in_any_parameter_or_header_is_a_4xx_never_a_crash(world, caplog, monkeypatch):
    from django.test import Client

    from sessions import event_stream as stream

    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.5)
    caplog.set_level(logging.DEBUG)
    client = Client(HTTP_AUTHORIZATION=f"Token {world['token']}", HTTP_LAST_EVENT_ID=HUGE_INT)
    problems, sent = [], 0
    for operation in operations_of_the_schema():
        parameters = operation.definition.raw.get("parameters", [])
        query = {p["name"]: HUGE_INT for p in parameters if p.get("in") == "query"}
        targets = [("query", path_with(operation, world["ids"]), query)] if query else []
        if any(p.get("in") == "path" for p in parameters):
            targets.append(("path", path_with(operation, world["ids"], every_id=HUGE_INT), {}))
        for where, path, params in targets:
            method = operation.method.lower()
            response = (client.get(path, params) if method == "get"
                        else getattr(client, method)(path, "{}", content_type="application/json"))
            sent += 1
            if response.streaming:
                b"".join(response.streaming_content)
            if response.status_code >= 500:
                problems.append(f"{where} {operation.method} {operation.path} → {response.status_code}")
    assert sent >= 20
    assert problems == [] and _no_traces(caplog) == []
