"""The load run's HTTP client: plain HTTP/1.1 over asyncio's streams (benchmarks/load.py).

The simulated users run on the machine the product runs on, in one event loop: what the
client spends is taken from the two cores the product is measured on, and while the loop
is busy a user's clock runs late. httpx spent ~3 ms of CPU a question there, over half of
the benchmark's own (its layers of transports, pools and the h11 state machine, for
connections that carry one request at a time). This reads the same bytes with asyncio's
streams and speaks only what the run needs: one keep-alive connection per origin and
user, bodies with ``Content-Length`` or chunked, a streamed body read line by line (SSE),
a time-out on every connect, write and read. The names mirror httpx's where the run used
them (``post``, ``stream``, ``aread``, ``aiter_lines``, ``status_code``, ``headers``) so
the users read as before.
"""
from __future__ import annotations

import asyncio
import json as jsonlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

LINE_LIMIT = 1 << 20  # the longest line (an SSE data line, a header) accepted
READ_SIZE = 1 << 16  # bytes asked of the socket at a time


class HTTPError(Exception):
    """Any failure of a call; the subclasses name what failed, as the table reports."""


class ConnectError(HTTPError):
    pass


class ReadTimeout(HTTPError):
    pass


class WriteTimeout(HTTPError):
    pass


class RemoteProtocolError(HTTPError):
    """The server closed the connection mid-response or sent what is not HTTP/1.1."""


class Headers(dict):
    """Response headers by lower-case name, looked up in any case."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)


class _Connection:
    """A socket's reader with a buffer of its own: a line or a chunk already received is
    taken without awaiting (and without arming a time-out), which is most of them — an
    event stream's frames arrive several lines to a packet."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buffer = b""

    async def _fill(self, timeout: float) -> bool:
        """More bytes into the buffer; False when the server has closed the connection."""
        try:
            async with asyncio.timeout(timeout):
                data = await self.reader.read(READ_SIZE)
        except TimeoutError:
            raise ReadTimeout(f"nothing read within {timeout:g} s") from None
        self.buffer += data
        return bool(data)

    async def line(self, timeout: float) -> bytes:
        """The next line with its end; what is left at the connection's close (b"" if nothing)."""
        while (end := self.buffer.find(b"\n")) < 0:
            if len(self.buffer) > LINE_LIMIT:
                raise RemoteProtocolError(f"a line longer than {LINE_LIMIT} bytes")
            if not await self._fill(timeout):
                line, self.buffer = self.buffer, b""
                return line
        line, self.buffer = self.buffer[:end + 1], self.buffer[end + 1:]
        return line

    async def exactly(self, size: int, timeout: float) -> bytes:
        while len(self.buffer) < size:
            if not await self._fill(timeout):
                raise RemoteProtocolError("the server closed the connection mid-body")
        piece, self.buffer = self.buffer[:size], self.buffer[size:]
        return piece

    async def rest(self, timeout: float) -> bytes:
        """Whatever arrives until the server closes the connection."""
        while await self._fill(timeout):
            pass
        rest, self.buffer = self.buffer, b""
        return rest

    def close(self) -> None:
        self.writer.close()


class Response:
    """A response whose body is read on demand: ``aread`` (all of it) or ``aiter_lines``."""

    def __init__(self, connection: _Connection, status: int, headers: Headers, *, read_timeout: float,
                 head_only: bool, version: str = "HTTP/1.1") -> None:
        self.status_code = status
        self.headers = headers
        self.content = b""
        self._connection = connection
        self._read_timeout = read_timeout
        self._chunked = "chunked" in (headers.get("transfer-encoding") or "").lower()
        length = headers.get("content-length")
        self._length = int(length) if length is not None else None
        self.complete = head_only or (not self._chunked and self._length == 0)
        # Without a length or chunks the body ends with the connection: it cannot be reused;
        # nor can an HTTP/1.0 server's, which closes it unless it said otherwise.
        keep_alive = (headers.get("connection") or "").lower()
        self.reusable = (self._chunked or self._length is not None) and keep_alive != "close" and \
            (version == "HTTP/1.1" or keep_alive == "keep-alive")

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return jsonlib.loads(self.content)

    async def _pieces(self) -> AsyncIterator[bytes]:
        connection, timeout = self._connection, self._read_timeout
        if self.complete:
            return
        if self._chunked:
            while True:
                size_line = await connection.line(timeout)
                if not size_line:
                    raise RemoteProtocolError("the server closed the connection mid-body")
                try:
                    size = int(size_line.split(b";", 1)[0], 16)
                except ValueError:
                    raise RemoteProtocolError(f"bad chunk size {size_line[:40]!r}") from None
                if size == 0:
                    while (await connection.line(timeout)) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self.complete = True
                    return
                piece = await connection.exactly(size + 2, timeout)
                yield piece[:-2]
        elif self._length is not None:
            yield await connection.exactly(self._length, timeout)
            self.complete = True
        else:
            yield await connection.rest(timeout)
            self.complete = True

    async def aread(self) -> bytes:
        self.content += b"".join([piece async for piece in self._pieces()])
        return self.content

    async def aiter_lines(self) -> AsyncIterator[str]:
        rest = b""
        async for piece in self._pieces():
            lines = (rest + piece).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield line.rstrip(b"\r").decode()
        if rest:
            yield rest.decode()


