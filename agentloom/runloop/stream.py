"""Server-Sent Events for a run (LOOP-5): the persisted log, resumable with Last-Event-ID.

The database is the source of truth; Redis pub/sub (when configured) only wakes the
stream early. Without Redis, or when it fails, the stream polls the database. The stream
ends after ``run_finished``, or after a maximum lifetime (the browser reconnects).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings

from sessions.services.events import channel_for
from sessions.models import RunEvent

logger = logging.getLogger("agentloom.stream")

POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 15.0
MAX_STREAM_SECONDS = 30 * 60
PAGE = 500


def event_as_dict(event: RunEvent) -> dict[str, Any]:
    return {"seq": event.seq, "type": event.type, "data": event.payload}


def events_after(*, run_id: int, after: int, limit: int = PAGE) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit])


def sse_frame(event: RunEvent) -> bytes:
    data = json.dumps(event.payload, separators=(",", ":"))
    return f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n".encode()


class _Waker:
    """Waits for a pub/sub nudge, or just sleeps when there is no Redis (or it broke)."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.pubsub = None
        self.client = None

    async def open(self) -> None:
        if not settings.REDIS_URL:
            return
        try:
            import redis.asyncio as aioredis

            self.client = aioredis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=5)
            self.pubsub = self.client.pubsub()
            await self.pubsub.subscribe(channel_for(self.run_id))
        except Exception:
            logger.warning("run %s: Redis unavailable, streaming by polling", self.run_id, exc_info=True)
            await self.close()

    async def wait(self, seconds: float) -> None:
        if self.pubsub is None:
            await asyncio.sleep(min(seconds, POLL_SECONDS))
            return
        try:
            await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=min(seconds, 1.0))
        except Exception:
            logger.warning("run %s: Redis failed mid-stream, falling back to polling", self.run_id, exc_info=True)
            await self.close()

    async def close(self) -> None:
        pubsub, client, self.pubsub, self.client = self.pubsub, self.client, None, None
        try:
            if pubsub is not None:
                await pubsub.aclose()
            if client is not None:
                await client.aclose()
        except Exception:
            pass


async def run_event_stream(*, run_id: int, after: int) -> AsyncIterator[bytes]:
    """Every event after ``after``, then live ones, until ``run_finished``."""
    load = sync_to_async(events_after)
    waker = _Waker(run_id)
    await waker.open()
    started = last_sent = time.monotonic()
    try:
        yield b"retry: 2000\n\n"
        while time.monotonic() - started < MAX_STREAM_SECONDS:
            events = await load(run_id=run_id, after=after)
            for event in events:
                after = event.seq
                last_sent = time.monotonic()
                yield sse_frame(event)
                if event.type == "run_finished":
                    return
            if events:
                continue
            if time.monotonic() - last_sent >= HEARTBEAT_SECONDS:
                last_sent = time.monotonic()
                yield b": heartbeat\n\n"
            await waker.wait(HEARTBEAT_SECONDS)
    finally:
        await waker.close()
