"""The door reads a body whole before the request counts (issue #44 item 1): over ASGI, with
a client whose body arrives when the test says so, so "still coming" is a state the test
holds. Slow bodies are cut (408), bodies past every view's bound refused unread (413),
requests in flight bounded per client — the one a trusted proxy forwards, never the
proxy — and ``/healthz`` says when the door refuses work. The same over a real socket:
tests/security/test_slow_clients.py."""
from __future__ import annotations

import asyncio
import json

import pytest

from agentloom.admission import AdmissionLimit
from agentloom.request_body import BodyLimits

DEADLINE = 30.0  # a bound on a wait that should end at once: never reached unless something hangs


class Client:
    """One request's side of the wire: ``feed`` sends body pieces, ``finish`` the last one,
    ``leave`` hangs up; what the door answers lands in ``sent``."""

    def __init__(self, path: str = "/api/v1/auth/token", *, peer: str | None = "198.51.100.7",
                 headers: list[tuple[bytes, bytes]] | None = None, method: str = "POST") -> None:
        self.scope = {"type": "http", "path": path, "method": method, "headers": headers or [],
                      **({"client": (peer, 40000)} if peer else {})}
        self.queue: asyncio.Queue[dict] = asyncio.Queue()
        self.sent: list[dict] = []
        self.received = 0

    def feed(self, chunk: bytes) -> None:
        self.queue.put_nowait({"type": "http.request", "body": chunk, "more_body": True})

    def finish(self, chunk: bytes = b"") -> None:
        self.queue.put_nowait({"type": "http.request", "body": chunk, "more_body": False})

    def leave(self) -> None:
        self.queue.put_nowait({"type": "http.disconnect"})

    async def receive(self) -> dict:
        self.received += 1
        return await self.queue.get()

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    def call(self, door) -> asyncio.Task:
        return asyncio.ensure_future(door(self.scope, self.receive, self.send))

    @property
    def status(self) -> int | None:
        return next((m["status"] for m in self.sent if m["type"] == "http.response.start"), None)

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(next(m["headers"] for m in self.sent if m["type"] == "http.response.start"))

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


class Echo:
    """Answers each request with the body it read, once ``release`` is set; then waits for
    the disconnect the server sends once the response is out (as Django's handler does)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.release.set()
        self.arrived = 0

    async def __call__(self, scope, receive, send) -> None:
        self.arrived += 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


async def until(predicate, what: str) -> None:
    try:
        async with asyncio.timeout(DEADLINE):
            while not predicate():
                await asyncio.sleep(0.001)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {DEADLINE} s") from None


def test_a_request_whose_body_is_still_coming_holds_no_place_and_is_served_whole_once_it_has_come():
    async def scenario():
        door = AdmissionLimit(Echo(), limit=1)
        slow = Client()
        slow_task = slow.call(door)
        slow.feed(b'{"username": "alice", ')
        await until(lambda: slow.received >= 2, "the door waiting for the rest of the body")
        other = Client(peer="198.51.100.8")
        other.finish(b"{}")
        await asyncio.wait_for(other.call(door), DEADLINE)  # today: 503, the slow one held the only place
        pending_meanwhile = door.pending
        slow.finish(b'"password": "x"}')
        await asyncio.wait_for(slow_task, DEADLINE)
        return other, slow, pending_meanwhile, door.pending

    other, slow, pending_meanwhile, pending = asyncio.run(scenario())
    assert other.status == 200 and other.body == b"{}"
    assert slow.status == 200 and slow.body == b'{"username": "alice", "password": "x"}'
    assert pending_meanwhile == 0 and pending == 0


def test_past_the_bound_a_request_whose_body_has_come_is_still_refused_with_503_and_retry_after():
    async def scenario():
        echo = Echo()
        echo.release.clear()
        door = AdmissionLimit(echo, limit=1)
        first = Client()
        first.finish(b"{}")
        first_task = first.call(door)
        await until(lambda: echo.arrived == 1, "the first request at the application")
        second = Client(peer="198.51.100.8")
        second.finish(b"{}")
        await asyncio.wait_for(second.call(door), DEADLINE)
        echo.release.set()
        await asyncio.wait_for(first_task, DEADLINE)
        return first, second

    first, second = asyncio.run(scenario())
    assert second.status == 503 and int(second.headers[b"retry-after"]) >= 1
    assert json.loads(second.body)["error"]["code"] == "busy"
    assert b"connection" not in second.headers  # its body was read: the connection serves the retry
    assert first.status == 200


@pytest.mark.parametrize("path, content_type", [("/api/v1/auth/token", b"application/json"),
                                                ("/login/", b"text/plain; charset=utf-8")])
def test_a_body_that_stops_arriving_is_cut_with_408_and_the_connection_closed(path, content_type):
    async def scenario():
        door = AdmissionLimit(Echo(), limit=64, body=BodyLimits(idle_seconds=0.2, total_seconds=DEADLINE))
        slow = Client(path)
        slow.feed(b"ab")  # and then nothing: Content-Length said 100
        await asyncio.wait_for(slow.call(door), DEADLINE)
        return slow, door

    slow, door = asyncio.run(scenario())
    assert slow.status == 408 and slow.headers[b"content-type"] == content_type
    assert slow.headers[b"connection"] == b"close"
    if path.startswith("/api/"):
        assert json.loads(slow.body) == {"error": {"code": "request_timeout", "message": json.loads(slow.body)[
            "error"]["message"]}}
    assert door.pending == 0 and door.refusals["body_timeout"] == 1


def test_a_body_that_keeps_trickling_is_cut_by_the_overall_bound():
    async def scenario():
        door = AdmissionLimit(Echo(), limit=64, body=BodyLimits(idle_seconds=DEADLINE, total_seconds=0.3))
        slow = Client()
        task = slow.call(door)
        while not task.done():  # a byte every 10 ms: never silent, never done
            slow.feed(b"a")
            await asyncio.wait([task], timeout=0.01)
        return slow

    slow = asyncio.run(asyncio.wait_for(scenario(), DEADLINE))
    assert slow.status == 408 and slow.headers[b"connection"] == b"close"


def test_a_declared_length_past_every_bound_is_refused_unread_and_a_body_without_one_once_it_grows_past():
    async def scenario():
        door = AdmissionLimit(Echo(), limit=64, body=BodyLimits(max_bytes=1000))
        declared = Client(headers=[(b"content-length", b"1001")])
        await asyncio.wait_for(declared.call(door), DEADLINE)
        chunked = Client()
        task = chunked.call(door)
        for _ in range(5):
            chunked.feed(b"x" * 300)
        await asyncio.wait_for(task, DEADLINE)
        return declared, chunked

    declared, chunked = asyncio.run(scenario())
    assert declared.received == 0  # not a byte read (nor a 100 Continue sent)
    assert declared.status == 413 and json.loads(declared.body)["error"]["code"] == "too_large"
    assert declared.headers[b"connection"] == b"close"
    assert chunked.status == 413 and chunked.received == 4  # stopped at the piece that crossed the bound


@pytest.mark.django_db
def test_the_upload_endpoint_keeps_its_own_larger_bound_and_error(settings):
    """What the view's upload handler answers (core/api/uploads.py), the door answers
    before reading: the bound is the view's, found only for a body past the request bound."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 16 * 1024
    settings.AGENTLOOM_FILE_MAX_BYTES = 64 * 1024
    limits = BodyLimits.from_settings()

    async def scenario():
        door = AdmissionLimit(Echo(), limit=64, body=limits)
        sent = {}
        for name, path, length in [("upload fits", "/api/v1/sessions/1/files", 64 * 1024 + 16 * 1024),
                                   ("upload past", "/api/v1/sessions/1/files", 64 * 1024 + 16 * 1024 + 1),
                                   ("question past", "/api/v1/sessions/1/questions", 32 * 1024 + 1)]:
            client = Client(path, headers=[(b"content-length", str(length).encode())])
            client.finish(b"x" * length)
            await asyncio.wait_for(client.call(door), DEADLINE)
            sent[name] = client
        return sent

    sent = asyncio.run(scenario())
    assert sent["upload fits"].status == 200 and len(sent["upload fits"].body) == 80 * 1024
    assert sent["upload past"].status == 413 and json.loads(sent["upload past"].body)["error"]["code"] == \
        "file_too_large"
    assert sent["question past"].status == 413 and json.loads(sent["question past"].body)["error"]["code"] == \
        "too_large"


