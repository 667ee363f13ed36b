"""The bridge between the worker's threads and the MCP SDK, which is async (TOOL-4).

The run loop is synchronous: a Celery worker runs each run on a thread, and tools run on
threads of their own so that Stop and time-outs can be watched. The SDK's sessions are
anyio objects bound to the event loop they were opened in. So each process has **one event
loop on one daemon thread**, started the first time it is needed (``portal()``), and every
protocol session of the process lives there as a task:

* a session is opened by a task that enters the SDK's ``Client`` and stays inside it until
  told to close — anyio requires a context to be left by the task that entered it;
* a thread calls into the loop through anyio's blocking portal and waits on a
  ``concurrent.futures.Future``, so it can give up (Stop, a time-out) by cancelling the
  future: the SDK then sends the protocol's ``notifications/cancelled``;
* nothing the loop runs touches the database; progress notifications are handed back to
  the calling thread through a queue.

Why not ``asyncio.run`` per call: a session is reused across a run's calls (TOOL-4), so it
must outlive one call; and why not a loop per run: a worker runs many runs at once, and one
loop serves them all without a thread each.
"""
from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

T = TypeVar("T")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_portal_cm: Any = None
_pid = 0


def portal() -> BlockingPortal:
    """The process's portal into its MCP event loop (started on first use, and again in a
    forked child, which inherits the parent's portal but not its thread)."""
    global _portal, _portal_cm, _pid
    with _lock:
        if _portal is None or _pid != os.getpid():
            _portal_cm = start_blocking_portal(backend="asyncio")
            _portal = _portal_cm.__enter__()
            _pid = os.getpid()
            atexit.register(_stop)
        return _portal


def _stop() -> None:
    global _portal, _portal_cm
    with _lock:
        cm, _portal, _portal_cm = _portal_cm, None, None
    if cm is not None:
        try:
            cm.__exit__(None, None, None)
        except Exception:  # the process is exiting; sessions are gone with it
            pass


def submit(function: Callable[..., Awaitable[T]], *args: Any) -> Future[T]:
    """Start ``function(*args)`` in the loop; the future can be waited on or cancelled."""
    return portal().start_task_soon(function, *args)


def call(function: Callable[..., Awaitable[T]], *args: Any, timeout: float) -> T:
    """Run ``function(*args)`` in the loop and wait at most ``timeout`` seconds for it.

    Raises ``TimeoutError`` (after cancelling it) when it takes longer.
    """
    future = submit(function, *args)
    try:
        return future.result(timeout=timeout)
    except TimeoutError:
        future.cancel()
        raise
