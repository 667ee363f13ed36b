"""A question and its answer in one request (issue #29): ``POST …/questions`` with
``Accept: text/event-stream`` answers 202 with the run's events, as ``GET /runs/{id}/events``
sends them from the start, and ``Location`` naming the run. Over a real socket, a worker
thread answering each run as it is dispatched."""
from __future__ import annotations

import json
import threading

import httpx
import pytest

from runloop.loop import run_execute
from sessions.models import Run, RunEvent, SessionMessage
from tests.conftest import token_for
from tests.fakes.fake_provider import chat_stream, sequence
from tests.runloop.livesrv import LiveServer, read_sse

pytestmark = pytest.mark.django_db(transaction=True)

STREAM = {"Accept": "text/event-stream"}


@pytest.fixture
def worker():
    """Each run dispatched is answered by a thread of its own, as a worker would."""
    from django.db import connections

    from runloop.tasks import dispatch_run
    from sessions.services.dispatch import dispatcher_set

    threads: list[threading.Thread] = []

    def answer(run_id: int) -> None:
        try:
            run_execute(run_id=run_id)
        finally:
            connections.close_all()  # this thread's own: the test database is dropped after the test

    def dispatch(run_id: int) -> None:
        thread = threading.Thread(target=answer, args=(run_id,))
        threads.append(thread)
        thread.start()

    dispatcher_set(dispatch)
    yield threads
    dispatcher_set(dispatch_run)
    for thread in threads:
        thread.join(timeout=30)


def _client(server, user) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token_for(user)}"}, timeout=15)


def test_a_question_asked_for_its_events_gets_its_answer_in_the_response(fake_session, strict, alice, worker):
    strict.handler = sequence(chat_stream(["Asked ", "and ", "answered."], delay=0.05))
    session = fake_session()
    with LiveServer() as server, _client(server, alice) as client:
        with client.stream("POST", f"/api/v1/sessions/{session.pk}/questions", json={"content": "One go?"},
                           headers=STREAM) as response:
            assert response.status_code == 202
            assert response.headers["content-type"].startswith("text/event-stream")
            location = response.headers["location"]
            frames = read_sse(response.iter_lines())
    run = Run.objects.get(session=session)
    assert location == f"/api/v1/runs/{run.pk}"
    assert [int(frame["id"]) for frame in frames] == list(
        RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert frames[0]["event"] == "run_started" and frames[-1]["event"] == "run_finished"
    assert json.loads(frames[-1]["data"])["status"] == "completed"
    text = "".join(json.loads(f["data"]).get("text", "") for f in frames if f["event"] == "message_delta")
    assert text == "Asked and answered."
    assert list(SessionMessage.objects.filter(run=run).order_by("seq").values_list("kind", flat=True)) == [
        "user", "assistant", "run_status"]


def test_a_streamed_answer_cut_off_is_resumed_with_last_event_id_without_loss_or_repeat(fake_session, strict, alice,
                                                                                        worker):
    strict.handler = sequence(chat_stream(tool_calls=[{"id": "c", "name": "calculator",
                                                       "arguments": json.dumps({"expression": "6*7"})}]),
                              chat_stream(["It is ", "42."], delay=0.05))
    session = fake_session()
    with LiveServer() as server, _client(server, alice) as client:
        with client.stream("POST", f"/api/v1/sessions/{session.pk}/questions", json={"content": "6*7?"},
                           headers=STREAM) as response:
            run_path = response.headers["location"]
            first = read_sse(response.iter_lines(), stop_after=2)  # and the connection drops
        with client.stream("GET", f"{run_path}/events", headers={"Last-Event-ID": first[-1]["id"]}) as response:
            rest = read_sse(response.iter_lines())
    run = Run.objects.get(session=session)
    assert [int(frame["id"]) for frame in first + rest] == list(
        RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert rest[-1]["event"] == "run_finished"


def test_without_asking_for_events_the_answer_is_the_queued_run_as_before(fake_session, alice, dispatched_runs):
    session = fake_session()
    with LiveServer() as server, _client(server, alice) as client:
        response = client.post(f"/api/v1/sessions/{session.pk}/questions", json={"content": "Later"})
    assert response.status_code == 202 and response.headers["content-type"].startswith("application/json")
    assert response.json()["id"] == dispatched_runs[0] and response.json()["status"] == "queued"


def test_at_the_stream_limit_a_streamed_question_is_refused_with_429_and_nothing_is_asked(
        fake_session, alice, settings, dispatched_runs):
    settings.AGENTLOOM_MAX_STREAMS_PER_USER = 0
    session = fake_session()
    with LiveServer() as server, _client(server, alice) as client:
        refused = client.post(f"/api/v1/sessions/{session.pk}/questions", json={"content": "Now?"}, headers=STREAM)
        assert refused.status_code == 429 and refused.headers["content-type"].startswith("application/json")
        assert refused.json()["error"]["code"] and "Retry-After" in refused.headers
        assert not Run.objects.filter(session=session).exists() and dispatched_runs == []
        # The same question, not streamed, is still taken.
        assert client.post(f"/api/v1/sessions/{session.pk}/questions", json={"content": "Now?"}).status_code == 202


@pytest.mark.parametrize("body, status", [({"content": ""}, 400), ({"content": "x", "files": [10**9]}, 400)])
def test_a_bad_streamed_question_is_a_json_error_and_changes_nothing(fake_session, alice, dispatched_runs, body,
                                                                     status):
    session = fake_session()
    with LiveServer() as server, _client(server, alice) as client:
        response = client.post(f"/api/v1/sessions/{session.pk}/questions", json=body, headers=STREAM)
    assert response.status_code == status and response.headers["content-type"].startswith("application/json")
    assert "error" in response.json()
    assert not Run.objects.filter(session=session).exists() and dispatched_runs == []


def test_while_a_run_is_active_a_streamed_question_gets_409_and_its_stream_place_back(
        fake_session, alice, settings, dispatched_runs):
    from sessions.services.questions import question_ask

    settings.AGENTLOOM_MAX_STREAMS_PER_USER = 1
    session = fake_session()
    question_ask(session=session, content="First")  # queued, never answered here
    with LiveServer() as server, _client(server, alice) as client:
        for _ in range(2):  # the place taken for the refused question was given back
            response = client.post(f"/api/v1/sessions/{session.pk}/questions", json={"content": "Second"},
                                   headers=STREAM)
            assert response.status_code == 409, response.text
    assert Run.objects.filter(session=session).count() == 1
