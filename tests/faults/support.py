"""Helpers of the fault suite: record ledgers, a private Redis, a fault-injecting worker.

Everything here talks to 127.0.0.1 only, and every process it starts is stopped by the
test that started it (context managers), with bounded waits.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sessions.models import Run, RunEvent, Session, SessionMessage
from tests.conftest import REPO

Ledger = list[tuple[int, str, str]]


def ledger(session: Session) -> Ledger:
    """The session's records as (seq, kind, entry_key), in seq order."""
    return list(SessionMessage.objects.filter(session=session).order_by("seq").values_list("seq", "kind", "entry_key"))


def assert_appended(session: Session, before: Ledger, appended: list[tuple[str, str]]) -> Ledger:
    """Records after == records before + exactly ``appended`` [(kind, entry_key)], gap-free."""
    after = ledger(session)
    expected = before + [(len(before) + offset + 1, kind, key) for offset, (kind, key) in enumerate(appended)]
    assert after == expected, f"\nbefore:   {before}\nexpected: {expected}\nafter:    {after}"
    return after


def event_seqs_are_gap_free(run: Run) -> list[str]:
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate: Callable[[], object], *, timeout: float = 30.0, interval: float = 0.05,
             what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout} s")


# --- a private Redis -------------------------------------------------------------------------------


class RedisServer:
    """A throw-away ``redis-server`` on a free loopback port, which a test may kill and restart.

    Never the machine's Redis: other people's workers and tests use that one.
    """

    def __init__(self, workdir: Path) -> None:
        self.binary = shutil.which("redis-server")
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        assert self.binary, "redis-server is not installed"
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.ping, timeout=10, what="redis-server start")
        return self

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_connect_timeout=0.2, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-conversation, like a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def celery_dispatcher(broker_url: str):
    """A dispatcher that queues runs on ``broker_url`` (returns (dispatch, close))."""
    from celery import Celery

    sender = Celery("agentloom-fault-sender", broker=broker_url, set_as_current=False)
    sender.conf.broker_connection_retry_on_startup = True

    def dispatch(run_id: int) -> None:
        sender.send_task("agentloom.run_execute", args=[run_id])

    return dispatch, sender.close


# --- a worker process with fault hooks ------------------------------------------------------------


WORKER_APP_NAME = "agentloom-fault-worker"


def worker_database_url() -> str:
    """The test database as a ``DATABASE_URL`` for a process started by a test."""
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return (f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
            f"?application_name={WORKER_APP_NAME}")


class FaultWorker:
    """A real Celery worker (``tests.faults.worker_main``) on the test database and a private broker.

    ``kill_at="tool_started"`` (or ``"message_delta#2"``) makes the process SIGKILL itself
    right after that event is committed; ``kill_in_tool=True`` makes the ``fault_probe``
    tool kill it after its side effect. Output goes to a file, never to an unread pipe.
    """

    def __init__(self, *, broker_url: str, log_path: Path, kill_at: str | None = None, kill_in_tool: bool = False,
                 concurrency: int = 2, env: dict[str, str] | None = None) -> None:
        environment = dict(os.environ)
        environment.update({
            "DJANGO_SETTINGS_MODULE": "agentloom.settings_test",
            "DATABASE_URL": worker_database_url(),
            "REDIS_URL": broker_url,
            "AGENTLOOM_RETRY_BASE_DELAY": "0.01",
            "AGENTLOOM_FAULT_WORKER": "1",
        })
        for name in ("AGENTLOOM_FAULT_KILL_AT", "AGENTLOOM_FAULT_KILL_IN_TOOL", "AGENTLOOM_FAULT_KILL_BEFORE_CLAIM",
                     "AGENTLOOM_FAULT_KILL_ON_INSERT"):
            environment.pop(name, None)
        if kill_at:
            environment["AGENTLOOM_FAULT_KILL_AT"] = kill_at
        if kill_in_tool:
            environment["AGENTLOOM_FAULT_KILL_IN_TOOL"] = "1"
        environment.update(env or {})
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.worker_main", f"--concurrency={concurrency}"],
            cwd=REPO, env=environment, stdout=self._log, stderr=subprocess.STDOUT)

    def died_by_sigkill(self, timeout: float = 30.0) -> bool:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return code == -signal.SIGKILL

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def __enter__(self) -> FaultWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
