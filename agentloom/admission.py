"""Load shedding at the door of a web process (SPEC §11): a bounded number of requests
may wait for their answer; the next is refused at once with 503 and Retry-After.

Past what the machine can serve, queueing only makes every answer late — at 500 chat
users on two cores, questions waited past any client's patience and were then accepted
after their sender had given up. A request counts from its arrival until its response
starts (an event stream counts until its headers go out, not while it is open), so the
bound is on work waiting, not on people connected. ``/healthz`` and static files are
never refused: a load balancer must still see the process alive.
"""
from __future__ import annotations

import json
from typing import Any

from agentloom.api.errors import error_body
from agentloom.db_pool import BUSY_MESSAGE, RETRY_AFTER_SECONDS

EXEMPT_PREFIXES = ("/healthz", "/static/")


class AdmissionLimit:
    """ASGI middleware: at most ``limit`` HTTP requests of this process wait for their
    response at once (``AGENTLOOM_WEB_MAX_PENDING``; 0 turns it off)."""

    def __init__(self, app: Any, *, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.pending = 0  # the event loop is one thread: no lock needed

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.limit <= 0 or scope.get("path", "").startswith(EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return
        if self.pending >= self.limit:
            await _drain(receive)
            await _refuse(scope, send)
            return
        self.pending += 1
        counted = True

        async def send_counting(message: dict) -> None:
            nonlocal counted
            if counted and message["type"] == "http.response.start":
                counted = False
                self.pending -= 1
            await send(message)

        try:
            await self.app(scope, receive, send_counting)
        finally:
            if counted:
                self.pending -= 1


DRAIN_BYTES = 64 * 1024


async def _drain(receive: Any) -> None:
    """Read the (small) body before answering: a socket closed with unread bytes is reset,
    and the reset can destroy the refusal before the client reads it. A large body is left;
    the connection then closes after the answer."""
    read = 0
    while read <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(scope: dict, send: Any) -> None:
    if scope.get("path", "").startswith("/api/"):
        body = json.dumps(error_body("busy", BUSY_MESSAGE)).encode()
        content_type = b"application/json"
    else:
        body = f"503 {BUSY_MESSAGE}\n".encode()
        content_type = b"text/plain; charset=utf-8"
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", content_type), (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
        (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})
