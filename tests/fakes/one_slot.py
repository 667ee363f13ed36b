"""A FAKE of llama-cpp-python's server answering one request at a time (CAT-11).

What the real one does (``llama_cpp/server/app.py``, abetlen/llama-cpp-python): every
route that touches the model — ``/v1/chat/completions`` and ``/v1/models`` alike — takes
the model through ``get_llama_proxy``, a double lock (an outer lock taken on arrival and
given back once the inner one is held). While a stream is being sent, the publisher
checks after every chunk whether the *outer* lock is taken, i.e. whether another request
is waiting (``interrupt_requests``, on by default); if so it sends ``data: [DONE]`` at once
— no chunk with a finish reason before it — and ends the stream, and the newcomer gets
the model. So a second caller never waits: the first one's answer is cut short, looking
like a clean end.

This fake is that, on a real loopback socket: the same double lock, the same check after
each chunk, the same ``[DONE]`` with no finish reason. It records how many requests it
held at once (``most_at_once``) and every stream it cut (``interrupted``). To make
"another request came while an answer streamed" certain rather than timed, the *first*
answer stops after its first chunk until ``release`` is set (at most ``HOLD_SECONDS``),
checking for a newcomer as the real one does between chunks.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_SECONDS = 60.0
MODEL = "local-llama-3.1-8b-q4"


class OneSlotServer:
    """``with OneSlotServer() as server:``; ``server.base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, *, words: tuple[str, ...] = ("All ", "done ", "here."), hold_first: bool = True) -> None:
        self.words = words
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self.outer = threading.Lock()
        self.inner = threading.Lock()
        self._count = threading.Lock()
        self.at_once = 0
        self.most_at_once = 0
        self.interrupted = 0
        self.completed = 0
        self.streams = 0
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> OneSlotServer:
        owner = self

        class Handler(_Handler):
            server_fake = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self.release.set()
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- the double lock of get_llama_proxy -------------------------------------------

    def enter(self) -> None:
        with self._count:
            self.at_once += 1
            self.most_at_once = max(self.most_at_once, self.at_once)
        self.outer.acquire()
        self.inner.acquire()
        self.outer.release()

    def leave(self) -> None:
        self.inner.release()
        with self._count:
            self.at_once -= 1


class _Handler(BaseHTTPRequestHandler):
    server_fake: OneSlotServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path != "/v1/models":
            return self._json(404, {"detail": "Not Found"})
        fake = self.server_fake
        fake.enter()
        try:
            self._json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "owned_by": "me", "permissions": []}]})
        finally:
            fake.leave()

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path != "/v1/chat/completions":
            return self._json(404, {"detail": "Not Found"})
        fake = self.server_fake
        fake.enter()
        try:
            if body.get("stream") is True:
                self._stream(fake)
            else:
                text = "".join(fake.words)
                self._json(200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1736071502,
                                 "model": MODEL, "choices": [{"index": 0, "message": {"role": "assistant",
                                                                                      "content": text},
                                                              "logprobs": None, "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
                fake.completed += 1
        finally:
            fake.leave()

    def _stream(self, fake: OneSlotServer) -> None:
        fake.streams += 1
        first = fake.streams == 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        chunks = [{"role": "assistant"}] + [{"content": word} for word in fake.words]
        for number, delta in enumerate(chunks):
            self._event(self._chunk(delta, None))
            if first and number == 1:  # hold the first answer, watching for a newcomer as the real one does
                while not fake.release.wait(0.02) and not fake.outer.locked() and not fake._stopping.is_set():
                    pass
            if fake.outer.locked():  # interrupt_requests: another request waits
                fake.interrupted += 1
                self._event(b"data: [DONE]\n\n")
                self._end()
                return
        self._event(self._chunk({}, "stop"))
        self._event(b"data: [DONE]\n\n")
        self._end()
        fake.completed += 1

    @staticmethod
    def _chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        payload = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1736071502, "model": MODEL,
                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        return f"data: {json.dumps(payload)}\n\n".encode()

    def _event(self, data: bytes) -> None:
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def _end(self) -> None:
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def _json(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(raw)
