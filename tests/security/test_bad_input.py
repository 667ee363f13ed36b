"""Every bad input gets a clear 4xx in the one error shape and changes nothing (SPEC §11).

Hand-written edges the schema fuzzer finds only by luck: ids past 64 bits (SQLite, the
embedded default, cannot even bind them), Unicode digits that ``str.isdigit`` accepts and
``int`` refuses, and request bodies past ``AGENTLOOM_MAX_REQUEST_BYTES``.
"""
from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from agents.models import Agent
from models_catalog.models import ModelConnection
from sessions.models import Run, Session, SessionMessage
from sessions.services.questions import question_ask
from tests.security.conftest import assert_error_shape, token_for

pytestmark = pytest.mark.django_db

HUGE = "9" * 20  # > 2**63
ODD_DIGITS = ["²", "①", HUGE, "-1", "1e3", " 1"]


def _counts() -> tuple[int, ...]:
    return (Session.objects.count(), Run.objects.count(), SessionMessage.objects.count(), Agent.objects.count(),
            ModelConnection.objects.count())


@pytest.fixture
def world(alice, make_session, agent, version, demo_connection):
    session = make_session(alice)
    run = question_ask(session=session, content="Hello")
    return {"session": session, "run": run, "agent": agent, "connection": demo_connection}


@pytest.mark.parametrize("value", ODD_DIGITS)
def test_an_odd_space_filter_is_a_400_not_a_crash(api, alice, world, value):
    for path in ("/api/v1/agents", "/api/v1/model-connections"):
        response = api(alice).get(path, {"space": value})
        assert response.status_code in (200, 400), (path, response.status_code)
        if response.status_code == 400:
            assert_error_shape(response)


@pytest.mark.parametrize("value", ODD_DIGITS)
def test_odd_cursors_and_filters_of_the_records_and_events_pages_are_4xx(api, alice, world, value):
    session, run = world["session"], world["run"]
    client = api(alice)
    for path, params in ((f"/api/v1/sessions/{session.pk}/messages", {"after": value}),
                         (f"/api/v1/sessions/{session.pk}/messages", {"instance": value}),
                         (f"/api/v1/sessions/{session.pk}/messages", {"limit": value}),
                         (f"/api/v1/runs/{run.pk}/events", {"format": "json", "after": value}),
                         (f"/api/v1/runs/{run.pk}/events", {"format": "json", "limit": value})):
        response = client.get(path, params)
        assert response.status_code in (200, 400), (path, params, response.status_code)
        if response.status_code == 400:
            assert_error_shape(response)


@pytest.mark.parametrize("value", ["²", HUGE, "-3", "abc"])
def test_an_odd_last_event_id_is_a_400_or_an_empty_stream_never_a_crash(api, alice, world, value, monkeypatch):
    from sessions import event_stream as stream

    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.5)
    response = api(alice).get(f"/api/v1/runs/{world['run'].pk}/events", HTTP_LAST_EVENT_ID=value)
    assert response.status_code in (200, 400), response.status_code
    if response.status_code == 400:
        assert_error_shape(response)
    else:
        b"".join(response.streaming_content)


@pytest.mark.parametrize("after, upto", [("²", "3"), ("1", "²"), ("٣", "5"), ("-1", "3"), (HUGE, HUGE)])
def test_odd_seqs_of_a_runs_text_in_the_chat_are_a_400_not_a_crash(alice, world, after, upto):
    # "²".isdigit() is True and int("²") raises: the chat read seqs with str.isdigit.
    browser = Client()
    browser.force_login(alice)
    response = browser.get(f"/chat/runs/{world['run'].pk}/text", {"after": after, "upto": upto})
    assert "after" in assert_error_shape(response, 400)["fields"]


@pytest.mark.parametrize("instance", ["²", "٣", HUGE, "-1"])
def test_an_instance_that_is_no_id_is_in_no_session(world, instance):
    from sessions.selectors.instances import instance_in_session

    assert instance_in_session(session=world["session"], instance=instance) is False


@pytest.mark.parametrize("field", ["space", "resource_id"])
def test_a_discovery_naming_an_impossible_id_is_a_4xx(api, alice, world, field, outbound):
    before = _counts()
    response = api(alice).post("/api/models/discover", {"provider": "demo", field: int(HUGE)}, format="json")
    assert 400 <= response.status_code < 500
    assert_error_shape(response)
    assert _counts() == before


