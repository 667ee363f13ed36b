"""A request's body, read whole at the door before the request counts as waiting (issue #44).

When the door counted a request from its headers, a client held its place for as long as
it took to send the rest: 64 connections that each sent two bytes of a 100-byte login
form held every place of a web process, and everyone else got 503. The door
(agentloom/admission.py) now reads the body first, bounded three ways:

- size: the most any view could take — a multipart body's files and its fields are each
  bounded by ``AGENTLOOM_MAX_REQUEST_BYTES``, the upload endpoint's files by its own
  setting (core/api/uploads.py). A declared ``Content-Length`` past it is refused
  before a byte is read, a body without one as soon as it grows past it: 413 with the
  view's own error, and the connection closed. Under the bound, the views' own checks
  answer exactly as before;
- silence: at most ``AGENTLOOM_WEB_BODY_IDLE_TIMEOUT`` between two pieces of the body;
- time: at most ``AGENTLOOM_WEB_BODY_TIMEOUT`` for all of it, so a client trickling a
  byte now and then is cut too.

Past either time bound: 408 and the connection closed. The body goes into a
``SpooledTemporaryFile`` that moves to disk past ``FILE_UPLOAD_MAX_MEMORY_SIZE``, as
Django's own ASGI handler does, and that same file is handed to Django's handler
(agentloom/handler.py) in place of one of its own: nothing is copied or held twice. Any
other application reads it through :class:`BufferedBody`, as if it were arriving now.

A body that has already arrived — nearly every request — comes in one ``receive()`` that
does not wait, and costs no timer: one check a tick watches every body being read
(:class:`BodyReader`).
"""
from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings

from core.api.uploads import body_bound, request_bytes_bound

REPLAY_CHUNK = 64 * 1024


class BodyRefused(Exception):
    """The body was not read: 408 (too slow) or 413 (too large; ``error`` is what the view
    itself answers past its bound, None for the door's own words)."""

    def __init__(self, status: int, error: Exception | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.error = error


class ClientGone(Exception):
    """The client went away before its body was whole: there is nobody to answer."""


@dataclass(frozen=True)
class BodyLimits:
    """The bounds a body is read under; ``larger(path)`` names the bound and the error of
    the view at ``path``, asked only of a body past ``max_bytes``."""

    idle_seconds: float = 20.0
    total_seconds: float = 300.0
    max_bytes: int = 4 * 1024 * 1024
    spill_bytes: int = 2_621_440  # Django's FILE_UPLOAD_MAX_MEMORY_SIZE default
    larger: Callable[[str], tuple[int, Exception | None]] | None = None

    @classmethod
    def from_settings(cls) -> BodyLimits:
        return cls(idle_seconds=settings.AGENTLOOM_WEB_BODY_IDLE_TIMEOUT,
                   total_seconds=settings.AGENTLOOM_WEB_BODY_TIMEOUT, max_bytes=request_bytes_bound(),
                   spill_bytes=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, larger=body_bound)

    def bound_for(self, path: str) -> tuple[int, Exception | None]:
        return self.larger(path) if self.larger is not None else (self.max_bytes, None)


def declared_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:  # the server has framed the body already; a bad header is its to refuse
                return None
    return None


class BodyReader:
    """Reads bodies under ``limits``, all of them watched by one timer.

    No timer per request (``asyncio.timeout``), for bodies that nearly all arrive with
    their headers: instead each body being read notes
    when it is to be cut, and one check every ``tick`` seconds (a quarter of the shorter
    bound, at most a second) cancels the reads that are late: a body is cut at most a tick
    after its bound. The check runs only while some body is being read."""

    def __init__(self, limits: BodyLimits) -> None:
        self.limits = limits
        self.tick = max(0.01, min(1.0, limits.idle_seconds / 4, limits.total_seconds / 4))
        self.reading: dict[asyncio.Task[Any], float] = {}  # when each read is to be cut
        self.cut: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def read(self, scope: dict[str, Any], receive: Any) -> tuple[IO[bytes], int]:
        """The whole body as a file at its start, and its size; raises :class:`BodyRefused`
        or :class:`ClientGone` instead, having read no more than the bound."""
        limits, path = self.limits, scope.get("path", "")
        bound, error, widened = limits.max_bytes, None, False
        declared = declared_length(scope)
        if declared is not None and declared > bound:
            (bound, error), widened = limits.bound_for(path), True
            if declared > bound:
                raise BodyRefused(413, error)
        task = asyncio.current_task()
        assert task is not None  # an ASGI application runs in a task
        loop = task.get_loop()
        now = loop.time()
        deadline = now + limits.total_seconds
        self.reading[task] = min(deadline, now + limits.idle_seconds)
        if self.timer is None or self.loop is not loop:
            self.loop, self.timer = loop, loop.call_later(self.tick, self._check)
        body: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=limits.spill_bytes, mode="w+b")  # noqa: SIM115
        size = 0
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    raise ClientGone
                chunk = message.get("body", b"")
                if chunk:
                    size += len(chunk)
                    if size > bound and not widened:
                        (bound, error), widened = limits.bound_for(path), True
                    if size > bound:
                        raise BodyRefused(413, error)
                    body.write(chunk)
                if not message.get("more_body", False):
                    break
                self.reading[task] = min(deadline, loop.time() + limits.idle_seconds)
        except asyncio.CancelledError:
            body.close()
            if task not in self.cut:
                raise
            task.uncancel()  # the cancellation was this reader's own, and is answered here
            raise BodyRefused(408) from None
        except BaseException:
            body.close()
            raise
        finally:
            del self.reading[task]
            self.cut.discard(task)
        body.seek(0)
        return body, size

    def _check(self) -> None:
        assert self.loop is not None
        now = self.loop.time()
        for task, cut_at in self.reading.items():
            if cut_at <= now and task not in self.cut:
                # Delivered at the read's ``await receive()``: a task runs nothing between
                # being cancelled here and resuming there.
                self.cut.add(task)
                task.cancel()
        self.timer = self.loop.call_later(self.tick, self._check) if self.reading else None


class BufferedBody:
    """The application's ``receive``: the body read at the door, then the server's own
    messages (``http.disconnect``, which Django's handler waits for while the view runs)."""

    def __init__(self, receive: Any, file: IO[bytes], size: int) -> None:
        self.receive = receive
        self.file = file
        self.size = size
        self.replayed = False

    def take(self) -> IO[bytes]:
        """The whole body as a file, for a handler that reads it so (agentloom/handler.py)."""
        self.replayed = True
        return self.file

    async def __call__(self) -> dict[str, Any]:
        if self.replayed:
            return await self.receive()
        chunk = self.file.read(REPLAY_CHUNK)
        more = self.file.tell() < self.size
        self.replayed = not more
        return {"type": "http.request", "body": chunk, "more_body": more}
