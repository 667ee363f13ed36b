"""A strict fake of llama-cpp-python's server (``python -m llama_cpp.server``), issue #45.

A FAKE, for speed and for machines without the built server: the real one runs in the
suite (``tests/local_servers``, ``make local-models``), and ``tests/local_servers/
test_fakes_pinned.py`` asks both the same requests so this copy cannot drift. What it
copies, from the real server read at the HTTP level (``test_llama_cpp_python_wire.py``) and
its source (``llama_cpp/server/app.py`` and ``errors.py`` of the pinned release):

* **One request at a time**, every path included (``GET /v1/models`` too): the server's
  two locks (``llama_outer_lock``, ``llama_inner_lock``). A request that arrives while a
  stream is being written waits on the inner lock holding the outer one; the stream sees
  the outer lock taken after its next chunk, writes ``data: [DONE]`` and ends — with no
  chunk carrying a finish reason (``interrupt_requests``, on by default). A plain
  (non-streamed) answer is never interrupted: the waiting request waits it out.
* **Keep-alive** connections (uvicorn): a connection is kept after an answer, except after
  a refused stream.
* **A streamed prompt over the window**: ``200``, ``text/event-stream``, a finished but
  empty chunked body (the event stream began before the model refused it), and the
  connection is closed right after. **No** ``: ping`` comment: sse-starlette pings every
  15 seconds, and a refusal comes within milliseconds.
* **A plain prompt over the window**: ``400`` ``context_length_exceeded`` with "This
  model's maximum context length is N tokens. However, you requested M tokens (P in the
  messages, C in the completion)…" (C printed ``None`` when ``max_tokens`` is absent).
* Under the window: an answer cut to what the window leaves (``finish_reason: length``);
  streams are one token per chunk, ``logprobs: null``, a last chunk with an empty delta
  and the finish reason, then ``[DONE]``; no usage in a stream; a plain answer has usage.
* Its errors for what its chat templates cannot read: **500** for an assistant ``content``
  of ``null``, for the ``developer`` role and for a list of parts outside a user turn.
* Its token count: :func:`count_prompt` — SmolLM2's chat template (with the default system
  turn it adds when a conversation has none) counted by character classes measured on
  SmolLM2's tokenizer; within a tenth of the real count on the pinned prompts.

``hold_after``: a stream pauses after that many chunks until another request waits or
``release`` is set — "a long answer is still being written" without timing. ``requests``
records (method, path, body) in arrival order; ``refused`` (streamed, prompt tokens).
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.windowed import LONG_ANSWER

SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store",
               "connection": "keep-alive", "x-accel-buffering": "no", "transfer-encoding": "chunked"}
HOLD_SECONDS = 60.0  # a held stream goes on by itself after this, so a broken test cannot hang
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# Measured on SmolLM2's tokenizer (a 49k-entry BPE, English-heavy) through the real server:
# English words are one token each, longer ones two; digits one each; a CJK character
# about 1.6 (most are one or two byte-level tokens); punctuation one each.
_PIECES = re.compile(r"[A-Za-z]+|\d|[\u3400-\u9fff\uf900-\ufaff]|\s+|[^\sA-Za-z\d]")


def count_text(text: str) -> int:
    """Tokens SmolLM2's tokenizer makes of ``text``, by character class (close, not exact)."""
    count = 0.0
    for piece in _PIECES.findall(text):
        if piece[0].isalpha() and piece.isascii():
            count += 1 + len(piece) // 9
        elif piece.isspace():
            count += 0 if piece == " " else max(1, len(piece) // 4)
        elif "\u3400" <= piece <= "\ufaff":
            count += 1.6
        else:
            count += 1
    return round(count)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def count_prompt(messages: list[dict[str, Any]]) -> int:
    """The prompt tokens of a chat request: SmolLM2's ChatML template (``<|im_start|>role\\n
    text<|im_end|>\\n`` per turn, 5 tokens of frame; the default system turn first when
    there is none; ``<|im_start|>assistant\\n`` to open the answer, 4 tokens)."""
    turns = list(messages)
    if not turns or turns[0].get("role") != "system":
        turns = [{"role": "system", "content": DEFAULT_SYSTEM}, *turns]
    total = 4
    for message in turns:
        total += 5 + count_text(_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            total += count_text(json.dumps(call.get("function", {})))
    return total


def unreadable(messages: list[dict[str, Any]]) -> str | None:
    """Why the real server answers 500 to these messages (its templates), or None."""
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "developer":
            return "developer"
        if role == "assistant" and content is None:
            return "content null"
        if isinstance(content, list) and role != "user":
            return "content list"
    return None


@dataclass
class LlamaCppPythonFake:
    """The fake server; ``with LlamaCppPythonFake() as server: server.base_url``."""

    window: int = 2048
    model: str = "smollm2-135m-instruct"
    answer: Callable[[dict[str, Any]], str] = lambda body: LONG_ANSWER
    hold_after: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    refused: list[tuple[bool, int]] = field(default_factory=list)
    interrupted: int = 0

    def __post_init__(self) -> None:
        self._outer = threading.Lock()
        self._inner = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- the server's two locks (app.py get_llama_proxy) -----------------------------------
    def _acquire(self) -> None:
        with self._outer:
            self._inner.acquire()

    def _release(self) -> None:
        self._inner.release()

    def someone_waits(self) -> bool:
        return self._outer.locked()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "start the fake first"
        return int(self._server.server_address[1])

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def start(self) -> LlamaCppPythonFake:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LlamaCppPythonFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answers ---------------------------------------------------------------------------
    def tokens(self, body: dict[str, Any]) -> tuple[int, list[str], str]:
        """(prompt tokens, the answer's tokens, finish reason) for a request that fits."""
        prompt = count_prompt(body.get("messages") or [])
        max_tokens = body.get("max_tokens")
        room = self.window - prompt
        limit = room if max_tokens is None or max_tokens <= 0 or max_tokens > room else max_tokens
        pieces = re.findall(r"\s*\S+", self.answer(body))
        if len(pieces) > limit:
            return prompt, pieces[:limit], "length"
        return prompt, pieces, "stop"

    def over_window(self, body: dict[str, Any]) -> int | None:
        prompt = count_prompt(body.get("messages") or [])
        return prompt if prompt >= self.window else None


class _Server(ThreadingHTTPServer):
    request_queue_size = 64

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


COMMON = {"id": "chatcmpl-5f1d6c8e-2b7a-4c1e-9d3f-0a6b8e4c2d71", "created": 1736071502}


class _Handler(BaseHTTPRequestHandler):
    owner: LlamaCppPythonFake
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _read(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def do_GET(self) -> None:  # noqa: N802
        fake = self.owner
        fake.requests.append(("GET", self.path, None))
        if self.path != "/v1/models":
            self._json(404, {"detail": "Not Found"})
            return
        fake._acquire()  # listing the models takes the model's lock too
        try:
            self._json(200, {"object": "list", "data": [
                {"id": fake.model, "object": "model", "owned_by": "me", "permissions": []}]})
        finally:
            fake._release()

    def do_POST(self) -> None:  # noqa: N802
        fake = self.owner
        body = self._read()
        fake.requests.append(("POST", self.path, body))
        if self.path != "/v1/chat/completions":
            self._json(404, {"detail": "Not Found"})
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._json(422, {"detail": [{"type": "missing", "loc": ["body", "messages"], "msg": "Field required"}]})
            return
        why = unreadable(body["messages"])
        if why:
            # Its request types reject the message (pydantic, inside the route): a 500 whose
            # message lists the validation errors, streamed or not, before any stream begins.
            self._json(500, {"error": {"message": f"validation errors: {why}", "type": "internal_server_error",
                                       "param": None, "code": None}})
            return
        if body.get("stream") is True:
            self._stream(body)
        else:
            self._plain(body)

    def _plain(self, body: dict[str, Any]) -> None:
        fake = self.owner
        fake._acquire()
        try:
            prompt = fake.over_window(body)
            if prompt is not None:
                fake.refused.append((False, prompt))
                max_tokens = body.get("max_tokens")
                self._json(400, {"error": {
                    "message": f"This model's maximum context length is {fake.window} tokens. However, you "
                               f"requested {(max_tokens or 0) + prompt} tokens ({prompt} in the messages, "
                               f"{max_tokens} in the completion). Please reduce the length of the messages or "
                               "completion.",
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
                return
            prompt, pieces, finish = fake.tokens(body)
            text = "".join(pieces)
            self._json(200, {**COMMON, "object": "chat.completion", "model": fake.model, "choices": [{
                "index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                "finish_reason": finish}], "usage": {"prompt_tokens": prompt, "completion_tokens": len(pieces),
                                                     "total_tokens": prompt + len(pieces)}})
        finally:
            fake._release()

    def _stream(self, body: dict[str, Any]) -> None:
        fake = self.owner
        # The event stream begins before the model is asked (EventSourceResponse).
        self.send_response(200)
        for name, value in SSE_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()
        fake._acquire()
        try:
            prompt = fake.over_window(body)
            if prompt is not None:
                fake.refused.append((True, prompt))
                self._end_refused()
                return
            _, pieces, finish = fake.tokens(body)
            for number, chunk in enumerate(self._chunks(fake, pieces, finish)):
                self._chunk(chunk)
                if fake.hold_after is not None and number + 1 == fake.hold_after:
                    waited = 0.0
                    while not fake.someone_waits() and not fake.release.wait(0.02) and waited < HOLD_SECONDS:
                        waited += 0.02
                if fake.someone_waits():
                    # interrupt_requests: [DONE], and the stream ends without a finish reason.
                    fake.interrupted += 1
                    self._chunk(b"data: [DONE]\n\n")
                    break
            else:
                self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            fake._release()

    def _chunks(self, fake: LlamaCppPythonFake, pieces: list[str], finish: str) -> Iterator[bytes]:
        def event(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            payload = {**COMMON, "model": fake.model, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
            return f"data: {json.dumps(payload)}\n\n".encode()

        yield event({"role": "assistant"})
        for piece in pieces:
            yield event({"content": piece})
        yield event({}, finish)

    def _end_refused(self) -> None:
        """The empty, finished body of a refused stream, then the connection closed."""
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
