"""Deep nesting however it arrives, and odd ids in the console's queries (SPEC §11).

The JSON parser bounds a JSON body; these are the other ways nesting gets in: JSON text
inside a JSON string (an imported transcript), in a form or multipart field that a JSON
field decodes (``context_policy=[[[…``), and the console's lists and pages, where a
number no id can be (``²``, 25 digits) must get the page with a message, never a 500.
"""
from __future__ import annotations

import json
import logging

import pytest
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.api.parsers import MAX_JSON_DEPTH
from sessions.models import Run, Session, SessionMessage
from tests.security.conftest import assert_error_shape, token_for

pytestmark = pytest.mark.django_db

OPENERS = "[" * 50_000


def _nested_message(depth: int) -> str:
    """One user message carrying a field nested ``depth`` levels, as JSON text."""
    return '{"role": "user", "content": "hi", "extra": ' + "[" * depth + "]" * depth + "}"


def _no_trace_logged(caplog) -> None:
    for record in caplog.records:
        assert record.exc_info is None and "Traceback" not in record.getMessage(), record.getMessage()[:300]


@pytest.fixture
def client(alice, agent, version) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")


def _counts() -> tuple[int, int, int]:
    return Session.objects.count(), Run.objects.count(), SessionMessage.objects.count()


@pytest.mark.parametrize("transcript", [
    OPENERS,
    "[" + _nested_message(900) + "]",
    _nested_message(900),  # JSONL: one message per line
    _nested_message(10) + "\n" + _nested_message(900),
], ids=["50k-openers", "900-deep-json", "900-deep-jsonl", "900-deep-second-line"])
def test_an_imported_transcript_nested_too_deep_is_a_400_and_imports_nothing(client, agent, transcript, caplog):
    caplog.set_level(logging.DEBUG)
    before = _counts()
    response = client.post("/api/v1/sessions/import", json.dumps({"agent": agent.pk, "transcript": transcript}),
                           content_type="application/json")
    error = assert_error_shape(response, 400)
    assert f"nested more than {MAX_JSON_DEPTH} levels deep" in error["message"]
    assert _counts() == before
    _no_trace_logged(caplog)


def test_a_transcript_nested_within_the_bound_still_imports(client, agent):
    transcript = "[" + _nested_message(MAX_JSON_DEPTH - 3) + "]"
    response = client.post("/api/v1/sessions/import", json.dumps({"agent": agent.pk, "transcript": transcript}),
                           content_type="application/json")
    assert response.status_code == 201, response.content[:300]


def _form_bodies(fields: dict[str, str]) -> list[tuple[str, bytes | str]]:
    from urllib.parse import urlencode

    return [(MULTIPART_CONTENT, encode_multipart(BOUNDARY, fields)),
            ("application/x-www-form-urlencoded", urlencode(fields))]


@pytest.mark.parametrize("kind", ["multipart", "form"])
@pytest.mark.parametrize("field", ["context_policy", "limits", "tool_overrides"])
def test_an_agent_patch_with_deep_json_in_a_form_field_is_a_400_naming_it(client, agent, kind, field, caplog):
    caplog.set_level(logging.DEBUG)
    content_type, body = dict(zip(["multipart", "form"], _form_bodies({field: OPENERS})))[kind]
    policy_before = agent.context_policy
    response = client.generic("PATCH", f"/api/v1/agents/{agent.pk}", body, content_type=content_type)
    assert field in assert_error_shape(response, 400).get("fields", {})
    agent.refresh_from_db()
    assert agent.context_policy == policy_before
    _no_trace_logged(caplog)


def test_an_agent_patch_with_json_in_a_form_field_within_the_bound_still_works(client, agent):
    content_type, body = _form_bodies({"context_policy": json.dumps({"user_turns": 7})})[1]
    response = client.generic("PATCH", f"/api/v1/agents/{agent.pk}", body, content_type=content_type)
    assert response.status_code == 200, response.content[:300]
    agent.refresh_from_db()
    assert agent.context_policy["user_turns"] == 7


@pytest.mark.parametrize("kind", ["multipart", "form"])
def test_an_import_as_a_form_with_a_deep_transcript_is_a_400(client, agent, kind, caplog):
    caplog.set_level(logging.DEBUG)
    content_type, body = dict(zip(["multipart", "form"],
                                  _form_bodies({"agent": str(agent.pk), "transcript": OPENERS})))[kind]
    before = _counts()
    response = client.generic("POST", "/api/v1/sessions/import", body, content_type=content_type)
    assert "transcript" in assert_error_shape(response, 400).get("fields", {})
    assert _counts() == before
    _no_trace_logged(caplog)


