"""HTTP as the servers write it, read on a raw socket: what ``httpx`` would smooth over.

A pooled client hides whether the server closed a keep-alive connection after answering,
and whether a chunked body was finished: both are what issue #45 is about, so the
characterisation tests (and the fakes' pinning tests) read the bytes themselves.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

READ_TIMEOUT = 120.0  # seconds a small model on two busy cores may take to answer, not a margin


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes  # the de-chunked body
    finished: bool  # the chunked body ended with its zero-size chunk (or Content-Length was met)

    def json(self) -> Any:
        return json.loads(self.body)

    def sse_data(self) -> list[str]:
        """The ``data:`` payloads of an event stream, in order (comments left out)."""
        out = []
        for line in self.body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                out.append(line[5:].strip())
        return out

    def chunks(self) -> list[dict[str, Any]]:
        return [json.loads(d) for d in self.sse_data() if d != "[DONE]"]


class Connection:
    """One keep-alive HTTP/1.1 connection to ``127.0.0.1:port``."""

    def __init__(self, port: int, *, timeout: float = READ_TIMEOUT) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, method: str, path: str, body: Any = None) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n"
                f"Accept: */*\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
        self.sock.sendall(head.encode() + payload)

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def _line(self) -> bytes | None:
        while b"\r\n" not in self.buffer:
            if not self._fill():
                return None
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def _exactly(self, n: int) -> bytes | None:
        while len(self.buffer) < n:
            if not self._fill():
                return None
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_head(self) -> tuple[int, dict[str, str]]:
        status_line = self._line()
        assert status_line, "the server closed the connection without answering"
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := self._line()):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def read_chunk(self) -> bytes | None:
        """One chunk of a chunked body; b"" for the last one, None when the connection closed first."""
        size_line = self._line()
        if size_line is None:
            return None
        size = int(size_line.split(b";")[0], 16)
        if size == 0:  # the last chunk: trailers (none here) up to an empty line
            while (trailer := self._line()):
                pass
            return b"" if trailer is not None else None
        data = self._exactly(size + 2)
        if data is None:
            return None
        return data[:-2]

    def read_body(self, headers: dict[str, str]) -> tuple[bytes, bool]:
        if "chunked" in headers.get("transfer-encoding", ""):
            body = b""
            while True:
                chunk = self.read_chunk()
                if chunk is None:
                    return body, False
                if chunk == b"":
                    return body, True
                body += chunk
        if "content-length" in headers:
            length = int(headers["content-length"])
            data = self._exactly(length)
            return (data or b""), data is not None
        body = self.buffer
        while self._fill():
            pass
        return body + self.buffer[len(body):], True

    def request(self, method: str, path: str, body: Any = None) -> RawAnswer:
        self.send(method, path, body)
        status, headers = self.read_head()
        data, finished = self.read_body(headers)
        return RawAnswer(status=status, headers=headers, body=data, finished=finished)

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        """True when the server closes this connection (EOF) within ``timeout`` seconds; False
        when it is still open then. Waits on the socket, no sleep."""
        if self.buffer:
            return False
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True


def chat(model: str, content: str | list[dict[str, Any]], *, stream: bool = False, max_tokens: int | None = 16,
         **extra: Any) -> dict[str, Any]:
    messages = content if isinstance(content, list) else [{"role": "user", "content": content}]
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": stream, "temperature": 0}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body | extra
