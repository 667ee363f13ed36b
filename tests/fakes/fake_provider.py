"""A fake OpenAI-compatible provider on a real loopback socket, for tests and benchmarks.

The server listens on ``127.0.0.1`` on an ephemeral port (a threaded ``http.server``), so
the code under test goes through real sockets, real HTTP and the real URL guard — call
it with ``allow_private=True``. You give it a plain handler function: a request in, a
response *spec* out. No patching of our code is needed, ever.

Quick start::

    from tests.fakes.fake_provider import FakeProvider, chat_stream, models_list, route

    def handler(request):
        if request.path == "/v1/models":
            return models_list(["gpt-4o", "text-embedding-3-small"])
        return chat_stream(["Hel", "lo"], usage={"prompt_tokens": 5, "completion_tokens": 2})

    with FakeProvider(handler) as fake:
        client = get_chat_client(provider="openai_compatible", base_url=fake.base_url,
                                 api_key="sk-test", allow_private=True)
        ...
        assert fake.requests[-1].headers["authorization"] == "Bearer sk-test"

or the pytest fixture ``fake_provider`` (import it into your conftest), then assign
``fake_provider.handler = ...``. :func:`route` builds a handler from a
``{"GET /v1/models": spec_or_handler}`` table (anything else is a 404).

Response specs (all plain dataclasses):

* :class:`JSONResponse` / :class:`RawResponse` — a body with a status and headers;
* :class:`SSEResponse` — chat-completion chunks streamed as Server-Sent Events, with
  ``reset_after`` (abort the TCP connection after N events: a dropped stream),
  ``close_after`` (clean close mid-body), ``delay`` between events, ``hold`` (an
  event the stream waits for after ``hold_after`` events), ``done`` for the ``[DONE]``
  line; raw ``bytes`` events are written verbatim (malformed chunks);
* :class:`Hang` — never answers (until the client's read time-out, or server stop);
* :class:`Reset` — drops the connection without any response.

Helpers build the common ones: :func:`models_list`, :func:`chat_stream` (text,
reasoning and tool-call deltas split across chunks, usage in the final chunk),
:func:`chat_completion` (non-stream), :func:`error` (status, ``Retry-After``),
:func:`redirect`, :func:`ollama_tags`, :func:`ollama_show`, :func:`ollama_ps`,
:func:`ollama_version`, :func:`ollama_error`, :func:`sequence` (a different response per
call, e.g. 429 then 200). ``tests.fakes.servers`` has the shapes of llama.cpp, LM Studio,
vLLM and OpenRouter.

Every request is recorded in ``fake.requests`` as :class:`RecordedRequest` (method,
path, query, lower-cased headers, raw body and parsed JSON).
"""
from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.fakes.responses import (  # noqa: F401  (re-exported: tests import helpers from here)
    HOLD_SECONDS,
    Handler,
    Hang,
    JSONResponse,
    RawResponse,
    RecordedRequest,
    Reset,
    ResponseSpec,
    SSEResponse,
    chat_chunks,
    chat_completion,
    chat_stream,
    encode_event,
    error,
    models_list,
    ollama_error,
    ollama_ps,
    ollama_show,
    ollama_tags,
    ollama_version,
    redirect,
    route,
    sequence,
)


class FakeProvider:
    """The server. Use as a context manager; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler: Handler = handler or (lambda request: error(404, "no handler set"))
        self.requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return self.url + "/v1"

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def start(self) -> FakeProvider:
        fake = self

        class _Handler(_RequestHandler):
            owner = fake

        self._server = _QuietServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes Hang handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def forwarding_transport(self) -> httpx.BaseTransport:
        """An httpx transport that sends *every* request to this fake, whatever its host.

        For testing behaviour tied to an official URL (``https://api.openai.com/v1``):
        pass it as ``transport=`` together with a resolver that maps the name to a public
        address, so the guard passes and the request still lands here.
        """
        return _ForwardingTransport(self)


class _QuietServer(ThreadingHTTPServer):
    # A provider's listen backlog, not socketserver's 5: with more connections arriving at
    # once than that, Linux drops the extra SYNs and each client waits out a 1 s
    # retransmission before it is even heard (a load run's p99 was that second).
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # aborted connections are the point of some tests; no tracebacks on stderr


class _ForwardingTransport(httpx.BaseTransport):
    def __init__(self, fake: FakeProvider) -> None:
        self._fake = fake
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self._fake.port)
        request.extensions = {k: v for k, v in request.extensions.items() if k != "sni_hostname"}
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


class _RequestHandler(BaseHTTPRequestHandler):
    owner: FakeProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=self.command, path=split.path, query=parse_qs(split.query),
            headers={k.lower(): v for k, v in self.headers.items()}, body=body, json=parsed,
        )
        self.owner.requests.append(request)
        spec = self.owner.handler(request)
        self._respond(spec)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def _respond(self, spec: ResponseSpec) -> None:
        self.close_connection = True
        if isinstance(spec, Reset):
            self._abort()
        elif isinstance(spec, Hang):
            self.owner._stopping.wait(spec.seconds)
        elif isinstance(spec, JSONResponse):
            headers = {"Content-Type": "application/json", **spec.headers}
            self._send_body(spec.status, json.dumps(spec.body).encode(), headers)
        elif isinstance(spec, RawResponse):
            self._send_body(spec.status, spec.body, spec.headers, content_length=spec.content_length)
        elif isinstance(spec, SSEResponse):
            self._send_sse(spec)
        else:
            raise TypeError(f"unknown response spec {spec!r}")

    def _send_body(self, status: int, body: bytes, headers: Mapping[str, str], *, content_length: bool = True) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if content_length:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_sse(self, spec: SSEResponse) -> None:
        self.send_response(spec.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for name, value in spec.headers.items():
            self.send_header(name, value)
        self.end_headers()
        events = list(spec.events) + (["[DONE]"] if spec.done else [])
        try:
            for number, event in enumerate(events):
                if spec.reset_after is not None and number >= spec.reset_after:
                    self._abort()
                    return
                if spec.close_after is not None and number >= spec.close_after:
                    self.wfile.flush()
                    return  # clean FIN without the terminating chunk: an incomplete body
                self._chunk(encode_event(event))
                if spec.hold is not None and number + 1 == spec.hold_after:
                    deadline = time.monotonic() + HOLD_SECONDS
                    while not spec.hold.is_set() and time.monotonic() < deadline:
                        if self.owner._stopping.wait(0.05):
                            return  # the server is stopping: a held answer ends with it
                if spec.delay and self.owner._stopping.wait(spec.delay):
                    return  # the server is stopping: a long pause ends with it
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _abort(self) -> None:
        """Close with RST (SO_LINGER 0): the client sees 'connection reset by peer'."""
        try:
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A started :class:`FakeProvider`; set ``fake_provider.handler`` in the test."""
    with FakeProvider() as fake:
        yield fake