@pytest.mark.parametrize("path, body", [
    ("/api/v1/model-connections", {"name": "n", "provider": "demo", "model": "m", "space": int(HUGE)}),
    ("/api/v1/model-connections", {"name": "n", "provider": "demo", "model": "m", "context_window": int(HUGE)}),
    ("/api/v1/model-connections", {"name": "n", "provider": "demo", "model": "m", "max_output_tokens": int(HUGE)}),
    ("/api/v1/agents", {"name": "a", "model_connection": "CONNECTION", "space": int(HUGE)}),
    ("/api/v1/agents", {"name": "a", "model_connection": int(HUGE)}),
    ("/api/v1/sessions", {"agent": int(HUGE)}),
    ("/api/v1/sessions/import", {"agent": int(HUGE), "transcript": [{"role": "user", "content": "hi"}]}),
], ids=["conn-space", "conn-window", "conn-output", "agent-space", "agent-connection", "session-agent", "import"])
def test_a_create_naming_an_impossible_id_or_figure_is_a_4xx_and_writes_nothing(api, alice, world, path, body):
    body = {k: (world["connection"].pk if v == "CONNECTION" else v) for k, v in body.items()}
    before = _counts()
    response = api(alice).post(path, body, format="json")
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:200])
    assert_error_shape(response)
    assert _counts() == before


def test_a_patch_with_an_impossible_figure_is_a_400_and_changes_nothing(api, alice, world):
    connection = world["connection"]
    response = api(alice).patch(f"/api/v1/model-connections/{connection.pk}", {"context_window": int(HUGE)},
                                format="json")
    assert_error_shape(response, 400)
    connection.refresh_from_db()
    assert connection.context_window < 10**9


@pytest.mark.parametrize("path", ["/api/v1/auth/token", "/api/v1/sessions", "/api/v1/sessions/import",
                                  "/api/models/discover", "/api/v1/model-connections", "/api/v1/agents",
                                  "QUESTIONS", "SUPPLEMENTS"])