def test_a_large_body_waits_on_disk_not_in_memory_and_reaches_the_application_whole():
    seen = {}

    async def app(scope, receive, send):
        seen["rolled"] = receive.file._rolled  # the door's file, moved to disk past spill_bytes
        body = b""
        while True:
            message = await receive()
            body += message["body"]
            if not message["more_body"]:
                break
        seen["body"] = body
        seen["after"] = await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def scenario():
        door = AdmissionLimit(app, limit=64, body=BodyLimits(spill_bytes=1024))
        client = Client()
        for index in range(40):
            client.feed(bytes([65 + index % 26]) * 1000)
        client.finish(b"end")
        client.leave()  # what the server says once the response is out
        await asyncio.wait_for(client.call(door), DEADLINE)

    asyncio.run(scenario())
    assert seen["rolled"] is True
    assert seen["body"] == b"".join(bytes([65 + index % 26]) * 1000 for index in range(40)) + b"end"
    assert seen["after"] == {"type": "http.disconnect"}


def test_a_client_that_leaves_mid_body_is_neither_answered_nor_counted():
    async def scenario():
        echo = Echo()
        door = AdmissionLimit(echo, limit=1, per_client=1)
        gone = Client()
        gone.feed(b"ab")
        gone.leave()
        await asyncio.wait_for(gone.call(door), DEADLINE)
        return gone, door, echo

    gone, door, echo = asyncio.run(scenario())
    assert gone.sent == [] and echo.arrived == 0 and door.pending == 0 and door.in_flight == {}


def test_a_read_cancelled_by_the_server_stays_a_cancellation_and_is_not_taken_for_a_slow_body():
    async def scenario():
        door = AdmissionLimit(Echo(), limit=1, body=BodyLimits(idle_seconds=DEADLINE, total_seconds=DEADLINE))
        slow = Client()
        task = slow.call(door)
        slow.feed(b"ab")
        await until(lambda: slow.received >= 2, "the door waiting for the rest of the body")
        task.cancel()  # what a server stopping does after its grace period
        try:
            await asyncio.wait_for(task, DEADLINE)
        except asyncio.CancelledError:
            cancelled = True
        else:
            cancelled = False
        return cancelled, slow, door

    cancelled, slow, door = asyncio.run(scenario())
    assert cancelled and slow.sent == [] and door.reader.reading == {} and door.refusals["body_timeout"] == 0