UNITS = ["[", "{\"a\":", "[{\"a\":", " [", "[1,"]
CONTENT_TYPES = ["json-string", "multipart", "form"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(unit=st.sampled_from(UNITS), depth=st.integers(min_value=1, max_value=3_000),
       content_type=st.sampled_from(CONTENT_TYPES), target=st.sampled_from(["import", "agent"]))
def test_nesting_in_any_parser_content_type_is_never_a_5xx(client, agent, unit, depth, content_type, target):
    text = unit * depth
    if target == "import":
        method, path, fields = "POST", "/api/v1/sessions/import", {"agent": str(agent.pk), "transcript": text}
    else:
        method, path, fields = "PATCH", f"/api/v1/agents/{agent.pk}", {"context_policy": text}
    if content_type == "json-string":
        body: bytes | str = json.dumps({**fields, "agent": agent.pk} if target == "import" else fields)
        mime = "application/json"
    else:
        mime, body = dict(zip(["multipart", "form"], _form_bodies(fields)))[content_type]
    response = client.generic(method, path, body, content_type=mime)
    assert response.status_code < 500, (response.status_code, response.content[:200])
    if response.status_code >= 400:
        assert_error_shape(response)


# --- the console -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["²", "9" * 25, "١٢"])
def test_an_instance_that_is_no_id_gets_the_records_page_with_a_message(console, alice, make_session, value, caplog):
    caplog.set_level(logging.DEBUG)
    session = make_session(alice)
    page = console.get(f"/admin/agent_sessions/session/{session.pk}/records/", {"instance": value})
    assert page.status_code == 400
    assert "instance: Use main or a sub-instance id of this session." in page.content.decode()
    _no_trace_logged(caplog)


@pytest.mark.parametrize("path, key", [
    ("/admin/agent_sessions/modelcall/", "run"),
    ("/admin/agent_sessions/runevent/", "run"),
    ("/admin/agent_sessions/run/", "session"),
    ("/admin/agent_sessions/sessionmessage/", "session"),
    ("/admin/agent_sessions/modelcall/", "run__id__in"),
])
@pytest.mark.parametrize("value", ["9" * 25, "²", "1,99999999999999999999"])
def test_a_console_list_filtered_by_a_number_no_id_can_be_shows_the_list_and_says_why(console, path, key, value,
                                                                                     caplog):
    caplog.set_level(logging.DEBUG)
    response = console.get(path, {key: value, "o": "1"})
    assert response.status_code == 302 and response["Location"] == f"{path}?o=1"
    page = console.get(response["Location"])
    assert page.status_code == 200
    assert f"The filter {key}=" in page.content.decode() and "is not an id" in page.content.decode()
    _no_trace_logged(caplog)


def test_a_console_list_filter_naming_a_real_id_is_kept(console, alice, make_session):
    session = make_session(alice)
    assert console.get("/admin/agent_sessions/run/", {"session": str(session.pk)}).status_code == 200


# --- tool-call arguments: text that pages decode to show it indented ------------------------------

def _with_arguments(arguments: str) -> list[dict]:
    return [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "calculator", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "4"}]


def test_an_import_whose_tool_call_arguments_nest_too_deep_is_a_400_naming_the_message(client, agent):
    before = _counts()
    response = client.post("/api/v1/sessions/import", json.dumps({"agent": agent.pk, "transcript": _with_arguments(
        OPENERS)}), content_type="application/json")
    error = assert_error_shape(response, 400)
    assert error["fields"] == {"transcript.1": f"tool call arguments nested more than {MAX_JSON_DEPTH} levels deep"}
    assert _counts() == before


def test_malformed_tool_call_arguments_still_import_as_the_old_system_had_them(client, agent):
    response = client.post("/api/v1/sessions/import", json.dumps({"agent": agent.pk, "transcript": _with_arguments(
        '{"a": 1')}), content_type="application/json")
    assert response.status_code == 201, response.content[:300]


def test_the_chat_shows_a_step_whose_stored_arguments_nest_too_deep_as_they_came(client, agent, alice, caplog):
    # A model can write such arguments too: the page shows them as text instead of failing.
    caplog.set_level(logging.DEBUG)
    response = client.post("/api/v1/sessions/import", json.dumps({"agent": agent.pk, "transcript": _with_arguments(
        "{}")}), content_type="application/json")
    session_id = response.json()["id"]
    record = SessionMessage.objects.get(session_id=session_id, kind="assistant")
    message = record.message
    message["tool_calls"][0]["function"]["arguments"] = OPENERS
    SessionMessage.objects.filter(pk=record.pk).update(message=message)
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/sessions/{session_id}/")
    assert page.status_code == 200 and "[[[[" in page.content.decode()
    _no_trace_logged(caplog)


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_every_json_field_a_request_fills_is_bounded():
    # A new input serializer with a plain JSONField would decode form text unbounded again.
    import django.urls
    from rest_framework import serializers

    from core.api.fields import BoundedJSONField

    django.urls.get_resolver().url_patterns  # noqa: B018  (imports every API module)
    inputs = [cls for cls in _subclasses(serializers.Serializer) if cls.__name__.endswith("In")]
    assert len(inputs) >= 5, [cls.__name__ for cls in inputs]
    plain = []
    for cls in inputs:
        for name, field in cls().fields.items():
            inner = getattr(field, "child", field)
            if isinstance(inner, serializers.JSONField) and not isinstance(inner, BoundedJSONField):
                plain.append(f"{cls.__module__}.{cls.__name__}.{name}")
    assert plain == []
