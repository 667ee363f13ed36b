"""Importing transcripts (RUN-12), including every tau-bench conversation of the corpus."""
from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from sessions.models import Session, SessionMessage, SessionView
from sessions.services.questions import question_ask
from tests.conftest import SHARED
from tests.sessions.helpers import seen_by

pytestmark = pytest.mark.django_db

TAU = SHARED / "corpus" / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def read_all(client, session_id) -> list[dict]:
    items, after = [], 0
    while True:
        page = client.get(f"/api/v1/sessions/{session_id}/messages", {"after": after, "limit": 200}).json()
        items += page["items"]
        if not page["items"]:
            return items
        after = page["next_after"]


@pytest.mark.skipif(not TAU.is_file(), reason="the tau-bench corpus is not beside the repository")
def test_run12_every_tau_bench_conversation_reads_back_identically(agent, version, alice, monkeypatch):
    from sessions.api import ImportThrottle

    monkeypatch.setattr(ImportThrottle, "rate", "1000/hour", raising=False)  # 200 imports by one person, at once
    conversations = json.loads(TAU.read_text())
    client = api(alice)
    for conversation in conversations:
        response = client.post("/api/v1/sessions/import", {"agent": agent.pk, "transcript": conversation},
                               format="json")
        assert response.status_code == 201, response.json()
        items = read_all(client, response.json()["id"])
        assert [item["message"] for item in items] == conversation["traj"]
    assert SessionView.objects.filter(raw_complete=False).count() == len(conversations)


def test_run12_an_imported_session_continues_from_its_view(agent, version, alice):
    transcript = [{"role": "system", "content": "old system prompt"},
                  {"role": "user", "content": "Book a flight"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call.1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "call.1", "name": "search", "content": "3 flights"},
                  {"role": "assistant", "content": "I found 3 flights."}]
    jsonl = "\n".join(json.dumps(m) for m in transcript)
    session_id = api(alice).post("/api/v1/sessions/import", {"agent": agent.pk, "transcript": jsonl},
                                 format="json").json()["id"]
    session = Session.objects.get(pk=session_id)
    assert session.title == "Book a flight"
    run = question_ask(session=session, content="The cheapest one")
    assert seen_by(run) == [("user", "Book a flight"), ("assistant", "calls search"), ("tool", "3 flights"),
                            ("assistant", "I found 3 flights."), ("user", "The cheapest one")]


@pytest.mark.parametrize("transcript, field", [
    ([], "transcript"),
    ([{"role": "user", "content": "hi"}, {"role": "wizard", "content": "x"}], "transcript.1"),
    ([{"role": "tool", "content": "orphan"}], "transcript.0"),
    ([{"role": "user", "content": 42}], "transcript.0"),
    ('{"role": "user", "content": "ok"}\nnot json', "line.2"),
    ({"traj": "nope"}, "transcript"),
])
def test_run12_malformed_input_is_a_400_naming_the_place_and_writes_nothing(agent, version, alice, transcript, field):
    response = api(alice).post("/api/v1/sessions/import", {"agent": agent.pk, "transcript": transcript}, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Session.objects.exists() and not SessionMessage.objects.exists()


def test_run12_the_command_imports_a_jsonl_file_and_reports_problems(agent, version, alice, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"role": "user", "content": "hello"}\n{"role": "assistant", "content": "hi"}\n')
    call_command("import_transcript", str(good), user="alice", agent=agent.pk)
    assert SessionMessage.objects.count() == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hello"}\n{oops\n')
    with pytest.raises(CommandError, match="line.2"):
        call_command("import_transcript", str(bad), user="alice", agent=agent.pk)
    assert SessionMessage.objects.count() == 2
