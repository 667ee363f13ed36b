"""What one person may hold and start (issue #44 item 14, SPEC §11): their files across
every session, the sessions they start in a day (chat, API, import alike), their imports
per hour and at once. Each refusal is a clear 4xx (413, 429) in the one error shape, says
why, and changes nothing."""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions.models import Session, SessionFile
from sessions.services import imports as imports_module
from tests.conftest import token_for
from tests.files.test_attachments import upload
from tests.security.conftest import assert_error_shape

TRANSCRIPT = [{"role": "user", "content": "Book a flight"}, {"role": "assistant", "content": "Done."}]


def client_of(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")


def start(client: Client, agent) -> object:
    return client.post("/api/v1/sessions", {"agent": agent.pk}, content_type="application/json")


def import_(client: Client, agent) -> object:
    return client.post("/api/v1/sessions/import", json.dumps({"agent": agent.pk, "transcript": TRANSCRIPT}),
                       content_type="application/json")


@pytest.mark.django_db
def test_a_persons_files_across_their_sessions_are_bounded_413_and_a_removed_file_frees_room(
        alice, bob, make_session, settings):
    settings.AGENTLOOM_USER_FILES_MAX_BYTES = 2_000
    client = client_of(alice)
    first = upload(client, make_session(alice).pk, "a.txt", b"a" * 1_500)
    assert first.status_code == 201, first.content
    second = make_session(alice)
    refused = upload(client, second.pk, "b.txt", b"b" * 1_000)  # room in its session, none left for alice
    error = assert_error_shape(refused, 413)
    assert error["code"] == "user_files_full"
    assert "each person may keep at most 1 KB" in error["message"]
    assert SessionFile.objects.filter(session=second).count() == 0
    assert upload(client_of(bob), make_session(bob).pk, "c.txt", b"c" * 1_500).status_code == 201  # bob's own room
    assert client.delete(f"/api/v1/files/{first.json()['id']}").status_code == 204
    assert upload(client, second.pk, "b.txt", b"b" * 1_000).status_code == 201


@pytest.mark.django_db
def test_the_sessions_a_person_starts_in_a_day_are_bounded_whichever_way_they_start(alice, bob, agent, version,
                                                                                    settings):
    settings.AGENTLOOM_SESSIONS_PER_DAY = 2
    client = client_of(alice)
    assert start(client, agent).status_code == 201
    assert import_(client, agent).status_code == 201
    chat = Client()
    chat.force_login(alice)
    for refused in (start(client, agent), import_(client, agent),
                    chat.post("/sessions/new/questions", {"agent": agent.pk, "content": "Hello"},
                              content_type="application/json")):
        error = assert_error_shape(refused, 429)
        assert error["code"] == "sessions_per_day"
        assert "started 2 conversations in the last 24 hours" in error["message"]
        assert 86_000 < int(refused["Retry-After"]) <= 86_400  # when the first of the day ages out
    assert Session.objects.filter(user=alice).count() == 2
    assert start(client_of(bob), agent).status_code == 201  # a bound of each person's
    Session.objects.filter(user=alice).update(created_at=timezone.now() - timedelta(days=1, minutes=1))
    assert start(client, agent).status_code == 201  # yesterday's no longer count


@pytest.mark.django_db
def test_imports_are_rate_limited_per_person_with_retry_after(alice, agent, version, monkeypatch):
    from sessions.api import ImportThrottle

    monkeypatch.setattr(ImportThrottle, "rate", "2/hour", raising=False)
    client = client_of(alice)
    assert [import_(client, agent).status_code for _ in range(2)] == [201, 201]
    refused = import_(client, agent)
    assert assert_error_shape(refused, 429)["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1
    assert Session.objects.filter(user=alice).count() == 2


class HeldParse:
    """The transcript parser, held: each call says it started, then waits for the test."""

    def __init__(self, real: Callable) -> None:
        self.real, self.started, self.release = real, threading.Semaphore(0), threading.Event()

    def __call__(self, raw):
        self.started.release()
        assert self.release.wait(60), "the test never released the import"
        return self.real(raw)


@pytest.mark.django_db(transaction=True)
def test_imports_at_once_are_bounded_per_person_429_and_per_process_503(alice, bob, olivia, agent, version,
                                                                         settings, monkeypatch):
    settings.AGENTLOOM_IMPORTS_PER_PERSON = 1
    settings.AGENTLOOM_IMPORTS_MAX = 2
    held = HeldParse(imports_module.transcript_parse)
    monkeypatch.setattr(imports_module, "transcript_parse", held)
    answers: list[int] = []

    def in_thread(user) -> threading.Thread:
        thread = threading.Thread(target=lambda: answers.append(import_(client_of(user), agent).status_code))
        thread.start()
        return thread

    threads = [in_thread(alice)]
    try:
        assert held.started.acquire(timeout=60)
        mine = import_(client_of(alice), agent)
        assert assert_error_shape(mine, 429)["code"] == "too_many_at_once"
        assert int(mine["Retry-After"]) >= 1
        threads.append(in_thread(bob))
        assert held.started.acquire(timeout=60)
        full = import_(client_of(olivia), agent)
        assert assert_error_shape(full, 503)["code"] == "busy"
        assert int(full["Retry-After"]) >= 1
        assert "This transcript was not imported" in full.json()["error"]["message"]
    finally:
        held.release.set()
        for thread in threads:
            thread.join(timeout=60)
    assert answers == [201, 201]
    assert sorted(Session.objects.values_list("user__username", flat=True)) == ["alice", "bob"]
