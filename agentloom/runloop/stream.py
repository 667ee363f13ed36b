"""Server-Sent Events for a run (LOOP-5): the persisted log, resumable with Last-Event-ID.

The database is the source of truth; Redis pub/sub (when configured) says when to read
it: a stream on Redis reads after each nudge and otherwise only every ``CHECK_SECONDS``
(issue #29: 200 idle streams were 200 reads a second). Without Redis, or when it fails,
the stream polls the database. A poll that finds no connection free leaves the stream
open and reads again shortly.

Bounded (SPEC §11): a stream ends once its run is finished and every event was sent (a
browser reconnecting after the last event gets an empty stream at once, not a 30-minute
poll), and within one heartbeat of its reader losing sight of the run (they left the
space); it ends after a maximum lifetime in any case (the browser reconnects). Each person
has at most ``AGENTLOOM_MAX_STREAMS_PER_USER`` streams open, and no stream holds a thread
or a database connection between its polls: each poll runs on the shared executor and
closes its connection before it returns.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError

from agentloom.db_pool import RETRY_AFTER_SECONDS, connection_give_back, database_busy
from sessions.models import Run, RunEvent
from sessions.selectors import run_visible_to
from sessions.services.events import channel_for, event_type_current

logger = logging.getLogger("agentloom.stream")

POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 15.0
# How often an idle stream re-reads its run's status and its reader's access. Events are
# read through the reader's access whenever they are read, so this only bounds how long a
# stream of a reader who left stays open (well within one heartbeat), and how soon a run
# that ended without its finished event is noticed; on Redis it is also the only read of
# an idle stream: between nudges a stream reads nothing.
CHECK_SECONDS = 5.0
MAX_STREAM_SECONDS = 30 * 60
PAGE = 500
_ACTIVE = frozenset(Run.ACTIVE_STATUSES)


def event_as_dict(event: RunEvent) -> dict[str, Any]:
    return {"seq": event.seq, "type": event_type_current(event.type), "data": event.payload}


def events_after(*, run_id: int, after: int, limit: int = PAGE) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit])


def sse_frame(event: RunEvent) -> bytes:
    """One event as SSE, under its current name: never one of EventSource's own (``error``
    would also reach the browser's connection-lost handler)."""
    data = json.dumps(event.payload, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event_type_current(event.type)}\ndata: {data}\n\n".encode()


_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _redis_for_this_loop():
    """One Redis client per event loop, shared by its streams: its pool hands each stream's
    subscription a connection made once (a client per stream cost a new connection object,
    with its set-up, for every stream opened)."""
    import redis.asyncio as aioredis

    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = aioredis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=5)
        _clients[loop] = client
    return client


