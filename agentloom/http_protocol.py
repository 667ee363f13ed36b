"""The web process's HTTP/1.1 protocol: uvicorn's own (h11), with two bounds it lacks (issue #44).

Every shipped command starts uvicorn with ``--http agentloom.http_protocol:BoundedH11Protocol``
(``make run``: agentloom/launch.py; ``docker-compose.yml``; the ``Dockerfile``).

- **Request headers in time.** uvicorn arms no timer on a connection until its first
  response: one that sends half a request line holds its socket for ever. Here a new
  connection that sends nothing is closed after the keep-alive time-out, as uvicorn closes
  one idle between requests (``--timeout-keep-alive``, 30 s in the shipped commands), and
  once the first byte of a request has come, its headers must be complete within
  ``AGENTLOOM_WEB_HEADER_TIMEOUT`` (10 s) or the connection is closed, without an answer
  (there is no request to answer yet). The body is the door's to bound
  (agentloom/request_body.py).
- **Connections per client.** One client address (an IPv6 /64: core/api/clients.py)
  holds at most ``AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT`` (32) connections at once; the
  next is closed as soon as it is accepted, before anything is read — answering it would
  mean reading its request, which is what it must not be allowed to make us wait for. A
  browser opens at most six connections to a site, so 32 leaves room for a handful of
  people behind one NAT, and one address alone cannot fill the door
  (``AGENTLOOM_WEB_MAX_PENDING``, 64). The reverse proxies of
  ``AGENTLOOM_TRUSTED_PROXIES`` are not bounded here — each speaks for many clients — and
  the door bounds the clients behind them by the address they forward.

A server stopping closes the connections whose request body is still coming, instead of
waiting out its grace period for them. uvicorn's methods are extended, never copied; the
subclass reads a few of its protocol's attributes (``conn``, ``cycle``, the keep-alive
timer), as of the uvicorn pinned in constraints.txt — tests/security/test_slow_clients.py
drives each bound through a real server, so an upgrade that moves them fails there.
"""
from __future__ import annotations

import asyncio
import functools
import weakref
from collections import Counter
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# Connections per client, per server: a test process may run more than one.
_CONNECTIONS: weakref.WeakKeyDictionary[Any, Counter[str]] = weakref.WeakKeyDictionary()


@functools.cache
def _limits() -> tuple[float, int]:
    # Read at the first connection, not at import: uvicorn imports the protocol before the
    # application, and with it Django's settings.
    from django.conf import settings

    return settings.AGENTLOOM_WEB_HEADER_TIMEOUT, settings.AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT


def _bucket(host: str) -> str | None:
    """The client a connection from ``host`` counts against; None for a trusted proxy."""
    from core.api.clients import address_bucket, trusted_proxy

    return None if trusted_proxy(host) else address_bucket(host)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with a time-out on request headers and a bound on connections per client."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bucket: str | None = None
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _, per_client = _limits()
        if per_client and self.client is not None:
            bucket = _bucket(self.client[0])
            if bucket is not None:
                counts = _CONNECTIONS.setdefault(self.server_state, Counter())
                if counts[bucket] >= per_client:
                    transport.close()
                    return
                counts[bucket] += 1
                self.bucket = bucket
        # Nothing sent yet: the same wait as a connection idle between two requests.
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # IDLE: the next request's headers have begun and are not complete (uvicorn has
        # taken the keep-alive timer down on this data); anything else: they are.
        started = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
        if started and self.header_timer is None:
            self.header_timer = self.loop.call_later(_limits()[0], self.headers_late)
        elif not started and self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def headers_late(self) -> None:
        self.header_timer = None
        self.timeout_keep_alive_handler()  # closes the connection as uvicorn closes an idle one

    def shutdown(self) -> None:
        # Stopping the server: a request whose body is still coming has had nothing done for
        # it, and waiting for it would hold the stop for the whole grace period and then
        # cancel it with an error in the log. Closing makes its read end as a client gone.
        if self.cycle is not None and not self.cycle.response_started and self.conn.their_state is h11.SEND_BODY:
            self.transport.close()
            return
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None
        if self.bucket is not None:
            counts = _CONNECTIONS[self.server_state]
            counts[self.bucket] -= 1
            if counts[self.bucket] <= 0:
                del counts[self.bucket]
            self.bucket = None
        super().connection_lost(exc)
