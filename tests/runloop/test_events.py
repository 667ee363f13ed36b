"""Events (LOOP-5, LOOP-6): SSE with Last-Event-ID over a real socket, JSON pages, sinks."""
from __future__ import annotations

import json
import threading

import httpx
import pytest

from runloop.loop import run_execute
from sessions.models import Run, RunEvent
from sessions.services.questions import question_ask
from tests.conftest import token_for
from tests.fakes.fake_provider import chat_stream, sequence
from tests.runloop.livesrv import LiveServer, read_sse

pytestmark = pytest.mark.django_db(transaction=True)


def _finished_run(fake_session, strict) -> Run:
    strict.handler = sequence(chat_stream(tool_calls=[{"id": "c", "name": "calculator",
                                                       "arguments": json.dumps({"expression": "6*7"})}]),
                              chat_stream(["The answer ", "is 42."]))
    run = question_ask(session=fake_session(), content="6*7?")
    run_execute(run_id=run.pk)
    return run


def test_loop5_an_sse_client_that_reconnects_with_last_event_id_gets_exactly_the_missing_events(
        fake_session, strict, alice):
    run = _finished_run(fake_session, strict)
    all_seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert len(all_seqs) >= 6
    headers = {"Authorization": f"Token {token_for(alice)}", "Accept": "text/event-stream"}
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=headers, timeout=10) as client:
        with client.stream("GET", f"/api/v1/runs/{run.pk}/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            first = read_sse(response.iter_lines(), stop_after=3)
        with client.stream("GET", f"/api/v1/runs/{run.pk}/events",
                           headers={"Last-Event-ID": first[-1]["id"]}) as response:
            rest = read_sse(response.iter_lines())
    received = [int(frame["id"]) for frame in first + rest]
    assert received == all_seqs  # nothing lost, nothing repeated
    assert rest[-1]["event"] == "run_finished" and json.loads(rest[-1]["data"])["status"] == "completed"


def test_loop5_a_live_stream_follows_a_running_run_to_its_end(fake_session, strict, alice):
    strict.handler = sequence(chat_stream(["Slow ", "and ", "steady."], delay=0.1))
    run = question_ask(session=fake_session(), content="Go")
    headers = {"Authorization": f"Token {token_for(alice)}"}
    worker = threading.Thread(target=run_execute, kwargs={"run_id": run.pk})
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=headers, timeout=15) as client:
        with client.stream("GET", f"/api/v1/runs/{run.pk}/events") as response:
            worker.start()
            frames = read_sse(response.iter_lines())
    worker.join(timeout=15)
    text = "".join(json.loads(f["data"]).get("text", "") for f in frames if f["event"] == "message_delta")
    assert text == "Slow and steady."
    assert frames[0]["event"] == "run_started" and frames[-1]["event"] == "run_finished"


def test_loop5_a_json_page_of_events_follows_its_cursor(fake_session, strict, alice):
    from rest_framework.test import APIClient

    run = _finished_run(fake_session, strict)
    client = APIClient()
    client.force_authenticate(alice)
    page = client.get(f"/api/v1/runs/{run.pk}/events", {"format": "json", "after": 2, "limit": 3}).json()
    assert [item["seq"] for item in page["items"]] == [3, 4, 5] and page["next_after"] == 5
    assert client.get(f"/api/v1/runs/{run.pk}/events", {"format": "json", "after": -1}).status_code == 400


def test_loop6_a_failing_sink_never_stops_the_others_or_the_run(fake_session, strict, extra_sink):
    seen = []

    def broken(event):
        raise ConnectionError("metrics backend down")

    extra_sink(broken)
    extra_sink(lambda event: seen.append(event.type))
    run = _finished_run(fake_session, strict)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert seen[0] == "run_started" and seen[-1] == "run_finished"


def test_the_context_inspector_shows_what_each_call_received(fake_session, strict, alice, mallory):
    from rest_framework.test import APIClient

    run = _finished_run(fake_session, strict)
    client = APIClient()
    client.force_authenticate(alice)
    body = client.get(f"/api/v1/runs/{run.pk}/context").json()
    assert len(body["calls"]) == 2
    second = body["calls"][1]
    assert [m["message"]["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert all(m["estimated_tokens"] > 0 for m in second["messages"])
    client.force_authenticate(mallory)
    assert client.get(f"/api/v1/runs/{run.pk}/context").status_code == 404


def test_loop5_every_way_a_run_ends_closes_its_stream_with_run_finished(fake_session, strict):
    from runloop.reaper import runs_reap_interrupted
    from sessions.services.run_controls import run_cancel
    from sessions.services.runs import run_claim

    session = fake_session()
    queued = question_ask(session=session, content="Never mind")
    run_cancel(run=queued)  # a Stop before any worker took it
    assert list(RunEvent.objects.filter(run=queued).values_list("type", flat=True)) == ["run_finished"]
    running = question_ask(session=session, content="Lost worker")
    run_claim(run_id=running.pk)
    assert runs_reap_interrupted(stale_after=0) == [running.pk]  # a vanished worker
    finished = RunEvent.objects.get(run=running, type="run_finished")
    assert finished.payload["status"] == "interrupted" and finished.payload["error"]["code"] == "interrupted"
