"""Load shedding at the door (agentloom/admission.py): a bounded number of requests wait
for their answer; the next is refused at once with 503, Retry-After and the error shape.
Driven over ASGI with a stand-in application that answers only when told, so "waiting"
is a state the test holds, not a time it measures."""
from __future__ import annotations

import asyncio
import json

import pytest

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


async def _held_request(app, path: str, *, peer: str, forwarded: str | None = None) -> dict:
    """A request from ``peer`` (through a proxy when ``forwarded`` is its X-Forwarded-For)."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    await app({"type": "http", "path": path, "method": "POST", "headers": headers, "client": (peer, 50000)},
              receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return {"status": start["status"], "headers": dict(start["headers"]), "body": body}


def _per_client_scenario(requests: list[tuple[str, str | None]], *, per_client: int):
    """Every request but the last is held by the application; the last is answered at once
    (refused) or reaches the application too. Returns the last one's answer, or None."""
    async def scenario():
        held = Held()
        app = AdmissionLimit(held, limit=64, per_client=per_client)
        waiting = [asyncio.ensure_future(_held_request(app, "/api/v1/sessions/1/questions", peer=peer,
                                                       forwarded=forwarded)) for peer, forwarded in requests[:-1]]
        while held.arrived < len(waiting):
            await asyncio.sleep(0)
        peer, forwarded = requests[-1]
        last = asyncio.ensure_future(_held_request(app, "/api/v1/sessions/2/questions", peer=peer,
                                                   forwarded=forwarded))
        while not last.done() and held.arrived < len(requests):
            await asyncio.sleep(0)
        answered_at_once = last.done()
        held.release.set()
        await asyncio.gather(*waiting, last)
        return (last.result() if answered_at_once else None), app.in_flight

    return asyncio.run(scenario())


def test_one_client_past_its_bound_is_refused_at_once_with_429_while_another_is_served():
    refused, in_flight = _per_client_scenario([("198.51.100.7", None)] * 3, per_client=2)
    assert refused["status"] == 429 and refused["headers"][b"connection"] == b"close"
    assert int(refused["headers"][b"retry-after"]) >= 1
    assert json.loads(refused["body"])["error"]["code"] == "rate_limited"
    assert in_flight == {}  # every place given back
    other, _ = _per_client_scenario([("198.51.100.7", None)] * 2 + [("198.51.100.8", None)], per_client=2)
    assert other is None  # reached the application


def test_an_ipv6_client_is_its_64_network():
    same_lan = [("2001:db8:0:1::10", None), ("2001:db8:0:1::11", None), ("2001:db8:0:1:ffff::1", None)]
    assert _per_client_scenario(same_lan, per_client=2)[0]["status"] == 429
    other_lan = [("2001:db8:0:1::10", None), ("2001:db8:0:1::11", None), ("2001:db8:0:2::10", None)]
    assert _per_client_scenario(other_lan, per_client=2)[0] is None


def test_behind_a_trusted_proxy_each_forwarded_client_is_bounded_and_the_proxy_is_never_one_client(settings):
    settings.AGENTLOOM_TRUSTED_PROXIES = ["10.0.0.0/8"]
    proxy = "10.0.0.2"
    # Five clients through one proxy, past a bound of two: the proxy is not the client.
    many = [(proxy, f"203.0.113.{n}") for n in range(5)]
    assert _per_client_scenario(many, per_client=2)[0] is None
    # One client through the proxy, three at once: bounded by the address the proxy forwards,
    # whatever the client wrote to the left of it.
    one = [(proxy, "203.0.113.9"), (proxy, "192.0.2.1, 203.0.113.9"), (proxy, "192.0.2.2, 203.0.113.9")]
    refused = _per_client_scenario(one, per_client=2)[0]
    assert refused["status"] == 429
    # A peer that is not a listed proxy is its own address, whatever it forwards.
    direct = [("198.51.100.7", f"203.0.113.{n}") for n in range(3)]
    assert _per_client_scenario(direct, per_client=2)[0]["status"] == 429


async def _probe(door) -> tuple[int, dict]:
    """GET /healthz through ``door`` and the platform's own handler, as a probe would."""
    sent: list[dict] = []
    asked = False
    never = asyncio.Event()

    async def receive() -> dict:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await never.wait()  # the client stays connected; Django stops listening once it has answered
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await door({"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                "path": "/healthz", "raw_path": b"/healthz", "root_path": "", "query_string": b"",
                "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)},
               receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


@pytest.mark.django_db(transaction=True)
def test_healthz_says_the_web_process_is_refusing_while_its_door_is_full_and_for_a_few_seconds_after(settings):
    from agentloom.admission import REFUSING_SECONDS
    from agentloom.handler import OneHopHandler
    from agentloom.health import PUBLIC_FIELDS

    settings.CELERY_TASK_ALWAYS_EAGER = True  # no worker needed: the web's own state decides
    now = [1000.0]

    async def scenario():
        held, platform = Held(), OneHopHandler()

        async def app(scope, receive, send):
            await (platform if scope["path"] == "/healthz" else held)(scope, receive, send)

        door = AdmissionLimit(app, limit=1, clock=lambda: now[0])
        seen = {"before": await _probe(door)}
        waiting = asyncio.ensure_future(_request(door, "/api/v1/sessions/1/questions"))
        while held.arrived < 1:
            await asyncio.sleep(0)
        seen["full"] = await _probe(door)  # never refused itself: it is exempt
        seen["refused"] = (await _request(door, "/api/v1/sessions/2/questions"))["status"]
        held.release.set()
        await waiting
        now[0] += REFUSING_SECONDS - 0.1
        seen["just after"] = await _probe(door)
        now[0] += 0.2
        seen["later"] = await _probe(door)
        return seen

    seen = asyncio.run(scenario())
    assert seen["before"] == (200, {"status": "ok", "database": "ok", "broker": seen["before"][1]["broker"],
                                    "worker": "inline", "web": "ok"})
    assert seen["refused"] == 503
    for moment in ("full", "just after"):
        status, body = seen[moment]
        assert status == 503 and body["web"] == "refusing" and body["status"] == "unavailable", (moment, body)
        assert set(body) == set(PUBLIC_FIELDS)  # the counts are for operators
    assert seen["later"][0] == 200 and seen["later"][1]["web"] == "ok"
