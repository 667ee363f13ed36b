"""The web process's ASGI handler (agentloom/handler.py, issue #29): a request's synchronous
work is one hand-off to a thread, and that thread is kept for the next request.

Driven over ASGI in the test's own event loop, so every hand-off to a thread is seen: the
loop's ``run_in_executor`` is where asgiref sends each one."""
from __future__ import annotations

import asyncio
import threading

import pytest
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_started

from agentloom.handler import OneHopHandler, RequestThreads


async def _get(app, path: str) -> int:
    sent: list[dict] = []
    body_read = False

    async def receive() -> dict:
        nonlocal body_read
        if not body_read:
            body_read = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays connected until the handler is done
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": [],
             "server": ("testserver", 80), "client": ("127.0.0.1", 50000), "scheme": "http"}
    await app(scope, receive, send)
    return next(m for m in sent if m["type"] == "http.response.start")["status"]


def _hand_offs(app, path: str, requests: int = 1) -> tuple[list[int], int]:
    """The statuses of ``requests`` GETs of ``path``, and how many times the event loop
    handed work to a thread for them."""
    async def scenario() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        count = 0
        original = loop.run_in_executor

        def counting(executor, func, *args):
            nonlocal count
            count += 1
            return original(executor, func, *args)

        loop.run_in_executor = counting
        try:
            return [await _get(app, path) for _ in range(requests)], count
        finally:
            del loop.run_in_executor

    return asyncio.run(scenario())


def test_a_request_runs_its_middleware_and_view_in_one_hand_off():
    statuses, ours = _hand_offs(OneHopHandler(), "/no-such-page")
    django_statuses, django = _hand_offs(ASGIHandler(), "/no-such-page")
    assert statuses == django_statuses == [404]
    # The request's signal receivers, the whole chain with its view, and closing the
    # response: three. Django's own handler crosses again for the view's resolution,
    # CSRF's process_view and the view itself.
    assert ours == 3, ours
    assert django >= ours + 2, (django, ours)


def test_requests_reuse_a_kept_thread_instead_of_starting_one_each():
    seen: set[int] = set()

    def note_thread(**kwargs) -> None:
        seen.add(threading.get_ident())

    request_started.connect(note_thread, weak=False)
    threads = RequestThreads()
    try:
        statuses, _ = _hand_offs(OneHopHandler(threads=threads), "/no-such-page", requests=10)
        kept = len(threads.idle)
    finally:
        request_started.disconnect(note_thread)
        for executor in threads.idle:
            executor.shutdown(wait=True)
    assert statuses == [404] * 10
    assert len(seen) == 1, f"ten requests ran on {len(seen)} threads"
    assert kept == 1


def test_a_burst_past_what_is_kept_ends_the_extra_threads():
    threads = RequestThreads(keep=2)
    lent = [threads.borrow() for _ in range(5)]
    for executor in lent:
        executor.submit(lambda: None).result()  # each has started its thread
        threads.give_back(executor)
    assert threads.idle == lent[:2]
    for executor in lent[2:]:
        with pytest.raises(RuntimeError, match="shutdown"):  # told to end its thread when given back
            executor.submit(lambda: None)
    for executor in lent[:2]:
        assert executor.submit(lambda: 42).result() == 42  # kept, and still takes work
        executor.shutdown(wait=True)
