"""Load shedding at the door of a web process (SPEC §11): a bounded number of requests
may wait for their answer; the next is refused at once with 503 and Retry-After.

Past what the machine can serve, queueing only makes every answer late — at 500 chat
users on two cores, questions waited past any client's patience and were then accepted
after their sender had given up. A request counts from the moment its body has arrived
whole until its response starts (an event stream counts until its headers go out, not
while it is open), so the bound is on work waiting, not on people connected — nor on
people typing slowly: the body is read first (agentloom/request_body.py, bounded in size
and time, 413 and 408 past them), and a client that sends slowly holds a connection,
never a place (issue #44: 64 connections sending two bytes each of a login form held all
64 places, and everyone else got 503).

One client has at most ``AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT`` requests here at once,
counted from their arrival (the body still coming) until their response starts; the next
is refused at once with 429 and the connection closed. The client is the one
core/api/clients.py names: behind a proxy listed in ``AGENTLOOM_TRUSTED_PROXIES``
the address it forwards, never the proxy itself, which speaks for everyone. A client
connected directly is bounded to that many connections by the server already
(agentloom/http_protocol.py); this bound is the one that holds behind a proxy, or under a
server started without that protocol.

``/healthz`` and static files are never refused, never counted (a load balancer must
still see the process alive); their bodies are read under the same bounds. ``/healthz``
reports ``"web": "refusing"`` while the door is full or has refused within
``REFUSING_SECONDS`` (:meth:`AdmissionLimit.health`).
"""
from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.conf import settings

from agentloom.request_body import BodyLimits, BodyReader, BodyRefused, BufferedBody, ClientGone
from core.api.clients import address_bucket, client_of, trusted_proxy
from core.api.errors import TOO_LARGE_MESSAGE, error_body
from core.db_pool import BUSY_MESSAGE, RETRY_AFTER_SECONDS
from core.errors import DomainError

EXEMPT_PREFIXES = ("/healthz", "/static/")
DOOR_SCOPE_KEY = "agentloom.door"  # how /healthz finds the door it came through
# A refusal is news for this long: a probe every few seconds sees a door that sheds in
# bursts as refusing, and one that has stopped as ok again soon after.
REFUSING_SECONDS = 5.0
TIMEOUT_MESSAGE = "The request did not arrive in time; nothing was changed. Send it again."
PER_CLIENT_MESSAGE = ("Too many requests from your address at once; nothing was changed. "
                      "Try again in a few seconds.")


