"""FAKES of two things llama-cpp-python's server really does (issue #45, read at the HTTP
level against the real server), for the fast suite; the real server runs in the tests
marked for it where it is built.

* :func:`cut_stream` -- it runs one request at a time, and when another request waits it
  ends the running stream with ``data: [DONE]`` and no finish reason: the chunks so far
  (role, some content, each with ``finish_reason: null``), then ``[DONE]``.
* :class:`ClosingKeepAliveServer` -- a streamed prompt over its window is answered
  ``200`` with ``text/event-stream`` and a clean, empty chunked body on a keep-alive
  connection, which the server closes a few milliseconds later without reading what was
  sent on it meanwhile. Asked without streaming, on a connection that is still open, it
  answers the real ``400`` naming the window. Raw sockets, because the point is what
  happens on one TCP connection: ``http.server`` closes differently.
"""
from __future__ import annotations

import json
import select
import socket
import threading
from typing import Any

from tests.fakes.responses import SSEResponse, chat_chunks

# How long the server keeps a refused stream's connection open after its empty body: "a
# few milliseconds" measured; the fake closes at once if a request arrives meanwhile, so
# a question sent on that connection is never answered, whatever the machine's speed.
CLOSE_AFTER_SECONDS = 0.05


def cut_stream(text: list[str], **chunk_options: Any) -> SSEResponse:
    """A stream ended by ``[DONE]`` before its finish chunk (one-at-a-time server cut)."""
    chunks = chat_chunks(text, **chunk_options)
    finished = [i for i, c in enumerate(chunks) if c.get("choices") and c["choices"][0].get("finish_reason")]
    return SSEResponse(events=chunks[:finished[0]] if finished else chunks, done=True)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The fake's count: a quarter of the messages' JSON (the real server tokenizes)."""
    return len(json.dumps(body.get("messages", []))) // 4


class ClosingKeepAliveServer:
    """A loopback server refusing streamed prompts of ``window`` tokens or more the way
    llama-cpp-python's does; ``connections`` counts TCP connections accepted, ``asked``
    records ``(streamed, prompt_tokens, answered_status)`` of every request it read."""

    def __init__(self, *, window: int = 2048, model: str = "local-smollm2") -> None:
        self.window, self.model = window, model
        self.connections = 0
        self.asked: list[tuple[bool, int, int]] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def __enter__(self) -> ClosingKeepAliveServer:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        buffer = b""
        try:
            while not self._stopped.is_set():
                request, buffer = _read_request(conn, buffer)
                if request is None:
                    return
                if not self._answer(conn, request):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, request: tuple[str, str, bytes]) -> bool:
        """Answer one request; False once the connection is to be closed."""
        method, path, raw = request
        if method != "POST" or path != "/v1/chat/completions":
            _send(conn, 404, b'{"detail":"Not Found"}')
            return True
        body = json.loads(raw or b"{}")
        streamed, prompt = body.get("stream") is True, prompt_tokens(body)
        if prompt >= self.window and streamed:
            self.asked.append((True, prompt, 200))
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                         b"cache-control: no-store\r\nx-accel-buffering: no\r\ntransfer-encoding: chunked\r\n\r\n"
                         b"0\r\n\r\n")
            select.select([conn], [], [], CLOSE_AFTER_SECONDS)  # closes a few ms later, unread
            return False
        if prompt >= self.window:
            self.asked.append((False, prompt, 400))
            max_tokens = body.get("max_tokens")
            _send(conn, 400, json.dumps({"error": {
                "message": f"This model's maximum context length is {self.window} tokens. However, you requested "
                           f"{(max_tokens or 0) + prompt} tokens ({prompt} in the messages, {max_tokens} in the "
                           "completion). Please reduce the length of the messages or completion.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}).encode())
            return True
        self.asked.append((streamed, prompt, 200))
        common = {"id": "chatcmpl-5f1d6c8e", "created": 1736071502, "model": self.model}
        if not streamed:
            _send(conn, 200, json.dumps({**common, "object": "chat.completion", "choices": [{
                "index": 0, "message": {"role": "assistant", "content": "Short answer."}, "logprobs": None,
                "finish_reason": "stop"}]}).encode())
            return True
        events = [json.dumps({**common, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})
            for delta, finish in (({"role": "assistant"}, None), ({"content": "Short answer."}, None), ({}, "stop"))]
        payload = b"".join(f"data: {event}\n\n".encode() for event in [*events, "[DONE]"])
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                     b"transfer-encoding: chunked\r\n\r\n" + f"{len(payload):x}\r\n".encode() + payload
                     + b"\r\n0\r\n\r\n")
        return True


def _send(conn: socket.socket, status: int, body: bytes) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    conn.sendall(f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
                 f"content-length: {len(body)}\r\n\r\n".encode() + body)


def _read_request(conn: socket.socket, buffer: bytes) -> tuple[tuple[str, str, bytes] | None, bytes]:
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        rest += chunk
    return (method, path.split("?", 1)[0], rest[:length]), rest[length:]
