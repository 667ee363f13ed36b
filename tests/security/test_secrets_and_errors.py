"""Secrets stay secret and errors stay bare (SPEC §8 CAT-6, §7 LOOP-8, §9).

A run whose provider echoes the API key everywhere it can — in text, in reasoning, in a
tool call's arguments, in an error body — and then every place a key could surface is
scanned: log records at every level, the event log, the records, the context inspector's
copy of each request, the run row, every API answer and page the owner can read, and
every column of every table in the database. Then server errors are forced on purpose,
with DEBUG off as in production: the answer is the one error shape, never a trace.
"""
from __future__ import annotations

import json
import logging

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.apps import apps
from django.db import connection
from django.test import Client
from django.urls import include, path

from runloop.loop import run_execute
from sessions.models import Instance, ModelCall, Run, RunEvent, SessionMessage
from sessions.services.history import question_ask
from tests.conftest import token_for
from tests.fakes.fake_provider import chat_stream, error
from tests.runloop.conftest import FAKE_KEY, fake, fake_agent_factory, fake_session, strict  # noqa: F401
from tests.runloop.livesrv import LiveServer
from tests.security.conftest import assert_error_shape


async def _drain(chunks) -> bytes:
    return b"".join([chunk async for chunk in chunks])


TRACE_MARKERS = ("Traceback", 'File "', "/work/", "site-packages", "RuntimeError", "boom-")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("echo_in_arguments", [
    False,
    True,
], ids=["echoed-in-text-reasoning-and-errors", "echoed-in-tool-call-arguments"])
def test_the_api_key_appears_in_no_log_event_record_response_page_or_column(fake_session, strict, alice, caplog,
                                                                             echo_in_arguments):
    caplog.set_level(logging.DEBUG)
    echo = f"The key is {FAKE_KEY}."
    expression = f"1+1 {FAKE_KEY}" if echo_in_arguments else "1+1"
    call = {"id": "leak-1", "name": "calculator", "arguments": json.dumps({"expression": expression})}
    replies = iter([
        chat_stream([echo], reasoning=[f"thinking about {FAKE_KEY}"], tool_calls=[call]),
        error(500, f"upstream said {FAKE_KEY}"),
        chat_stream([echo, " Done."]),
    ])
    strict.handler = lambda request: next(replies)
    session = fake_session()
    run = question_ask(session=session, content="Tell me everything")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error

    places: dict[str, str] = {
        "logs": "\n".join(r.getMessage() + repr(r.args) + str(r.exc_text or "") for r in caplog.records),
        "events": json.dumps([e.payload for e in RunEvent.objects.filter(run=run)]),
        "records": json.dumps([m.message for m in SessionMessage.objects.filter(session=session)]),
        "model calls": json.dumps([[c.request, c.usage, c.outcome] for c in ModelCall.objects.filter(run=run)]),
        "run and frames": json.dumps([run.error, run.counters, [i.frame for i in Instance.objects.filter(run=run)]]),
    }
    assert "[REDACTED]" in places["records"] and "[REDACTED]" in places["events"]  # it was there, and was redacted

    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    connection_id = session.version.model_connection_id
    for url in (f"/api/v1/sessions/{session.pk}", f"/api/v1/sessions/{session.pk}/messages", "/api/v1/sessions",
                f"/api/v1/runs/{run.pk}", f"/api/v1/runs/{run.pk}/events?format=json", f"/api/v1/runs/{run.pk}/context",
                "/api/v1/model-connections", f"/api/v1/model-connections/{connection_id}", "/api/v1/agents",
                f"/api/v1/agents/{session.agent_id}", f"/api/v1/agents/{session.agent_id}/versions"):
        response = client.get(url)
        assert response.status_code == 200, url
        places[url] = response.content.decode()
    stream = client.get(f"/api/v1/runs/{run.pk}/events", HTTP_ACCEPT="text/event-stream")
    places["SSE"] = async_to_sync(_drain)(stream.streaming_content).decode()
    browser = Client()
    browser.force_login(alice)
    for page in ("/", f"/sessions/{session.pk}/", f"/admin/models_catalog/modelconnection/{connection_id}/change/"):
        places[page] = browser.get(page).content.decode(errors="replace")
    with connection.cursor() as cursor:
        for model in apps.get_models():
            cursor.execute(f'SELECT * FROM "{model._meta.db_table}"')  # noqa: S608 - table names from the models
            places[f"table {model._meta.db_table}"] = repr(cursor.fetchall())

    leaked = [where for where, text in places.items() if FAKE_KEY in text]
    assert leaked == []
    assert strict.rejections == []


# --- no stack trace in any answer -----------------------------------------------------------------


def _boom(*args, **kwargs):
    raise RuntimeError(f"boom-{FAKE_KEY} at /work/main/secret/path.py")


def boom_page(request):
    _boom()


urlpatterns = [path("boom/", boom_page), path("", include("agentloom.urls"))]
handler500 = "core.api.pages.server_error"
handler404 = "core.api.pages.not_found"


def _assert_bare(text: str) -> None:
    for marker in TRACE_MARKERS:
        assert marker not in text, marker
    assert FAKE_KEY not in text


@pytest.mark.django_db
def test_debug_is_off_as_in_production(settings):
    assert settings.DEBUG is False


@pytest.mark.django_db
def test_a_server_error_in_an_api_view_is_a_bare_500_in_the_error_shape(alice, make_session, monkeypatch):
    import sessions.api

    monkeypatch.setattr(sessions.api, "session_get_for_user", _boom)
    session = make_session(alice)
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    response = client.get(f"/api/v1/sessions/{session.pk}")
    assert assert_error_shape(response, 500)["code"] == "server_error"
    _assert_bare(response.content.decode())


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_server_error_outside_the_api_is_a_bare_page():
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    _assert_bare(response.content.decode())


@pytest.mark.django_db(transaction=True)
def test_over_a_real_socket_errors_carry_no_trace_and_a_broken_stream_just_ends(alice, make_session, monkeypatch):
    import sessions.api_runs
    from sessions import event_stream as stream
    from sessions.services.events import event_emit
    from sessions.services.runs import run_create

    session = make_session(alice)
    run = run_create(session=session)
    event_emit(run_id=run.pk, type="run_started", data={})
    token = token_for(alice)
    reads = {"n": 0}
    real_poll = stream.stream_poll

    def failing_after_first(**kwargs):
        reads["n"] += 1
        if reads["n"] > 1:
            _boom()
        return real_poll(**kwargs)

    monkeypatch.setattr(stream, "stream_poll", failing_after_first)
    monkeypatch.setattr(sessions.api_runs, "run_get_for_user", _boom)
    with LiveServer() as server, httpx.Client(base_url=server.url, timeout=10,
                                             headers={"Authorization": f"Token {token}"}) as client:
        crashed = client.get(f"/api/v1/runs/{run.pk}")  # the patched selector raises
        missing = client.get("/api/v1/no-such-endpoint")
        received: list[str] = []
        with client.stream("GET", f"/api/v1/runs/{run.pk}/events") as sse:  # its stream breaks after one read
            try:
                for line in sse.iter_lines():
                    received.append(line)
            except httpx.RemoteProtocolError:
                pass  # the server dropped the stream: the browser's EventSource reconnects with Last-Event-ID
    assert crashed.status_code == 500 and crashed.json() == {
        "error": {"code": "server_error", "message": "Something went wrong on our side."}}
    assert missing.status_code == 404 and set(missing.json()) == {"error"}
    assert sse.status_code == 200 and "event: run_started" in received
    for text in (crashed.text, missing.text, "\n".join(received)):
        _assert_bare(text)