class AdmissionLimit:
    """ASGI middleware: at most ``limit`` HTTP requests of this process wait for their
    response at once (``AGENTLOOM_WEB_MAX_PENDING``; 0 turns it off), at most
    ``per_client`` of them (and of those whose body is still coming) from one client
    (0 turns it off); every body is read whole, under ``body``, before the request counts."""

    def __init__(self, app: Any, *, limit: int, per_client: int = 0, body: BodyLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.clock = clock
        self.limit = limit
        self.per_client = per_client
        # Read once: a Django setting costs half a microsecond a read, and most deployments list no proxy.
        self.proxied = bool(settings.AGENTLOOM_TRUSTED_PROXIES)
        self.reader = BodyReader(body or BodyLimits())
        # The event loop is one thread: no lock. /healthz reads them from its request thread,
        # where a count a moment old is as good as any.
        self.pending = 0
        self.in_flight: dict[str, int] = {}
        self.refused_at = -math.inf
        self.refusals: Counter[str] = Counter()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exempt = scope.get("path", "").startswith(EXEMPT_PREFIXES)
        client = None if exempt else self._client(scope)
        if client is not None:
            held = self.in_flight.get(client, 0)
            if held >= self.per_client:
                self.refusals["per_client"] += 1
                await _answer(scope, send, 429, "rate_limited", PER_CLIENT_MESSAGE, retry_after=True, close=True)
                return
            self.in_flight[client] = held + 1
        waiting = False  # counted in self.pending
        holding = client is not None  # counted in self.in_flight

        def answered() -> None:
            nonlocal waiting, holding
            if waiting:
                waiting = False
                self.pending -= 1
            if holding:
                holding = False
                self._release(client)

        async def send_counting(message: dict) -> None:
            if message["type"] == "http.response.start":
                answered()
            await send(message)

        try:
            body = await self._read(scope, receive, send_counting)
            if body is None:
                return
            try:
                if exempt:
                    scope[DOOR_SCOPE_KEY] = self
                elif self.limit > 0:
                    if self.pending >= self.limit:
                        self.refused_at = self.clock()
                        self.refusals["busy"] += 1
                        # The body was read: the connection stays usable for the retry.
                        await _answer(scope, send_counting, 503, "busy", BUSY_MESSAGE, retry_after=True)
                        return
                    self.pending += 1
                    waiting = True
                await self.app(scope, body, send if exempt else send_counting)
            finally:
                body.file.close()
        finally:
            answered()

    def _client(self, scope: dict) -> str | None:
        peer = scope.get("client")
        if self.per_client <= 0 or not peer:
            return None
        host = str(peer[0])
        if self.proxied and trusted_proxy(host):
            forwarded = b",".join(value for name, value in scope.get("headers", ()) if name == b"x-forwarded-for")
            host = client_of(host, forwarded.decode("latin-1"))
        return address_bucket(host)

    def _release(self, client: str | None) -> None:
        if client is None:
            return
        held = self.in_flight[client] - 1
        if held:
            self.in_flight[client] = held
        else:
            del self.in_flight[client]  # the table holds only clients with a request here

    async def _read(self, scope: dict, receive: Any, send: Any) -> BufferedBody | None:
        try:
            file, size = await self.reader.read(scope, receive)
        except ClientGone:
            return None
        except BodyRefused as refused:
            # Past a bound the rest of the body is not read: the connection is closed after the answer.
            if refused.status == 408:
                self.refusals["body_timeout"] += 1
                await _answer(scope, send, 408, "request_timeout", TIMEOUT_MESSAGE, close=True)
            elif isinstance(refused.error, DomainError):
                self.refusals["body_too_large"] += 1
                await _answer(scope, send, refused.error.status, refused.error.code, refused.error.message, close=True)
            else:
                self.refusals["body_too_large"] += 1
                await _answer(scope, send, 413, "too_large", TOO_LARGE_MESSAGE, close=True)
            return None
        return BufferedBody(receive, file, size)

    def refusing(self) -> bool:
        """Full, or refused a request within ``REFUSING_SECONDS``."""
        full = self.limit > 0 and self.pending >= self.limit
        return full or self.clock() - self.refused_at < REFUSING_SECONDS

    def health(self) -> dict[str, Any]:
        """``web`` for everyone; ``web_door`` (counts since the process started) for operators."""
        return {"web": "refusing" if self.refusing() else "ok",
                "web_door": {"pending": self.pending, "max_pending": self.limit, "max_per_client": self.per_client,
                             "clients_in_flight": len(self.in_flight),
                             "refused_busy": self.refusals["busy"], "refused_per_client": self.refusals["per_client"],
                             "body_timeouts": self.refusals["body_timeout"],
                             "bodies_too_large": self.refusals["body_too_large"]}}


async def _answer(scope: dict, send: Any, status: int, code: str, message: str, *, retry_after: bool = False,
                  close: bool = False) -> None:
    """The door's own answers: the API's error shape under /api/, plain text elsewhere."""
    if scope.get("path", "").startswith("/api/"):
        body = json.dumps(error_body(code, message)).encode()
        content_type = b"application/json"
    else:
        body = f"{status} {message}\n".encode()
        content_type = b"text/plain; charset=utf-8"
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store")]
    if retry_after:
        headers.append((b"retry-after", str(RETRY_AFTER_SECONDS).encode()))
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
