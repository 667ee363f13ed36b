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
from django.db import DatabaseError, connection

from core.db_pool import RETRY_AFTER_SECONDS, connection_give_back, database_busy
from sessions.models import Run, RunEvent, Session
from sessions.selectors import creator_is_member_sql
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


class _Nudges:
    """One pub/sub connection per event loop, shared by all of its streams: each stream
    waits on an ``asyncio.Event`` its run's channel sets. A subscription per stream was a
    new Redis connection, with its handshake, for every stream opened (issue #29: a fifth
    of the web process's event loop at 50 users).

    When Redis fails under it, every stream waiting is woken and polls the database from
    then on; the next stream opened makes a new connection."""

    def __init__(self) -> None:
        import redis.asyncio as aioredis

        url = settings.REDIS_URL
        if not url:  # a stream without Redis polls (_Waker.open) and makes no hub
            raise RuntimeError("stream nudges need REDIS_URL")
        client = aioredis.from_url(url, socket_connect_timeout=1, socket_timeout=5)
        self.pubsub = client.pubsub()
        self.waiting: dict[str, set[asyncio.Event]] = {}
        self.subscribed: dict[str, asyncio.Future] = {}
        self.reader: asyncio.Task | None = None
        self.broken = False
        # One command at a time: two first subscribes at once would each connect, and one
        # connection's subscriptions would never be read.
        self.commands = asyncio.Lock()

    async def _command(self, send: Any, channel: str) -> None:
        async with self.commands:
            await send(channel)

    async def join(self, channel: str, woken: asyncio.Event) -> None:
        """Wake ``woken`` at each nudge on ``channel``, from when this returns."""
        self.waiting.setdefault(channel, set()).add(woken)
        if channel not in self.subscribed:  # the first stream of the run subscribes; the others wait for it
            self.subscribed[channel] = asyncio.ensure_future(self._command(self.pubsub.subscribe, channel))
        try:
            await asyncio.shield(self.subscribed[channel])
        except Exception:
            self.fail()
            raise
        if self.reader is None:
            self.reader = asyncio.get_running_loop().create_task(self._read())

    async def leave(self, channel: str, woken: asyncio.Event) -> None:
        members = self.waiting.get(channel)
        if members is None:
            return
        members.discard(woken)
        if not members and not self.broken:
            del self.waiting[channel]
            self.subscribed.pop(channel, None)
            try:
                await self._command(self.pubsub.unsubscribe, channel)
            except Exception:
                self.fail()

    async def _read(self) -> None:
        try:
            while not self.broken:
                message = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is None or message.get("type") != "message":
                    continue
                channel = message["channel"]
                for woken in tuple(self.waiting.get(channel.decode() if isinstance(channel, bytes) else channel, ())):
                    woken.set()
        except Exception:
            logger.warning("Redis failed under the event streams; they poll the database now", exc_info=True)
            self.fail()

    def fail(self) -> None:
        """Every stream waiting polls from now on; the loop's next stream starts afresh."""
        if self.broken:
            return
        self.broken = True
        for members in self.waiting.values():
            for woken in members:
                woken.set()
        loop = asyncio.get_running_loop()
        if _nudges.get(loop) is self:
            del _nudges[loop]
        loop.create_task(self._close())

    async def _close(self) -> None:
        try:
            await self.pubsub.aclose()
        except Exception:
            pass


_nudges: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _nudges_for_this_loop() -> _Nudges:
    loop = asyncio.get_running_loop()
    nudges = _nudges.get(loop)
    if nudges is None:
        nudges = _nudges[loop] = _Nudges()
    return nudges


