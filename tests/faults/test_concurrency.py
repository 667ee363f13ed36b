"""Pressure on one session (RUN-1, LOOP-1, RUN-11, LOOP-5), through the real HTTP API.

PostgreSQL only: SQLite serialises writers, so it cannot show a race either way.
"""
from __future__ import annotations

import threading
import time

import httpx
import pytest

from sessions.api import AskThrottle
from sessions.models import Instance, Run, RunEvent, SessionMessage
from sessions.services.dispatch import dispatcher_set
from sessions.services.events import event_emit
from sessions.services.questions import question_ask
from sessions.services.records import NewRecord, records_append
from sessions.services.runs import run_create
from tests.conftest import token_for
from tests.fakes.fake_provider import chat_stream
from tests.faults.support import FaultWorker, celery_dispatcher, wait_for
from tests.runloop.livesrv import LiveServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


def _at_once(count: int, work) -> list:
    """Run ``work(i)`` in ``count`` threads released together; exceptions are returned."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def target(index: int) -> None:
        try:
            barrier.wait(timeout=20)
            results[index] = work(index)
        except Exception as exc:  # collected and asserted on
            results[index] = exc

    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_fifty_simultaneous_questions_over_http_one_is_accepted_the_rest_get_409(make_session, alice, monkeypatch):
    from agentloom.asgi import door

    monkeypatch.setattr(AskThrottle, "rate", "1000/min", raising=False)  # about the race, not the rate limit
    # Fifty at once from one address: the door's bound per client (32) would refuse some with
    # 429 before they could race; this case is about the race, so the door lets all in.
    monkeypatch.setattr(door, "per_client", 0)
    session = make_session(alice)
    token = token_for(alice)
    with LiveServer() as server:
        def ask(index: int):
            with httpx.Client(base_url=server.url, timeout=30,
                              headers={"Authorization": f"Token {token}"}) as client:
                response = client.post(f"/api/v1/sessions/{session.pk}/questions", json={"content": f"q{index}"})
                return response.status_code, response.json()

        results = _at_once(50, ask)
    failures = [r for r in results if isinstance(r, Exception)]
    assert not failures, failures[:3]
    statuses = sorted(status for status, _ in results)
    assert statuses == [202] + [409] * 49, statuses
    for status, body in results:
        if status == 409:
            assert set(body) == {"error"} and body["error"]["code"] == "run_active"
            assert isinstance(body["error"]["message"], str) and set(body["error"]) <= {"code", "message", "fields"}
    accepted = next(body for status, body in results if status == 202)
    assert list(Run.objects.filter(session=session).values_list("pk", flat=True)) == [accepted["id"]]
    assert list(SessionMessage.objects.filter(session=session).values_list("seq", "kind")) == [(1, "user")]


def test_two_workers_delivered_the_same_run_run_it_once(fake_session, fake, strict, private_redis, tmp_path):
    strict.handler = lambda request: chat_stream(["Only ", "once."], delay=0.3)
    session = fake_session()
    dispatcher_set(lambda run_id: None)
    run = question_ask(session=session, content="Hi")
    dispatch, close = celery_dispatcher(private_redis.url)
    try:
        verbose = {"AGENTLOOM_FAULT_LOGLEVEL": "INFO"}
        with FaultWorker(broker_url=private_redis.url, log_path=tmp_path / "a.log", concurrency=1,
                         env=verbose) as first, \
                FaultWorker(broker_url=private_redis.url, log_path=tmp_path / "b.log", concurrency=1,
                            env=verbose) as second:
            wait_for(lambda: "ready." in first.output() and "ready." in second.output(), timeout=60,
                     what="both workers to be ready")
            dispatch(run.pk)
            dispatch(run.pk)  # the broker redelivers, or someone pressed twice: two deliveries
            wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED, timeout=60,
                     what="the run to complete")
            wait_for(lambda: "received" in first.output() and "received" in second.output(), timeout=20,
                     what="each worker to get one delivery")
            time.sleep(0.5)  # let the losing delivery finish doing nothing
    finally:
        close()
    assert RunEvent.objects.filter(run=run, type="run_started").count() == 1
    assert list(SessionMessage.objects.filter(session=session).order_by("seq").values_list("kind", flat=True)) == [
        "user", "assistant", "run_status"]
    assert len([r for r in fake.requests if r.path.endswith("/chat/completions")]) == 1
    assert strict.rejections == []


def _follow(server_url: str, token: str, path: str, params: dict, total: int, *, key: str) -> list[int]:
    """Page through ``path`` with its cursor until ``total`` items were read (bounded)."""
    seen: list[int] = []
    after = 0
    deadline = time.monotonic() + 20
    with httpx.Client(base_url=server_url, timeout=20, headers={"Authorization": f"Token {token}"}) as client:
        while len(seen) < total and time.monotonic() < deadline:
            page = client.get(path, params={**params, "after": after}).json()
            items = [item[key] for item in page["items"]]
            seen.extend(items)
            after = page["next_after"]
            if not items:
                time.sleep(0.01)
    return seen


def test_readers_paging_during_concurrent_appends_never_see_a_gap_or_a_seq_twice(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)
    main = Instance.objects.get(run=run, key=Instance.MAIN)
    sub = Instance.objects.create(run=run, key="sub-1", parent=main, depth=1)
    token = token_for(alice)
    writers, per_writer = 4, 40
    total = writers * per_writer

    def write(index: int) -> int:
        from django.db import connection

        try:
            written = 0
            while written < per_writer:
                batch = min(1 + (written + index) % 3, per_writer - written)
                records_append(session=session, run=run, instance=sub if index == 0 else main, records=[
                    NewRecord("user", {"role": "user", "content": f"w{index}-{written + i}"}, f"w{index}-{written + i}")
                    for i in range(batch)])
                written += batch
            return written
        finally:
            connection.close()

    with LiveServer() as server:
        path = f"/api/v1/sessions/{session.pk}/messages"

        def work(index: int):
            if index < writers:
                return write(index)
            if index < writers + 3:
                return _follow(server.url, token, path, {"limit": 7}, total, key="seq")
            return _follow(server.url, token, path, {"limit": 5, "instance": "main"}, total - per_writer, key="seq")

        results = _at_once(writers + 4, work)
    failures = [r for r in results if isinstance(r, Exception)]
    assert not failures, failures[:3]
    assert results[:writers] == [per_writer] * writers
    for everything in results[writers:writers + 3]:
        assert everything == list(range(1, total + 1))  # every seq once, in order, no gap ever skipped
    main_seqs = list(SessionMessage.objects.filter(session=session, in_main=True).order_by("seq")
                     .values_list("seq", flat=True))
    assert results[-1] == main_seqs  # a filtered reader skips seqs, but never repeats or reorders
    assert list(SessionMessage.objects.order_by("seq").filter(session=session).values_list("seq", flat=True)) == \
        list(range(1, total + 1))


def test_event_readers_during_concurrent_producers_see_every_event_once_in_order(make_session, alice):
    # Two producers, as in a run: the loop, and the API announcing a supplement.
    session = make_session(alice)
    run = run_create(session=session)
    token = token_for(alice)
    producers, per_producer = 2, 40
    total = producers * per_producer

    def produce(index: int) -> int:
        from django.db import connection

        try:
            for number in range(per_producer):
                event_emit(run_id=run.pk, type="message_delta", data={"text": f"{index}:{number}"})
            return per_producer
        finally:
            connection.close()

    with LiveServer() as server:
        path = f"/api/v1/runs/{run.pk}/events"

        def work(index: int):
            if index < producers:
                return produce(index)
            return _follow(server.url, token, path, {"format": "json", "limit": 9}, total, key="seq")

        results = _at_once(producers + 2, work)
    failures = [r for r in results if isinstance(r, Exception)]
    assert not failures, failures[:3]
    for seqs in results[producers:]:
        assert seqs == list(range(1, total + 1))
    texts = sorted(event.payload["text"] for event in RunEvent.objects.filter(run=run))
    assert texts == sorted(f"{i}:{n}" for i in range(producers) for n in range(per_producer))


def test_many_producers_on_one_run_all_get_their_events_written(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)

    def produce(index: int) -> int:
        from django.db import connection

        try:
            for number in range(25):
                event_emit(run_id=run.pk, type="message_delta", data={"text": f"{index}:{number}"})
            return 25
        finally:
            connection.close()

    results = _at_once(12, produce)
    assert results == [25] * 12, results
    assert list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True)) == list(range(1, 301))
