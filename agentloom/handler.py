"""The web process's ASGI handler: Django's, with each request's synchronous work done in
one hand-off to a kept thread (issue #29).

Every middleware the platform runs is synchronous (Django's own, WhiteNoise, ours) and so
is every view. Django's ASGI handler builds its chain for an asynchronous caller and
adapts each boundary as it meets it: the middleware chain runs in a thread, comes back to
the event loop for the view's resolution, goes to a thread again for CSRF's
``process_view`` and again for the view, then back. Here the chain is built for
synchronous use (as under WSGI) and run whole, view included, in one call.

Django also gives every request a new thread (a new executor per ``ThreadSensitiveContext``)
and, once the request is done, starts one more thread to join it. Here the request borrows
a single-thread executor kept for the next request instead, as a WSGI server's threads are.

What stays on the event loop is Django's own: the request signals, sending the response
(a streaming one is iterated there, as an event stream must be). The body has been read
by then, at the door (agentloom/request_body.py), into the kind of file Django would have
made: the handler takes that file instead of copying it into another.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest, HttpResponseBase

from agentloom.request_body import BufferedBody

# Idle request threads kept for the next requests; a burst past it makes threads that end
# with their request. About the requests one process lets wait at once
# (AGENTLOOM_WEB_MAX_PENDING), whose threads are the ones busy together.
KEEP_THREADS = 64


class RequestThreads:
    """Single-thread executors lent to requests, one each, and kept once given back.

    A request's thread-sensitive work (its middleware and view, the request signals, its
    database connection) all runs on the one thread of the executor it borrowed, as under
    Django's own per-request executor. Django's request signals close a connection a
    previous request left, as they do for a WSGI server's reused threads."""

    def __init__(self, *, keep: int = KEEP_THREADS) -> None:
        self.keep = keep
        self.idle: list[ThreadPoolExecutor] = []
        self.lock = threading.Lock()  # given back from the event loop, counted from tests

    def borrow(self) -> ThreadPoolExecutor:
        with self.lock:
            if self.idle:
                return self.idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentloom-request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        # A request cancelled while its thread still works (its client went away) gives the
        # executor back busy: the next borrower's work waits behind it, never beside it.
        with self.lock:
            if len(self.idle) < self.keep:
                self.idle.append(executor)
                return
        executor.shutdown(wait=False)


class OneHopHandler(ASGIHandler):
    """``ASGIHandler`` whose request runs its synchronous chain in one ``sync_to_async``
    call, on a thread borrowed from ``threads`` for the whole request."""

    def __init__(self, *, threads: RequestThreads | None = None) -> None:
        BaseHandler.__init__(self)  # not ASGIHandler's: it would build the chain for async callers
        self.load_middleware(is_async=False)
        self.threads = threads or RequestThreads()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # as Django's: websockets and the lifespan are not ours to serve here
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.threads.borrow()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give_back(executor)

    async def read_body(self, receive: Any) -> Any:
        if isinstance(receive, BufferedBody):
            return receive.take()
        return await super().read_body(receive)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
