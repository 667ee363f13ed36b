"""The way out to a remote tool server: CAT-5's rules for the MCP SDK's HTTP client.

The SDK speaks HTTP through ``httpx2`` (an ``httpx`` fork with the same transport API), so
the guard of ``models_catalog.http`` is applied here as an ``httpx2`` transport:

* every request's URL goes through ``check_url`` (scheme, port, no credentials in the URL,
  link-local and metadata addresses always refused, private ones as
  ``AGENTLOOM_ALLOW_PRIVATE_ENDPOINTS`` says) and is pinned to the address it checked, so a
  DNS answer that changes in between (rebinding) cannot reach a refused address;
* no proxy from the environment (``trust_env=False``);
* no redirect, not even the same-origin ones the SDK would follow by itself: a 3xx answer
  is turned into an error here, so the headers an admin entered go to that URL only (CAT-6);
* bounded connect, read and write times, and a bound on the bytes of one response;
* ``Trace`` records the statuses the server answered, because the SDK reports a refused
  token as a bare JSON-RPC error: the registration needs to say "the server refused the
  token (401)", not "internal error".

No Django here; the private-endpoint switch is passed in.
"""
from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import anyio.to_thread
import httpx2

from models_catalog.errors import ProviderError
from models_catalog.http import USER_AGENT, Resolver, check_url
from models_catalog.private_hosts import AllowPrivate

MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # one response (a JSON answer or a whole SSE stream)


class GuardRefused(httpx2.TransportError):
    """The guard refused a request (unsafe URL, a redirect, an oversized answer)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Trace:
    """What the server answered on one connection: statuses of non-2xx responses in order,
    and the first refusal of the guard."""

    statuses: list[int] = field(default_factory=list)
    refusal: GuardRefused | None = None
    answered: bool = False

    def first_error_status(self) -> int | None:
        return self.statuses[0] if self.statuses else None


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner, self._limit, self._seen = inner, limit, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._seen += len(chunk)
            if self._seen > self._limit:
                raise GuardRefused(f"The tool server's answer is larger than {self._limit:,} bytes.", code="too_large")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedAsyncTransport(httpx2.AsyncBaseTransport):
    """``models_catalog.http.GuardedTransport`` for ``httpx2``: check, pin, refuse redirects."""

    def __init__(self, *, allow_private: AllowPrivate, trace: Trace, resolver: Resolver | None = None,
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        # TCP_NODELAY: a JSON-RPC POST goes out as headers then body; with Nagle on, the body
        # waits for the server's delayed ACK of the headers (40 ms on Linux) — every call.
        self._inner = httpx2.AsyncHTTPTransport(retries=0, trust_env=False,
                                                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self._allow_private = allow_private
        self._resolver = resolver
        self._trace = trace
        self._max = max_response_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        try:
            # The resolver blocks: run it off the event loop every session shares.
            target = await anyio.to_thread.run_sync(
                lambda: check_url(url, allow_private=self._allow_private, resolver=self._resolver))
        except ProviderError as exc:
            refusal = GuardRefused(exc.message, code=exc.code)
            self._trace.refusal = self._trace.refusal or refusal
            raise refusal from None
        request.headers.setdefault("Host", request.url.netloc.decode("ascii"))
        last_error: httpx2.ConnectError | None = None
        for address in target.addresses:
            if address != request.url.host:
                if target.scheme == "https":
                    request.extensions = {**request.extensions, "sni_hostname": target.host}
                request.url = request.url.copy_with(host=address)
            try:
                response = await self._inner.handle_async_request(request)
                break
            except httpx2.ConnectError as exc:
                last_error = exc
        else:
            assert last_error is not None
            raise last_error
        self._trace.answered = True
        if not 200 <= response.status_code < 300:
            self._trace.statuses.append(response.status_code)
        if 300 <= response.status_code < 400:
            await response.aclose()
            refusal = GuardRefused(f"The tool server redirected (HTTP {response.status_code}); redirects are not "
                                   "followed. Enter the URL it redirects to.", code="redirect_refused")
            self._trace.refusal = self._trace.refusal or refusal
            raise refusal
        response.stream = _BoundedStream(response.stream, self._max)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(*, allow_private: AllowPrivate, trace: Trace, headers: Mapping[str, str] | None = None,
                   timeout: httpx2.Timeout | None = None, resolver: Resolver | None = None) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` for one tool server with every CAT-5 property."""
    return httpx2.AsyncClient(
        transport=GuardedAsyncTransport(allow_private=allow_private, trace=trace, resolver=resolver),
        trust_env=False,
        follow_redirects=False,
        timeout=timeout or httpx2.Timeout(30.0, connect=10.0),
        headers={"User-Agent": USER_AGENT, **dict(headers or {})},
    )
