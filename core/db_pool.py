"""Bounded database connections (SPEC §11): psycopg's pool through Django, and a busy
database answered with 503 + Retry-After instead of a 500.

Every process that talks to PostgreSQL borrows from its own pool of at most
``AGENTLOOM_DB_POOL_MAX`` connections (a worker: two per thread it runs, see
``worker_pool_size``), so the sum over the processes of a deployment is known in advance
and stays under the server's ``max_connections`` (docs/operations.md, *Database
connections*). A request that cannot borrow one within ``AGENTLOOM_DB_POOL_TIMEOUT``
seconds has done nothing yet — the first query is where it waits — so it is refused whole
with 503 and the seconds to wait; so is one the server itself turns away (too many
clients) or cannot be reached for.
"""
from __future__ import annotations

import time
from typing import Any

RETRY_AFTER_SECONDS = 2
FILL_CHECK_SECONDS = 0.01  # how often a process starting up looks whether its pool is full
BUSY_MESSAGE = ("The server is busy right now and did not handle this request; nothing was changed. "
                "Try again in a few seconds.")
# PostgreSQL's class 53 (insufficient resources): 53300 too_many_connections, 53000, 53100
# disk full, 53200 out of memory, 53400 configuration limit exceeded.
_BUSY_SQLSTATE_CLASS = "53"
_BUSY_WORDS = ("too many clients", "too many connections", "remaining connection slots")


def pool_options(*, max_size: int, timeout: float, name: str, min_size: int = 1) -> dict[str, Any]:
    """The ``OPTIONS["pool"]`` Django passes to ``psycopg_pool.ConnectionPool``.

    An idle process keeps ``min_size`` connections (opened as it starts, ``pool_fill``), a
    busy one grows to ``max_size`` and gives back what stayed unused for ``max_idle``
    seconds. The pool grows one connection at a time, while its clients wait: a process
    that started with one took most of a second to serve its first fifty questions.
    """
    return {"min_size": max(1, min(min_size, max_size)), "max_size": max_size, "timeout": timeout,
            "max_idle": 60.0, "name": name}


def worker_pool_size(threads: int) -> int:
    """A worker thread runs one run, whose heartbeat beats from a second thread (and a
    tool's thread reads Stop), so two per thread plus the worker's own housekeeping: no
    run ever waits for a connection its own process holds."""
    return 2 * threads + 2


def worker_pool_apply(threads: int) -> None:
    """Called as a worker starts, before its first query: its pool fits its threads,
    unless the operator sized it (``AGENTLOOM_WORKER_DB_POOL_MAX``), and keeps one open
    for each thread (each runs a run, whose first statement should not wait for one)."""
    from django.conf import settings
    from django.db import connections

    if settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        return
    options = settings.DATABASES["default"].setdefault("OPTIONS", {})
    connections.close_all()
    connection = connections["default"]
    # A pool opened before this (an early import) is rebuilt at the new size. Django 5.1's
    # PostgreSQL pool API, which django-stubs 5.2 does not declare:
    connection.close_pool()  # type: ignore[attr-defined]
    if options.get("application_name") == "agentloom-web":
        options["application_name"] = "agentloom-worker"
    if options.get("pool"):
        size = settings.AGENTLOOM_WORKER_DB_POOL_MAX or worker_pool_size(threads)
        options["pool"] = pool_options(max_size=size, min_size=threads, name="worker",
                                       timeout=settings.AGENTLOOM_WORKER_DB_POOL_TIMEOUT)
    connection.settings_dict["OPTIONS"] = options


def pool_fill(*, timeout: float) -> bool:
    """Open this process's pool and wait, at most ``timeout`` seconds, until it holds its
    ``min_size`` connections, opened side by side by the pool's own threads (called as a
    process starts, before it serves: ``agentloom/warmup.py``). True when they are there
    or there is no pool.

    Not psycopg's ``wait()``: on a time-out it closes the pool, and closing waits for each
    of its threads still connecting (20 s measured against a server that accepts and never
    answers). Here a slow database only costs ``timeout``: the pool goes on filling in the
    background, as it would have on the first query.
    """
    from django.db import connections

    pool = getattr(connections["default"], "pool", None)  # SQLite has none; neither has a pool turned off
    if pool is None:
        return True
    pool.open()
    deadline = time.monotonic() + timeout
    while pool.get_stats().get("pool_available", 0) < pool.min_size:
        if time.monotonic() >= deadline:
            return False
        time.sleep(FILL_CHECK_SECONDS)
    return True


def database_busy(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it wraps) says the database had no connection for us: the
    pool's time-out, the server refusing more clients, or the server unreachable."""
    seen = 0
    while exc is not None and seen < 10:
        seen += 1
        name = type(exc).__name__
        if name in {"PoolTimeout", "TooManyRequests"} and type(exc).__module__.startswith("psycopg_pool"):
            return True
        sqlstate = getattr(exc, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate.startswith(_BUSY_SQLSTATE_CLASS):
            return True
        if type(exc).__module__.startswith(("psycopg", "django.db")) and name == "OperationalError":
            text = str(exc).lower()
            if any(words in text for words in _BUSY_WORDS) or text.startswith("connection failed"):
                return True
        exc = exc.__cause__ or exc.__context__
    return False


def connection_give_back() -> None:
    """Give this thread's connection back now (to the pool, or closed without one).

    For a response that outlives its view — an event stream open for minutes — whose
    request would otherwise keep the connection it authenticated with until the stream
    ends: one held per open stream is what ran the server out of connections. A test's
    own transaction is left alone.
    """
    from django.db import connections

    connection = connections["default"]
    if not connection.in_atomic_block:
        connection.close()


def connection_give_back_for_slow_work() -> None:
    """Give this thread's connection back before work that waits on something else (a
    child process, a remote server): held meanwhile, it is one the pool cannot lend to
    anyone (``core/slow_work.py``). The next query borrows one again, as the
    request's first did. Django's ``close()`` hands a pooled connection back to psycopg's
    pool (``putconn``) rather than closing it; without a pool it closes it, and an
    in-memory SQLite database is never closed.

    No transaction may be open: its connection cannot be given back, and slow work inside
    one would hold its locks for as long (STYLE 10) — RuntimeError, a bug to fix where the
    transaction opens. A test's own enclosing transaction (pytest-django's, marked by
    Django's test case) is the exception: its test sees the work done, on one connection.
    """
    from django.db import connections

    connection = connections["default"]
    if connection.in_atomic_block:
        # ``_from_testcase`` is Django's own mark on the atomic blocks a TestCase opens.
        if all(getattr(block, "_from_testcase", False) for block in connection.atomic_blocks):
            return
        raise RuntimeError("slow work inside a database transaction: close the transaction first")
    connection.close()


class GiveBackMiddleware:
    """Outermost: the request's connection goes back to the pool as soon as the response
    is made, not after it was sent (under load the event loop can take a while to send,
    and a connection held meanwhile is one a waiting request could have had). A streaming
    response keeps it: its body may still read (the event stream gives its own back)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not response.streaming:
            connection_give_back()
        return response