class AsyncClient:
    """Calls to ``base_url`` (or to a full URL) with the same headers each time, over kept
    connections: one per origin, as one user makes one call at a time."""

    def __init__(self, *, base_url: str, headers: dict[str, str], timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = headers
        self.timeout = timeout
        self.idle: dict[tuple[str, int], _Connection] = {}

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        for connection in self.idle.values():
            connection.close()
        self.idle.clear()

    async def post(self, url: str, *, json, timeout: float | None = None) -> Response:
        async with self.stream("POST", url, json=json, timeout=timeout) as response:
            await response.aread()
        return response

    @asynccontextmanager
    async def stream(self, method: str, url: str, *, json=None, headers: dict[str, str] | None = None,
                     timeout: float | None = None) -> AsyncIterator[Response]:
        """The response once its head has arrived; its connection is kept for the next call
        only when the body was read to its end here."""
        call_timeout, read_timeout = self.timeout, timeout if timeout is not None else self.timeout
        full = url if "://" in url else self.base_url + url
        parts = urlsplit(full)
        origin = (parts.hostname or "127.0.0.1", parts.port or 80)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        body = jsonlib.dumps(json).encode() if json is not None else b""
        head = [f"{method} {target} HTTP/1.1", f"Host: {origin[0]}:{origin[1]}",
                *(f"{name}: {value}" for name, value in {**self.headers, **(headers or {})}.items())]
        if json is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        connection, response = await self._send(origin, request, method, call_timeout, read_timeout)
        try:
            yield response
        finally:
            if response.complete and response.reusable and origin not in self.idle:
                self.idle[origin] = connection
            else:
                connection.close()

    async def _send(self, origin: tuple[str, int], request: bytes, method: str, call_timeout: float,
                    read_timeout: float) -> tuple[_Connection, Response]:
        kept = self.idle.pop(origin, None)
        for connection in ([kept] if kept is not None else []) + [None]:
            if connection is None:
                connection = await self._connect(origin, call_timeout)
            try:
                try:
                    connection.writer.write(request)
                    async with asyncio.timeout(call_timeout):
                        await connection.writer.drain()
                    status_line = await connection.line(read_timeout)
                except TimeoutError:
                    raise WriteTimeout(f"request not sent within {call_timeout:g} s") from None
                except ConnectionError:
                    status_line = b""
                if not status_line:
                    # Not a byte of an answer: a kept connection the server had closed while
                    # idle (it read nothing of the request) is tried once more on a new one.
                    # Anything else that fails after the server answered is never sent again.
                    connection.close()
                    if connection is kept:
                        continue
                    raise RemoteProtocolError("the server closed the connection without a response")
                return connection, await self._head(connection, status_line, method, read_timeout)
            except BaseException:
                connection.close()
                raise
        raise AssertionError("unreachable")

    async def _connect(self, origin: tuple[str, int], timeout: float) -> _Connection:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(origin[0], origin[1])
        except (OSError, TimeoutError) as exc:
            raise ConnectError(f"{origin[0]}:{origin[1]}: {exc!r}") from None
        return _Connection(reader, writer)

    @staticmethod
    async def _head(connection: _Connection, status_line: bytes, method: str, timeout: float) -> Response:
        try:
            version, status, *_ = status_line.decode("latin-1").split(" ", 2)
            code = int(status)
        except ValueError:
            raise RemoteProtocolError(f"bad status line {status_line[:60]!r}") from None
        if not version.startswith("HTTP/1."):
            raise RemoteProtocolError(f"bad status line {status_line[:60]!r}")
        headers = Headers()
        while (line := await connection.line(timeout)) not in (b"\r\n", b"\n"):
            if not line:
                raise RemoteProtocolError("the server closed the connection mid-head")
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return Response(connection, code, headers, read_timeout=timeout, version=version,
                        head_only=method == "HEAD" or code in (204, 304) or 100 <= code < 200)