def test_a_body_over_the_size_bound_is_413_in_the_error_shape_and_writes_nothing(alice, world, settings, path,
                                                                                 outbound):

    path = {"QUESTIONS": f"/api/v1/sessions/{world['session'].pk}/questions",
            "SUPPLEMENTS": f"/api/v1/runs/{world['run'].pk}/supplements"}.get(path, path)
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    body = json.dumps({"content": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    before = _counts()
    response = client.post(path, body, content_type="application/json")
    assert_error_shape(response, 413)
    assert _counts() == before


def test_the_size_bound_is_the_configured_one(settings):
    # AGENTLOOM_MAX_REQUEST_BYTES feeds Django's own bound, which every body read goes through.
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 2 * 1024 * 1024


def test_a_form_encoded_login_over_the_size_bound_is_413(settings):
    response = Client().post("/api/v1/auth/token", "username=a&password=" + "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
                             content_type="application/x-www-form-urlencoded")
    assert_error_shape(response, 413)


@pytest.mark.parametrize("body, content_type", [
    ("{not json", "application/json"),
    ("[]", "application/json"),
    ('"just a string"', "application/json"),
    ("content=hi", "text/plain"),
    ("\x00\x01\x02", "application/octet-stream"),
])
def test_a_malformed_body_is_a_4xx_in_the_error_shape_and_asks_nothing(alice, world, body, content_type):

    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    before = _counts()
    response = client.post(f"/api/v1/runs/{world['run'].pk}/supplements", body, content_type=content_type)
    assert 400 <= response.status_code < 500
    assert_error_shape(response)
    assert _counts() == before


@pytest.mark.parametrize("key", ["sk-é-unicode", "sk-\u00a0nbsp", "sk-\x85nel", "sk-in side"])
def test_a_key_that_cannot_travel_in_a_header_is_a_400_naming_api_key(api, alice, world, key, outbound):
    before = _counts()
    client = api(alice)
    discover = client.post("/api/models/discover", {"provider": "openai_compatible",
                                                    "base_url": "http://127.0.0.1:9/v1", "api_key": key}, format="json")
    create = client.post("/api/v1/model-connections", {"name": "n", "provider": "openai_compatible", "model": "m",
                                                       "base_url": "http://127.0.0.1:9/v1", "api_key": key},
                         format="json")
    patch = client.patch(f"/api/v1/model-connections/{world['connection'].pk}", {"api_key": key}, format="json")
    for response in (discover, create, patch):
        assert "api_key" in assert_error_shape(response, 400).get("fields", {})
        assert key not in response.content.decode()
    assert _counts() == before


# --- deep nesting and huge integers (issue: RecursionError and int-string-limit 500s) -----------

DEEP = "[" * 200_000  # 200 KB of nesting: the JSON parser's recursion runs out long before the end
HUGE_INT = "9" * 4301  # one digit past Python's integer-string conversion limit
JSON_ENDPOINTS = ["/api/v1/sessions", "/api/v1/sessions/import", "/api/models/discover", "/api/v1/model-connections",
                  "/api/v1/agents", "QUESTIONS", "SUPPLEMENTS", "PATCH CONNECTION", "PATCH AGENT"]


def _no_trace_logged(caplog) -> None:
    for record in caplog.records:
        assert record.exc_info is None and "Traceback" not in record.getMessage(), record.getMessage()[:300]


def test_a_deeply_nested_body_to_the_anonymous_login_is_a_400_without_a_trace_in_the_log(caplog):
    caplog.set_level(logging.DEBUG)
    response = Client().post("/api/v1/auth/token", DEEP, content_type="application/json")
    assert assert_error_shape(response, 400)["code"] == "invalid"
    _no_trace_logged(caplog)


@pytest.mark.parametrize("path", JSON_ENDPOINTS)
def test_a_deeply_nested_body_is_a_400_in_the_error_shape_on_every_json_endpoint(api, alice, world, path, caplog,
                                                                                  outbound):
    caplog.set_level(logging.DEBUG)
    method, _, path = path.rpartition(" ") if path.startswith("PATCH") else ("POST", "", path)
    path = {"QUESTIONS": f"/api/v1/sessions/{world['session'].pk}/questions",
            "SUPPLEMENTS": f"/api/v1/runs/{world['run'].pk}/supplements",
            "CONNECTION": f"/api/v1/model-connections/{world['connection'].pk}",
            "AGENT": f"/api/v1/agents/{world['agent'].pk}"}.get(path, path)
    before = _counts()
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    response = getattr(client, method.lower())(path, DEEP, content_type="application/json")
    assert_error_shape(response, 400)
    assert _counts() == before
    _no_trace_logged(caplog)


def test_a_body_nested_past_the_depth_bound_but_within_the_parser_is_a_400(api, alice, world):
    nested = {"agent": world["agent"].pk, "transcript": [{"role": "user", "content": "hi"}]}
    deep: object = "x"
    for _ in range(500):
        deep = [deep]
    nested["transcript"][0]["extra"] = deep
    before = _counts()
    response = api(alice).post("/api/v1/sessions/import", nested, format="json")
    assert_error_shape(response, 400)
    assert _counts() == before


@pytest.mark.parametrize("where", ["last-event-id", "agents-space", "connections-space", "events-after",
                                   "messages-after", "messages-instance", "chat-before"])
def test_an_integer_past_pythons_conversion_limit_is_a_400_not_a_crash(api, alice, world, where, caplog, monkeypatch):
    from sessions import event_stream as stream

    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.5)
    caplog.set_level(logging.DEBUG)
    session, run = world["session"], world["run"]
    client = api(alice)
    if where == "chat-before":
        browser = Client()
        browser.force_login(alice)
        response = browser.get(f"/sessions/{session.pk}/", {"before": HUGE_INT})
        assert response.status_code in (200, 400)
        _no_trace_logged(caplog)
        return
    response = {
        "last-event-id": lambda: client.get(f"/api/v1/runs/{run.pk}/events", HTTP_LAST_EVENT_ID=HUGE_INT),
        "agents-space": lambda: client.get("/api/v1/agents", {"space": HUGE_INT}),
        "connections-space": lambda: client.get("/api/v1/model-connections", {"space": HUGE_INT}),
        "events-after": lambda: client.get(f"/api/v1/runs/{run.pk}/events", {"format": "json", "after": HUGE_INT}),
        "messages-after": lambda: client.get(f"/api/v1/sessions/{session.pk}/messages", {"after": HUGE_INT}),
        "messages-instance": lambda: client.get(f"/api/v1/sessions/{session.pk}/messages", {"instance": HUGE_INT}),
    }[where]()
    assert_error_shape(response, 400)
    _no_trace_logged(caplog)


def test_a_huge_integer_inside_a_json_body_is_a_400(api, alice, world):
    before = _counts()
    response = api(alice).post("/api/v1/sessions", f'{{"agent": {HUGE_INT}}}', content_type="application/json")
    assert_error_shape(response, 400)
    assert _counts() == before
