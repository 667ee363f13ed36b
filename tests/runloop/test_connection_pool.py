"""Bounded database connections (SPEC §11, core/db_pool.py) on PostgreSQL.

Each case shrinks a process's pool far below what it serves, and checks what a person
sees and what the server holds: a request that finds the pool full is a 503 with
Retry-After that changed nothing; 200 event streams open at once are served by a pool of
five; a worker running 16 runs at once through a pool of six finishes them all. The
connections are counted by PostgreSQL itself (``pg_stat_activity``), by the
``application_name`` the pool connects with.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import psycopg
import pytest
from django.db import connections, transaction
from django.test import Client
from rest_framework.test import APIClient

from core.db_pool import pool_options
from runloop.tasks import dispatch_run
from sessions.models import Run, SessionMessage
from sessions.services.dispatch import dispatcher_set
from sessions.services.events import event_emit
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.conftest import token_for
from tests.fakes.responses import chat_stream
from tests.runloop.livesrv import LiveServer
from tests.runloop.worker import Worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


def _server_dsn() -> str:
    db = connections["default"].settings_dict
    return (f"host={db.get('HOST') or '127.0.0.1'} port={db.get('PORT') or 5432} "
            f"user={db.get('USER') or 'postgres'} dbname=postgres")


def _connections_named(name: str) -> int:
    """How many server connections a pool named ``name`` holds, as PostgreSQL counts them
    (a connection of its own, outside every pool)."""
    with psycopg.connect(_server_dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]).fetchone()
    return int(row[0]) if row else 0


@contextmanager
def pool_of(size: int, *, timeout: float, name: str, min_size: int = 1) -> Iterator[None]:
    """This process borrows from a pool of ``size`` connections named ``name`` meanwhile."""
    connection = connections["default"]
    options = connection.settings_dict["OPTIONS"]
    saved = {key: options.get(key) for key in ("pool", "application_name")}
    connections.close_all()
    connection.close_pool()
    options.update(pool=pool_options(max_size=size, min_size=min_size, timeout=timeout, name=name),
                   application_name=name)
    try:
        yield
    finally:
        connections.close_all()
        connection.close_pool()
        for key, value in saved.items():
            if value is None:
                options.pop(key, None)
            else:
                options[key] = value


class Sampler:
    """``with Sampler(name) as counts:`` — PostgreSQL's count of ``name``'s connections,
    read every 50 ms from a thread of its own while the block runs."""

    def __init__(self, name: str) -> None:
        self.name, self.counts = name, []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample)

    def _sample(self) -> None:
        while not self.done.is_set():
            self.counts.append(_connections_named(self.name))
            self.done.wait(0.05)

    def __enter__(self) -> list[int]:
        self.thread.start()
        return self.counts

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(timeout=30)


class Holders:
    """Threads that each borrow a connection and keep it inside a transaction until released."""

    def __init__(self, count: int) -> None:
        self.holding = threading.Semaphore(0)
        self.release = threading.Event()
        self.threads = [threading.Thread(target=self._hold) for _ in range(count)]

    def _hold(self) -> None:
        try:
            with transaction.atomic(), connections["default"].cursor() as cursor:
                cursor.execute("SELECT 1")
                self.holding.release()
                self.release.wait(timeout=120)
        finally:
            connections.close_all()

    def __enter__(self) -> Holders:
        for thread in self.threads:
            thread.start()
        for _ in self.threads:
            assert self.holding.acquire(timeout=60), "a holder never got its connection"
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(timeout=60)


def test_a_request_that_finds_the_pool_full_is_a_503_with_retry_after_and_changes_nothing(alice, make_session):
    session = make_session(alice)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    page = Client(raise_request_exception=False)
    page.force_login(alice)
    url = f"/api/v1/sessions/{session.pk}/questions"
    with pool_of(2, timeout=0.3, name="agentloom-test-full"):
        with Holders(2):
            connections["default"].close()  # this thread holds none either: the pool is full
            refused = api.post(url, {"content": "Are you there?"}, format="json")
            chat = page.get("/")
            assert _connections_named("agentloom-test-full") == 2
        assert refused.status_code == 503, refused.content
        assert refused.json() == {"error": {"code": "busy", "message": refused.json()["error"]["message"]}}
        assert "nothing was changed" in refused.json()["error"]["message"]
        assert int(refused["Retry-After"]) >= 1
        assert chat.status_code == 503 and int(chat["Retry-After"]) >= 1
        assert "busy" in chat.content.decode() and "Traceback" not in chat.content.decode()
        assert not Run.objects.filter(session=session).exists()
        assert not SessionMessage.objects.filter(session=session).exists()
        # The same request once a connection is free: the refusal was the pool's alone.
        assert api.post(url, {"content": "Are you there?"}, format="json").status_code == 202
    assert SessionMessage.objects.filter(session=session, kind="user").count() == 1


async def _follow_all(url: str, token: str, paths: list[str], opened: asyncio.Event) -> list[list[str]]:
    """Open a stream of each path at once; each returns the event names it saw, to the end."""
    count = len(paths)
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=0)
    headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits,
                                 timeout=httpx.Timeout(120, connect=60)) as client:
        started = 0

        async def follow(path: str) -> list[str]:
            nonlocal started
            names: list[str] = []
            async with client.stream("GET", path) as response:
                assert response.status_code == 200, await response.aread()
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        names.append(line.removeprefix("event: "))
                        if names == ["run_started"]:
                            started += 1
                            if started == count:
                                opened.set()
            return names

        return await asyncio.gather(*(follow(path) for path in paths))


def test_two_hundred_event_streams_open_at_once_hold_no_more_connections_than_the_pool(alice, make_session,
                                                                                        settings, monkeypatch):
    from agentloom.asgi import door

    settings.AGENTLOOM_MAX_STREAMS_PER_USER = 1000
    # All 200 arrive at once; the door's bound on waiting requests (64) would shed some
    # with 503 — this case is about what the streams hold once open, so the door lets all in.
    monkeypatch.setattr(door, "limit", 1000)
    monkeypatch.setattr(door, "per_client", 0)  # and all 200 come from one address: no bound per client either
    runs = [question_ask(session=make_session(alice), content=f"Question {n}") for n in range(20)]
    for run in runs:
        event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    token = token_for(alice)
    paths = [f"/api/v1/runs/{runs[n % 20].pk}/events" for n in range(200)]
    with pool_of(5, timeout=60, name="agentloom-test-streams"), LiveServer() as server:
        connections["default"].close()

        async def scenario() -> list[list[str]]:
            opened = asyncio.Event()
            following = asyncio.ensure_future(_follow_all(server.url, token, paths, opened))
            await asyncio.wait([following, asyncio.ensure_future(opened.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
            assert not following.done(), following.result()  # every stream is open and has read
            await asyncio.to_thread(_finish, runs)
            return await following

        with Sampler("agentloom-test-streams") as counts:
            seen = asyncio.run(scenario())
    assert len(seen) == 200
    assert all(names == ["run_started", "run_finished"] for names in seen), {tuple(n) for n in seen}
    # The pool keeps at least one connection once opened, so the count did see it.
    assert counts and 1 <= max(counts) <= 5, max(counts)


def _finish(runs: list[Run]) -> None:
    try:
        for run in runs:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
            run.refresh_from_db()
            run_finish(run=run, status=Run.Status.COMPLETED)
    finally:
        connections.close_all()


def test_a_worker_running_sixteen_runs_at_once_never_holds_more_than_its_pool(fake_session, strict):
    strict.handler = lambda request: chat_stream(["Still ", "here."], delay=0.2)
    session = fake_session()
    dispatcher_set(dispatch_run)
    runs = [question_ask(session=session if n == 0 else fake_session(), content=f"Q{n}") for n in range(16)]
    ids = [run.pk for run in runs]
    # Sixteen at once: one person's bound on running runs is lifted, this is about the pool.
    env = {"AGENTLOOM_WORKER_DB_POOL_MAX": "6", "AGENTLOOM_MAX_RUNNING_RUNS_PER_USER": "0"}
    with Worker(concurrency=16, env=env), Sampler("agentloom-worker") as counts:
        wait_for(lambda: not Run.objects.filter(pk__in=ids, status__in=Run.ACTIVE_STATUSES).exists(),
                 timeout=180, interval=0.2)
    ended = list(Run.objects.filter(pk__in=ids).values_list("status", "error"))
    assert {status for status, _ in ended} == {"completed"}, ended
    assert counts and 1 <= max(counts) <= 6, max(counts)
    assert strict.rejections == []


def test_parameters_travel_apart_from_the_sql_and_a_repeated_statement_is_prepared():
    """Issue #29: bytes (every encrypted record and event) are not hex-quoted into the SQL
    in Python, and what a connection runs often is planned once by PostgreSQL."""
    connection = connections["default"]
    with connection.cursor() as cursor:
        for _ in range(6):
            cursor.execute("SELECT length(%s::bytea)", [b"\x00\x01\x02"])
            assert cursor.fetchone() == (3,)
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%length($1::bytea)%"])
        assert cursor.fetchone() == (1,)


def test_through_a_transaction_pooler_nothing_is_prepared():
    """A prepared statement lives on one server connection; PgBouncer in transaction mode
    may hand the next transaction another (tests/faults/test_pgbouncer.py runs the cases)."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    read = ("import django, json; django.setup(); from django.conf import settings; "
            "db = settings.DATABASES['default']; "
            "print(json.dumps([db['OPTIONS'].get('server_side_binding'), db['OPTIONS'].get('prepare_threshold'), "
            "db['DISABLE_SERVER_SIDE_CURSORS']]))")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test"}
    for pooler, expected in (("true", [True, None, True]), ("false", [True, 5, False])):
        done = subprocess.run([sys.executable, "-c", read], cwd=REPO, capture_output=True, text=True, check=True,
                              env={**env, "AGENTLOOM_DB_TRANSACTION_POOLER": pooler}, timeout=120)
        assert json.loads(done.stdout.strip().splitlines()[-1]) == expected, done.stderr[-2000:]
