"""Load shedding at the door (agentloom/admission.py): a bounded number of requests wait
for their answer; the next is refused at once with 503, Retry-After and the error shape.
Driven over ASGI with a stand-in application that answers only when told, so "waiting"
is a state the test holds, not a time it measures."""
from __future__ import annotations

import asyncio
import json

from agentloom.admission import AdmissionLimit


class Held:
    """An application whose answers wait until released; ``streams`` start their response
    at once and then stay open until released (an event stream)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.arrived = 0

    async def __call__(self, scope, receive, send) -> None:
        self.arrived += 1
        if scope["path"].endswith("/events"):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await self.release.wait()
            await send({"type": "http.response.body", "body": b""})
            return
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _request(app, path: str) -> dict:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "path": path, "method": "POST", "headers": []}, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return {"status": start["status"], "headers": dict(start["headers"]), "body": body}


def test_past_the_bound_a_request_is_refused_at_once_with_503_and_retry_after_and_the_rest_are_served():
    async def scenario():
        held = Held()
        app = AdmissionLimit(held, limit=2)
        waiting = [asyncio.ensure_future(_request(app, f"/api/v1/sessions/{n}/questions")) for n in (1, 2)]
        while held.arrived < 2:
            await asyncio.sleep(0)
        refused = await _request(app, "/api/v1/sessions/3/questions")  # returns while the two still wait
        page = await _request(app, "/")
        health = asyncio.ensure_future(_request(app, "/healthz"))  # never refused: it waits like the others
        while held.arrived < 3:
            await asyncio.sleep(0)
        assert held.arrived == 3 and not any(task.done() for task in waiting)
        held.release.set()
        served = [await task for task in waiting] + [await health]
        after = await _request(app, "/api/v1/sessions/4/questions")
        return refused, page, served, after, app.pending

    refused, page, served, after, pending = asyncio.run(scenario())
    assert refused["status"] == 503 and int(refused["headers"][b"retry-after"]) >= 1
    assert json.loads(refused["body"])["error"]["code"] == "busy"
    assert page["status"] == 503 and page["headers"][b"content-type"].startswith(b"text/plain")
    assert [r["status"] for r in served] == [200, 200, 200] and after["status"] == 200
    assert pending == 0


def test_an_open_event_stream_stops_counting_once_its_headers_are_sent():
    async def scenario():
        held = Held()
        app = AdmissionLimit(held, limit=1)
        stream = asyncio.ensure_future(_request(app, "/api/v1/runs/7/events"))
        while held.arrived < 1:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        during = app.pending
        question = asyncio.ensure_future(_request(app, "/api/v1/sessions/1/questions"))
        while held.arrived < 2:
            await asyncio.sleep(0)
        held.release.set()
        return during, await stream, await question

    during, stream, question = asyncio.run(scenario())
    assert during == 0  # open, but waiting for nothing of this process's
    assert stream["status"] == 200 and question["status"] == 200
