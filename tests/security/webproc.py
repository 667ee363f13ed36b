"""The web process as shipped — `make run`'s uvicorn command (agentloom/launch.py) — on a free
loopback port and the test database, in a process of its own; and raw-socket clients for
it that can send half a request and pick their loopback source address (127.0.0.0/8 is all
loopback on Linux: each address is another client to the server).

Everything waits on a condition with a deadline; every process started is stopped by the
context manager that started it.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

DEADLINE = 30.0  # any single wait here; reached only when something is broken
START_DEADLINE = 90.0  # Django's start-up on a loaded two-core machine


class WebProcess:
    """``env`` is added to the test environment; ``keep_alive`` replaces the command's
    ``--timeout-keep-alive``."""

    def __init__(self, log: Path, *, env: dict[str, str], keep_alive: str | None = None) -> None:
        from agentloom.launch import web_command
        from tests.faults.support import free_port, worker_database_url

        self.port = free_port()
        self.log_path = log
        self.command = web_command(python=sys.executable, host="127.0.0.1", port=self.port, trusted_proxies=[])
        if keep_alive is not None:
            self.command[self.command.index("--timeout-keep-alive") + 1] = keep_alive
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test",
                    "DATABASE_URL": worker_database_url(), "AGENTLOOM_TASKS_EAGER": "true", **env}
        self.env.pop("AGENTLOOM_TRUSTED_PROXIES", None)
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> WebProcess:
        self.log = open(self.log_path, "w")  # noqa: SIM115 (closed in __exit__)
        self.process = subprocess.Popen(self.command, cwd=REPO, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_DEADLINE
        while True:
            try:
                exchange(self.port, get("/healthz"))
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise AssertionError("the web process did not start:\n" + self.log_path.read_text()) from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()


def post_head(path: str, *, length: int, content_type: str = "application/x-www-form-urlencoded") -> bytes:
    """The headers of a POST whose body is still to come."""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n").encode()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=DEADLINE, source_address=(source, 0))


def read_to_end(sock: socket.socket) -> bytes:
    """Everything until the server closes (a reset counts as closing); a server that neither
    answers nor closes fails the test with a time-out."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def parse(data: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def exchange(port: int, raw: bytes, *, source: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    """Send a whole request (``Connection: close``) and read the whole answer."""
    with connect(port, source) as sock:
        sock.sendall(raw)
        data = read_to_end(sock)
    if not data:
        raise ConnectionAbortedError("closed without an answer")
    return parse(data)