class _Waker:
    """Waits for a nudge on the run's channel, or just sleeps when there is no Redis (or it broke)."""

    def __init__(self, run_id: int) -> None:
        self.channel = channel_for(run_id)
        self.run_id = run_id
        self.nudges: _Nudges | None = None
        self.woken = asyncio.Event()

    async def open(self) -> None:
        if not settings.REDIS_URL:
            return
        nudges = _nudges_for_this_loop()
        try:
            await nudges.join(self.channel, self.woken)
        except Exception:
            logger.warning("run %s: Redis unavailable, streaming by polling", self.run_id, exc_info=True)
            await nudges.leave(self.channel, self.woken)
            return
        self.nudges = nudges

    async def wait(self, seconds: float) -> bool:
        """Whether there may be something new to read: a nudge came, or (polling) always."""
        if self.nudges is None:
            await asyncio.sleep(min(seconds, POLL_SECONDS))
            return True
        try:
            await asyncio.wait_for(self.woken.wait(), timeout=seconds)
        except TimeoutError:
            return False
        self.woken.clear()
        if self.nudges.broken:
            logger.warning("run %s: Redis failed mid-stream, falling back to polling", self.run_id)
            await self.close()
        return True

    async def close(self) -> None:
        nudges, self.nudges = self.nudges, None
        if nudges is not None:
            await nudges.leave(self.channel, self.woken)


def _poll_sql() -> str:
    run, session, event = Run._meta.db_table, Session._meta.db_table, RunEvent._meta.db_table
    return (f'SELECT r."status", e."seq", e."type", e."payload" FROM "{run}" r '
            f'JOIN "{session}" s ON s."id" = r."session_id" '
            f'LEFT JOIN "{event}" e ON e."run_id" = r."id" AND e."seq" > %s '
            f'WHERE r."id" = %s AND s."user_id" = %s AND {creator_is_member_sql("s")} '
            f'ORDER BY e."seq" LIMIT %s')


def stream_poll(*, run_id: int, user_id: int, after: int) -> tuple[list[RunEvent], str | None]:
    """One read: the run's status as ``user_id`` may see it (None once they may not: not
    the session's creator, or no longer a member of its space) and its events after
    ``after``.

    One statement, so the status and the events come from one snapshot: a run is finished
    in the same transaction as its ``run_finished`` event, so with a finished status the
    events read are all there will be (until a resume), and the stream ends without
    another read. Not one event is read once the reader has lost the run. Written out in
    SQL (issue #29): composing the ORM query of each poll was a sixth of the web process.
    The thread's connection is closed before returning.
    """
    try:
        with connection.cursor() as cursor:
            cursor.execute(_poll_sql(), [after, run_id, user_id, PAGE])
            rows = cursor.fetchall()
    finally:
        connection_give_back()
    if not rows:
        return [], None
    payload = RunEvent._meta.get_field("payload")
    column = payload.cached_col  # what Django's compiler hands from_db_value for a plain read
    events = [RunEvent(run_id=run_id, seq=seq, type=type, payload=payload.from_db_value(data, column, connection))
              for _, seq, type, data in rows if seq is not None]
    return events, rows[0][0]


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
    sent, or ``user_id`` may no longer see the run. Each read is a ``stream_poll`` (status
    and events together); the first one is made once the stream listens for nudges, so
    nothing published meanwhile waits for the next check."""
    # Not thread-sensitive: a poll borrows a thread of the shared executor, not one kept
    # for this request for as long as the stream stays open.
    poll = sync_to_async(stream_poll, thread_sensitive=False)
    waker = _Waker(run_id)
    await waker.open()
    started = last_sent = time.monotonic()
    try:
        yield b"retry: 2000\n\n"
        while time.monotonic() - started < MAX_STREAM_SECONDS:
            try:
                events, status = await poll(run_id=run_id, user_id=user_id, after=after)
            except DatabaseError as exc:
                if not database_busy(exc):
                    raise
                # No connection in time: the stream stays open and reads again shortly.
                await asyncio.sleep(RETRY_AFTER_SECONDS)
                continue
            if status is None:
                return  # the reader left the run's space (or it is gone): nothing more for them
            if events:
                # One write for what one read brought (a step's events come together): each
                # write is a chunk through the server's HTTP machinery, a third of a stream's cost.
                after = events[-1].seq
                last_sent = time.monotonic()
                yield b"".join(sse_frame(event) for event in events)
            if len(events) == PAGE:
                continue  # more to send at once
            if status not in _ACTIVE:
                return  # finished, and every event was sent
            if time.monotonic() - last_sent >= HEARTBEAT_SECONDS:
                last_sent = time.monotonic()
                yield b": heartbeat\n\n"
            # On Redis, the next read is at the next nudge, else after a check interval
            # (a reader who left, a run ended without its event); polling, shortly.
            await waker.wait(CHECK_SECONDS)
    finally:
        if slot is not None:
            slot.release()
        await waker.close()
