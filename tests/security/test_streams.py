"""Event streams are bounded (SPEC §11, LOOP-5): a stream ends when its run is finished and
every event was sent, or when its reader may no longer see the run; each person has at
most ``AGENTLOOM_MAX_STREAMS_PER_USER`` open at once; no stream keeps a database
connection between its polls. Real sockets (uvicorn in this process), real clocks, short
bounds: a stream that does not end fails the test by a read time-out, never by hanging.
"""
from __future__ import annotations

import threading
import time

import httpx
import pytest

from sessions.models import Run
from sessions.services.events import event_emit
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.runloop.livesrv import LiveServer, read_sse
from tests.security.conftest import token_for

pytestmark = pytest.mark.django_db(transaction=True)


def _headers(user) -> dict[str, str]:
    return {"Authorization": f"Token {token_for(user)}", "Accept": "text/event-stream"}


@pytest.fixture
def finished_run(alice, make_session) -> Run:
    run = question_ask(session=make_session(alice), content="Hello")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    run_finish(run=run, status=Run.Status.COMPLETED)
    return run


def test_a_stream_that_reconnects_after_the_last_event_of_a_finished_run_ends_at_once(alice, finished_run):
    # What every browser does once a run is over: EventSource reconnects with the last id.
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=_headers(alice), timeout=5) as client:
        started = time.monotonic()
        with client.stream("GET", f"/api/v1/runs/{finished_run.pk}/events") as response:
            frames = read_sse(response.iter_lines())
        assert frames[-1]["event"] == "run_finished"
        with client.stream("GET", f"/api/v1/runs/{finished_run.pk}/events",
                           headers={"Last-Event-ID": frames[-1]["id"]}) as response:
            assert response.status_code == 200
            assert read_sse(response.iter_lines()) == []
        assert time.monotonic() - started < 4


def test_a_stream_of_a_run_that_ended_without_a_finished_event_ends_once_everything_was_sent(alice, make_session):
    run = question_ask(session=make_session(alice), content="Hello")
    event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)  # e.g. a row set by hand, or an old run
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=_headers(alice), timeout=5) as client:
        with client.stream("GET", f"/api/v1/runs/{run.pk}/events") as response:
            frames = read_sse(response.iter_lines())
    assert [frame["event"] for frame in frames] == ["run_started"]


def test_a_stream_follows_a_resumed_run_past_its_earlier_finished_event(alice, finished_run):
    # A resumed run's log holds the first attempt's run_finished; the stream stops there
    # only if the run is still finished.
    Run.objects.filter(pk=finished_run.pk).update(status=Run.Status.RUNNING, attempt=1)

    def second_attempt() -> None:
        time.sleep(0.6)
        event_emit(run_id=finished_run.pk, type="run_started", data={"attempt": 1})
        run = Run.objects.get(pk=finished_run.pk)
        run_finish(run=run, status=Run.Status.COMPLETED)

    worker = threading.Thread(target=second_attempt)
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=_headers(alice), timeout=5) as client:
        worker.start()
        with client.stream("GET", f"/api/v1/runs/{finished_run.pk}/events") as response:
            frames = read_sse(response.iter_lines())
    worker.join(timeout=5)
    assert [frame["event"] for frame in frames] == ["run_started", "run_finished", "run_started", "run_finished"]


def test_an_open_stream_ends_within_one_heartbeat_of_its_reader_leaving_the_space(bob, space, make_session,
                                                                                  monkeypatch):
    from core.spaces.services import membership_remove
    from sessions import event_stream as stream

    monkeypatch.setattr(stream, "HEARTBEAT_SECONDS", 1.0)
    run = question_ask(session=make_session(bob), content="Keep me posted")
    event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=_headers(bob), timeout=5) as client:
        with client.stream("GET", f"/api/v1/runs/{run.pk}/events") as response:
            lines = response.iter_lines()
            assert read_sse(lines, stop_after=1)[0]["event"] == "run_started"
            membership_remove(space=space, user=bob)
            removed = time.monotonic()
            event_emit(run_id=run.pk, type="message_delta", data={"text": "Private after leaving"})
            rest = list(lines)  # the server ends the stream; a read time-out would fail here
            ended = time.monotonic() - removed
    assert ended < 1.0 + 1.0, ended  # one heartbeat, plus a poll's worth of slack
    assert "Private after leaving" not in "\n".join(rest)


def test_open_streams_are_capped_per_person_with_429_and_a_closed_one_frees_its_place(alice, bob, make_session,
                                                                                     settings):
    settings.AGENTLOOM_MAX_STREAMS_PER_USER = 2
    alices = question_ask(session=make_session(alice), content="Long job")
    bobs = question_ask(session=make_session(bob), content="Another job")
    with LiveServer() as server, \
            httpx.Client(base_url=server.url, headers=_headers(alice), timeout=5) as alice_client, \
            httpx.Client(base_url=server.url, headers=_headers(bob), timeout=5) as bob_client:
        url = f"/api/v1/runs/{alices.pk}/events"
        first = alice_client.send(alice_client.build_request("GET", url), stream=True)
        second = alice_client.send(alice_client.build_request("GET", url), stream=True)
        assert (first.status_code, second.status_code) == (200, 200)
        third = alice_client.get(url)
        assert third.status_code == 429 and int(third.headers["Retry-After"]) >= 1
        assert third.json() == {"error": {"code": "rate_limited", "message": third.json()["error"]["message"]}}
        page = alice_client.get(url, params={"format": "json"}, headers={"Accept": "application/json"})
        assert page.status_code == 200  # pages are not streams
        other = bob_client.send(bob_client.build_request("GET", f"/api/v1/runs/{bobs.pk}/events"), stream=True)
        assert other.status_code == 200  # the cap is per person
        other.close()
        first.close()
        deadline = time.monotonic() + 5
        while True:  # the server notices the disconnect and frees the place
            again = alice_client.send(alice_client.build_request("GET", url), stream=True)
            if again.status_code == 200 or time.monotonic() > deadline:
                break
            again.close()
            time.sleep(0.1)
        assert again.status_code == 200
        again.close()
        second.close()


def test_a_poll_leaves_no_database_connection_open_in_its_thread(alice, make_session):
    from django.db import connections

    from sessions.event_stream import stream_poll

    run = question_ask(session=make_session(alice), content="Hello")
    event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    seen: dict = {}

    def poll_in_a_thread() -> None:
        seen["events"], seen["status"] = stream_poll(run_id=run.pk, user_id=alice.pk, after=0)
        seen["open"] = connections["default"].connection is not None

    thread = threading.Thread(target=poll_in_a_thread)
    thread.start()
    thread.join(timeout=10)
    assert [event.type for event in seen["events"]] == ["run_started"] and seen["status"] == "queued"
    assert seen["open"] is False
