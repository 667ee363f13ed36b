"""Slow work inside requests holds no pooled connection, and is bounded per process and
per person (issue #44 item 5, SPEC §11; core/slow_work.py).

On PostgreSQL with a real pool shrunk to a few connections, served by uvicorn on
loopback: while uploads wait on a PDF reader, or registrations and discoveries wait on a
server that does not answer yet, another person's request is answered (not 503), the
person's next slow request is refused 429 ``too_many_at_once`` and, once the process's
places are taken, anyone's is refused 503 ``busy`` — each with Retry-After, in the one
error shape, changing nothing. The slow parts are held by the test with events, never by
sleeps: a PDF reader that waits to be let go, and a loopback HTTP server that takes each
request and answers only when released.
"""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest
from django.db import connections

from sessions import sniff as sniff_module
from sessions.models import SessionFile
from tests.conftest import token_for
from tests.files.makers import make_pdf
from tests.runloop.livesrv import LiveServer
from tests.runloop.test_connection_pool import pool_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

WAIT = 60  # seconds a step may take on a loaded machine before the test gives up


class HeldReader:
    """The PDF reader, held: each call says it started, then waits until the test releases
    it, then reads the PDF for real."""

    def __init__(self, real: Callable) -> None:
        self.real = real
        self.started = threading.Semaphore(0)
        self.release = threading.Event()

    def __call__(self, data: bytes, **bounds):
        self.started.release()
        assert self.release.wait(WAIT), "the test never released the reader"
        return self.real(data, **bounds)


class HeldEndpoint:
    """A loopback HTTP server that reads each request, says it arrived, and answers 404
    only once released (then at once). Stops with the block."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.arrived = threading.Semaphore(0)
        self.release = threading.Event()
        self.done = threading.Event()
        self.threads: list[threading.Thread] = [threading.Thread(target=self._accept, daemon=True)]

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(WAIT)
            received = b""
            try:
                while b"\r\n\r\n" not in received:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    received += chunk
                self.arrived.release()
                self.release.wait(WAIT)
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                pass  # the client gave up first

    def __enter__(self) -> HeldEndpoint:
        self.threads[0].start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.done.set()
        for thread in self.threads:
            thread.join(timeout=WAIT)
        self.listener.close()


def _client(server: LiveServer, user) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token_for(user)}"},
                        timeout=httpx.Timeout(WAIT))


def _refused(response: httpx.Response, status: int, code: str) -> None:
    """Refused in the one error shape, with when to try again."""
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json")
    message = response.json()["error"]["message"]
    assert response.json() == {"error": {"code": code, "message": message}}
    assert "try again in a few seconds" in message
    assert int(response.headers["Retry-After"]) >= 1


def test_slow_uploads_hold_no_connection_and_past_the_bounds_are_429_then_503(alice, bob, make_session, settings,
                                                                              monkeypatch):
    settings.AGENTLOOM_EXTRACTIONS_PER_PERSON = 3
    settings.AGENTLOOM_EXTRACTIONS_MAX = 4
    reader = HeldReader(sniff_module.pdf_read)
    monkeypatch.setattr(sniff_module, "pdf_read", reader)
    alices, bobs = make_session(alice), make_session(bob)
    pdf = make_pdf(["A page of the contract."])

    def attach(client: httpx.Client, session_id: int) -> httpx.Response:
        return client.post(f"/api/v1/sessions/{session_id}/files", files={"file": ("contract.pdf", pdf)})

    # A pool of three: the three slow uploads would take every connection, were they held.
    with pool_of(3, timeout=1.0, name="agentloom-test-slow-reads"), LiveServer() as server, \
            _client(server, alice) as as_alice, _client(server, bob) as as_bob, ThreadPoolExecutor(4) as threads:
        connections["default"].close()
        uploads: list[Future] = []
        try:
            uploads = [threads.submit(attach, as_alice, alices.pk) for _ in range(3)]
            for _ in range(3):
                assert reader.started.acquire(timeout=WAIT), [f.result() for f in uploads if f.done()]
            listed = as_bob.get("/api/v1/sessions")
            assert listed.status_code == 200, (listed.status_code, listed.text[:300])
            _refused(attach(as_alice, alices.pk), 429, "too_many_at_once")
            uploads.append(threads.submit(attach, as_bob, bobs.pk))  # the process's fourth and last place
            assert reader.started.acquire(timeout=WAIT)
            _refused(attach(as_bob, bobs.pk), 503, "busy")
            assert as_bob.get(f"/api/v1/sessions/{bobs.pk}").status_code == 200
        finally:
            reader.release.set()
        assert [future.result().status_code for future in uploads] == [201, 201, 201, 201]
    assert SessionFile.objects.filter(session=alices).count() == 3
    assert SessionFile.objects.filter(session=bobs).count() == 1
    # Every place was given back: the same person attaches again at once.
    from core.slow_work import GATES

    assert GATES["extraction"].count() == 0


def test_slow_probes_hold_no_connection_and_past_the_bounds_are_429_then_503(alice, bob, mallory, space,
                                                                             mallory_space, settings):
    settings.AGENTLOOM_PROBES_PER_PERSON = 2
    settings.AGENTLOOM_PROBES_MAX = 3
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = True  # the slow endpoint is on loopback

    with HeldEndpoint() as endpoint, pool_of(2, timeout=1.0, name="agentloom-test-slow-probes"), \
            LiveServer() as server, _client(server, alice) as as_alice, _client(server, bob) as as_bob, \
            _client(server, mallory) as as_mallory, ThreadPoolExecutor(3) as threads:
        connections["default"].close()

        def register(client: httpx.Client, name: str, space_id: int) -> httpx.Response:
            return client.post("/api/v1/tool-servers", json={"name": name, "url": f"{endpoint.url}/mcp",
                                                             "space": space_id, "timeout_seconds": WAIT})

        def discover(client: httpx.Client) -> httpx.Response:
            return client.post("/api/models/discover", json={"provider": "openai_compatible",
                                                             "base_url": f"{endpoint.url}/v1"})

        probes: list[Future] = []
        try:
            probes = [threads.submit(register, as_alice, "tickets", space.pk), threads.submit(discover, as_alice)]
            for _ in range(2):
                assert endpoint.arrived.acquire(timeout=WAIT), [f.result() for f in probes if f.done()]
            listed = as_bob.get("/api/v1/sessions")
            assert listed.status_code == 200, (listed.status_code, listed.text[:300])
            _refused(register(as_alice, "wiki", space.pk), 429, "too_many_at_once")
            probes.append(threads.submit(discover, as_mallory))  # the process's third and last place
            assert endpoint.arrived.acquire(timeout=WAIT)
            _refused(register(as_mallory, "notes", mallory_space.pk), 503, "busy")
        finally:
            endpoint.release.set()
        answered = [future.result().status_code for future in probes]
    # The server answered 404: each probe failed as a probe does (400 or 502), never 503.
    assert all(status in (400, 502) for status in answered), answered
    from core.slow_work import GATES
    from toolservers.models import ToolServer

    assert not ToolServer.objects.exists()
    assert GATES["probe"].count() == 0