class _Waker:
    """Waits for a pub/sub nudge, or just sleeps when there is no Redis (or it broke)."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.pubsub = None

    async def open(self) -> None:
        if not settings.REDIS_URL:
            return
        try:
            self.pubsub = _redis_for_this_loop().pubsub()
            await self.pubsub.subscribe(channel_for(self.run_id))
        except Exception:
            logger.warning("run %s: Redis unavailable, streaming by polling", self.run_id, exc_info=True)
            await self.close()

    async def wait(self, seconds: float) -> bool:
        """Whether there may be something new to read: a nudge came, or (polling) always."""
        if self.pubsub is None:
            await asyncio.sleep(min(seconds, POLL_SECONDS))
            return True
        try:
            message = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=min(seconds, 1.0))
        except Exception:
            logger.warning("run %s: Redis failed mid-stream, falling back to polling", self.run_id, exc_info=True)
            await self.close()
            return True
        return message is not None

    async def close(self) -> None:
        pubsub, self.pubsub = self.pubsub, None
        try:
            if pubsub is not None:
                await pubsub.aclose()  # its connection goes back to the loop's client
        except Exception:
            pass


def stream_poll(*, run_id: int, user_id: int, after: int, check: bool) -> tuple[list[RunEvent], str | None]:
    """One poll: with ``check``, the run's status as ``user_id`` may see it (None once they
    may not), then the events after ``after``.

    The status is read first: a run is finished in the same transaction as its
    ``run_finished`` event, so events read after a finished status are all there will be
    (until a resume). The events are read through the same reach as the status, so not
    one is sent once the reader has lost it. The thread's connection is closed before
    returning.
    """
    try:
        status = run_visible_to(run_id=run_id, user_id=user_id) if check else ""
        events = list(RunEvent.objects.filter(
            run_id=run_id, seq__gt=after, run__session__user_id=user_id,
            run__session__space__memberships__user_id=user_id).order_by("seq")[:PAGE])
        return events, status
    finally:
        connection_give_back()


class StreamSlot:
    """One of a person's ``AGENTLOOM_MAX_STREAMS_PER_USER`` places, counted in the cache of
    this web process (the stream lives here); released once, however the stream ends."""

    def __init__(self, user_id: int) -> None:
        self.key = f"agentloom:streams:{user_id}"
        self.held = False

    def take(self) -> bool:
        cache.add(self.key, 0, timeout=MAX_STREAM_SECONDS + 60)  # the time-out only bounds a lost count
        try:
            count = cache.incr(self.key)
        except ValueError:  # expired between add and incr
            cache.set(self.key, 1, timeout=MAX_STREAM_SECONDS + 60)
            count = 1
        if count > settings.AGENTLOOM_MAX_STREAMS_PER_USER:
            self._give_back()
            return False
        self.held = True
        return True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._give_back()

    def _give_back(self) -> None:
        try:
            cache.decr(self.key)
        except ValueError:
            pass


class EventStream:
    """What the view hands Django: the frames, and a ``close`` Django calls when the
    response is done (finished, failed or disconnected), which frees the slot."""

    def __init__(self, *, run_id: int, user_id: int, after: int, slot: StreamSlot) -> None:
        self.slot = slot
        self.frames = run_event_stream(run_id=run_id, user_id=user_id, after=after, slot=slot)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.frames

    def close(self) -> None:
        self.slot.release()


async def run_event_stream(*, run_id: int, user_id: int, after: int,
                           slot: StreamSlot | None = None) -> AsyncIterator[bytes]:
    """Every event after ``after``, then live ones, until the run is finished and all was
    sent, or ``user_id`` may no longer see the run."""
    # Not thread-sensitive: a poll borrows a thread of the shared executor, not one kept
    # for this request for as long as the stream stays open.
    poll = sync_to_async(stream_poll, thread_sensitive=False)
    waker = _Waker(run_id)
    await waker.open()
    started = last_sent = time.monotonic()
    checked = float("-inf")
    woke = True
    try:
        yield b"retry: 2000\n\n"
        while time.monotonic() - started < MAX_STREAM_SECONDS:
            now = time.monotonic()
            check = now - checked >= min(CHECK_SECONDS, HEARTBEAT_SECONDS)
            events: list[RunEvent] = []
            status: str | None = ""
            if woke or check:  # on Redis, nothing published and no check due: nothing to read
                try:
                    events, status = await poll(run_id=run_id, user_id=user_id, after=after, check=check)
                except DatabaseError as exc:
                    if not database_busy(exc):
                        raise
                    # No connection in time: the stream stays open and reads again shortly.
                    await asyncio.sleep(RETRY_AFTER_SECONDS)
                    continue
            if check:
                checked = now
                if status is None:
                    return  # the reader left the run's space (or it is gone): nothing more for them
                if status not in _ACTIVE and len(events) < PAGE:
                    for event in events:
                        yield sse_frame(event)
                    return  # finished, and every event was sent
            for event in events:
                after = event.seq
                last_sent = time.monotonic()
                yield sse_frame(event)
                if event.type == "run_finished":
                    checked = float("-inf")  # finished for good, or resumed? the next poll checks
            if events:
                continue
            if time.monotonic() - last_sent >= HEARTBEAT_SECONDS:
                last_sent = time.monotonic()
                yield b": heartbeat\n\n"
            woke = await waker.wait(min(HEARTBEAT_SECONDS, CHECK_SECONDS))
    finally:
        if slot is not None:
            slot.release()
        await waker.close()
