"""LOOP-8 (amended) for what a person types: a credential the runtime knows, pasted into a
question, a supplement or a title, is stored as ``[REDACTED]`` (issue #44 item 12).

Alice's agent runs on a connection whose key is ``FAKE_KEY``. She pastes that key — as
written, upper-cased and base64'd — into a question (whose first words become the session's
title), a supplement and an imported transcript with its title; the records, the queued
supplement, the run's events, the titles, every API answer and what the model is sent all
hold ``[REDACTED]``, never the key in any form. A key the platform holds for another space
is left as typed: redacting it would tell her it is somebody's key.
"""
from __future__ import annotations

import base64
import json

import pytest
from rest_framework.test import APIClient

from models_catalog.models import ModelConnection
from runloop.loop import run_execute
from sessions.models import Instance, Run, RunEvent, Session, SessionMessage
from tests.fakes.fake_provider import chat_stream
from tests.fakes.mcp_servers import TOKEN
from tests.runloop.conftest import FAKE_KEY, fake, fake_agent_factory, fake_session, strict  # noqa: F401
from tests.security.leaks import leaks
from tests.toolservers.conftest import as_alice, mcp_server, registered, server_agent  # noqa: F401

pytestmark = pytest.mark.django_db

PASTED = (f"Here is my key {FAKE_KEY} — shouting: {FAKE_KEY.upper()} — "
          f"and encoded: {base64.b64encode(FAKE_KEY.encode()).decode()}. Why does it fail?")
MALLORYS_KEY = "sk-mallory-other-space-key-5555"


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_key_pasted_into_a_question_a_supplement_and_a_title_is_stored_redacted(fake_session, fake, strict,
                                                                                   alice):
    session = fake_session()
    client = _client(alice)
    asked = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": PASTED}, format="json")
    assert asked.status_code == 202, asked.content
    run = Run.objects.get(pk=asked.json()["id"])
    supplemented = client.post(f"/api/v1/runs/{run.pk}/supplements", {"content": f"Also: {FAKE_KEY}"},
                               format="json")
    assert supplemented.status_code == 202, supplemented.content

    question = SessionMessage.objects.get(session=session, kind="user").message["content"]
    assert question.count("[REDACTED]") == 3 and question.startswith("Here is my key [REDACTED]"), question
    session.refresh_from_db()
    assert session.title.startswith("Here is my key [REDACTED]"), session.title
    queued = Instance.objects.get(run=run, key=Instance.MAIN).frame["supplements"]
    assert [item["content"] for item in queued] == ["Also: [REDACTED]"]

    strict.handler = lambda request: chat_stream(["Use a new key."])
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error

    places = {
        "records": [m.message for m in SessionMessage.objects.filter(session=session)],
        "events": [e.payload for e in RunEvent.objects.filter(run=run)],
        "title": Session.objects.get(pk=session.pk).title,
        "question answer": asked.json(),
        "supplement answer": supplemented.json(),
        "messages API": client.get(f"/api/v1/sessions/{session.pk}/messages").json(),
        "session API": client.get(f"/api/v1/sessions/{session.pk}").json(),
        "sessions API": client.get("/api/v1/sessions").json(),
        "what the model was sent": [request.json for request in fake.requests],
    }
    assert leaks(places, FAKE_KEY) == {}
    assert any("[REDACTED]" in json.dumps(body) for body in places["what the model was sent"])


def test_a_key_in_an_imported_transcript_and_its_title_is_stored_redacted(fake_session, alice):
    agent_id = fake_session().agent_id
    transcript = [{"role": "user", "content": f"Connect with {FAKE_KEY}"},
                  {"role": "assistant", "content": f"Using {FAKE_KEY.upper()} now."}]
    imported = _client(alice).post("/api/v1/sessions/import", {
        "agent": agent_id, "transcript": json.dumps(transcript), "title": f"Debugging {FAKE_KEY}"}, format="json")
    assert imported.status_code == 201, imported.content
    session = Session.objects.get(pk=imported.json()["id"])
    assert session.title == "Debugging [REDACTED]"
    assert [m.message["content"] for m in SessionMessage.objects.filter(session=session).order_by("seq")] == [
        "Connect with [REDACTED]", "Using [REDACTED] now."]
    assert leaks({"import answer": imported.json(),
                  "messages API": _client(alice).get(f"/api/v1/sessions/{session.pk}/messages").json()},
                 FAKE_KEY) == {}


def test_a_tool_servers_token_pasted_into_a_question_is_stored_redacted(server_agent, alice):
    session = server_agent(["tests.echo"])
    asked = _client(alice).post(f"/api/v1/sessions/{session.pk}/questions",
                                {"content": f"The server wants Bearer {TOKEN}"}, format="json")
    assert asked.status_code == 202, asked.content
    stored = SessionMessage.objects.get(session=session, kind="user").message["content"]
    assert stored == "The server wants Bearer [REDACTED]"
    assert Session.objects.get(pk=session.pk).title == stored


def test_a_key_of_another_space_is_left_as_typed(fake_session, alice, mallory_space):
    ModelConnection.objects.create(space=mallory_space, name="Hers", provider="openai_compatible",
                                   base_url="http://127.0.0.1:9/v1", api_key=MALLORYS_KEY, model="m",
                                   context_window=8_192, max_output_tokens=1_024)
    session = fake_session()
    asked = _client(alice).post(f"/api/v1/sessions/{session.pk}/questions",
                                {"content": f"Is {MALLORYS_KEY} a key?"}, format="json")
    assert asked.status_code == 202, asked.content
    assert SessionMessage.objects.get(session=session, kind="user").message["content"] == f"Is {MALLORYS_KEY} a key?"
