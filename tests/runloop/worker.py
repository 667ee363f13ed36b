"""A real Celery worker process on the test database, for delivery and SIGKILL tests."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.db import connection

from tests.conftest import REPO


def test_database_url() -> str:
    db = connection.settings_dict
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


class Worker:
    """``with Worker() as worker:`` starts a worker; ``worker.kill()`` is SIGKILL."""

    def __init__(self, *, concurrency: int = 2, env: dict[str, str] | None = None) -> None:
        environment = dict(os.environ)
        environment.update({"DJANGO_SETTINGS_MODULE": "agentloom.settings_test", "DATABASE_URL": test_database_url(),
                            "AGENTLOOM_RETRY_BASE_DELAY": "0.01", **(env or {})})
        if settings.REDIS_URL:
            environment["REDIS_URL"] = settings.REDIS_URL
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "agentloom", "worker", "--pool=threads",
             f"--concurrency={concurrency}", "--without-heartbeat", "--without-mingle", "--without-gossip",
             "--loglevel=WARNING"],
            cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def __enter__(self) -> Worker:
        return self

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(predicate, *, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached in time")
