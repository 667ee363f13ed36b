"""`make run`'s own processes under test: the launcher, its web server and its worker.

``MakeRun`` starts ``python -m agentloom.launch`` (what ``make run`` runs) on the embedded
default — a SQLite file and the filesystem broker in a temporary ``AGENTLOOM_VAR_DIR``,
a free loopback port — in a process group of its own, so a test can SIGKILL the worker
alone or the whole group. ``Api`` talks to it over HTTP as a user's client would.
Every process is stopped by the test that started it; every wait is bounded.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import REPO
from tests.faults.support import free_port, wait_for

ADMIN, PASSWORD = "admin", "demo-password-123"


class Api:
    """JSON over HTTP with a token, like any API client."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.token: str | None = None

    def call(self, method: str, path: str, body: dict | None = None, *, timeout: float = 10.0) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def ok(self, method: str, path: str, body: dict | None = None) -> dict:
        status, answer = self.call(method, path, body)
        assert 200 <= status < 300, (method, path, status, answer)
        return answer

    def log_in(self) -> None:
        self.token = self.ok("POST", "/api/v1/auth/token", {"username": ADMIN, "password": PASSWORD})["token"]

    def session_on(self, *, base_url: str, api_key: str, tools: list[str]) -> int:
        """A connection to ``base_url``, an agent with ``tools``, published, and a session with it."""
        connection = self.ok("POST", "/api/v1/model-connections", {
            "name": "Loopback model", "provider": "openai_compatible", "base_url": base_url, "api_key": api_key,
            "model": "fake-model", "context_window": 32_768, "max_output_tokens": 1_024})
        agent = self.ok("POST", "/api/v1/agents", {"name": "Recovery agent", "instructions": "Be brief.",
                                                   "model_connection": connection["id"], "tools": tools})
        self.ok("POST", f"/api/v1/agents/{agent['id']}/publish")
        return self.ok("POST", "/api/v1/sessions", {"agent": agent["id"]})["id"]

    def ask(self, session_id: int, content: str) -> int:
        return self.ok("POST", f"/api/v1/sessions/{session_id}/questions", {"content": content})["id"]

    def run(self, run_id: int) -> dict:
        return self.ok("GET", f"/api/v1/runs/{run_id}")

    def wait_status(self, run_id: int, statuses: set[str], *, timeout: float) -> dict:
        return wait_for(lambda: (lambda run: run if run["status"] in statuses else None)(self.run(run_id)),
                        timeout=timeout, interval=0.1, what=f"run {run_id} in {statuses}")

    def events(self, run_id: int) -> list[dict]:
        return self.ok("GET", f"/api/v1/runs/{run_id}/events?format=json&after=0&limit=500")["items"]

    def records(self, session_id: int) -> list[dict]:
        return self.ok("GET", f"/api/v1/sessions/{session_id}/messages?after=0&limit=200")["items"]

    def health(self) -> tuple[int, dict]:
        return self.call("GET", "/healthz", timeout=3)


class MakeRun:
    """One ``make run`` (the launcher) with its output in ``var_dir/launch.log``.

    By default it runs this checkout with the test's own interpreter; ``python`` and ``app``
    run another install on another copy of the code (the compose image's, in
    ``test_runtime_install.py``), with that copy first on ``PYTHONPATH``.
    """

    def __init__(self, var_dir: Path, *, env: dict[str, str] | None = None, python: str = sys.executable,
                 app: Path = REPO) -> None:
        self.var_dir = var_dir
        self.port = free_port()
        environment = {k: v for k, v in os.environ.items()
                       if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "AGENTLOOM_ENCRYPTION_KEY",
                                    "DJANGO_SETTINGS_MODULE"}}
        environment.update({"PORT": str(self.port), "AGENTLOOM_VAR_DIR": str(var_dir),
                            "DJANGO_SUPERUSER_USERNAME": ADMIN, "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
                            "AGENTLOOM_WORKER_CONCURRENCY": "2", **(env or {})})
        if app != REPO:
            environment["PYTHONPATH"] = str(app)
        self.log_path = var_dir / f"launch-{self.port}.log"
        self._log = open(self.log_path, "w")
        self.started = time.monotonic()
        self.process = subprocess.Popen([python, "-m", "agentloom.launch"], cwd=app, env=environment,
                                        stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.api = Api(f"http://127.0.0.1:{self.port}")

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_healthy(self, *, timeout: float = 90.0, web_only: bool = False) -> dict:
        """Until ``/healthz`` answers 200 (a worker beats), or answers at all (``web_only``)."""
        def healthy():
            assert self.process.poll() is None, f"make run exited:\n{self.output()}"
            try:
                status, body = self.api.health()
            except OSError:
                return None
            return body if status == 200 or web_only else None

        return wait_for(healthy, timeout=timeout, interval=0.1, what="a healthy make run")

    def worker_pid(self) -> int:
        """The pid of the live worker, from ``/healthz`` (``host:pid``)."""
        _, body = self.api.health()
        (worker,) = body["workers"]
        return int(worker["name"].rsplit(":", 1)[1])

    def interrupt(self, *, timeout: float = 30.0) -> int:
        """Ctrl-C: SIGINT to the launcher, as a terminal sends it; returns the exit code."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=timeout)

    def kill_group(self) -> None:
        """SIGKILL to the launcher, its web server and its worker at once."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.interrupt(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever is left of the group
        except ProcessLookupError:
            pass
        self._log.close()

    def __enter__(self) -> MakeRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stored_run(var_dir: Path, run_id: int) -> tuple[str, dict | None]:
    """A run's status and error as the SQLite file holds them, while nothing is serving."""
    with sqlite3.connect(var_dir / "agentloom.sqlite3") as db:
        status, error = db.execute("SELECT status, error FROM agent_sessions_run WHERE id = ?", (run_id,)).fetchone()
    return status, json.loads(error) if error else None
