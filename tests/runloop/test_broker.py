"""The broker's transport on Redis (core/broker.py, issue #29): publishing a task and
taking and acknowledging one make no new Redis client each; kombu's own made one for
every publish and two for every acknowledged delivery."""
from __future__ import annotations

import os
import uuid

import pytest
import redis
from kombu import Connection

pytestmark = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (set REDIS_URL; CI does)")

MESSAGES = 20


def _clients_made(transport: str | None, monkeypatch) -> tuple[list[int], int]:
    """Put ``MESSAGES`` messages on a fresh queue, take and acknowledge each one; the
    bodies taken, and how many ``redis.Redis`` clients were made meanwhile."""
    made = 0
    original = redis.Redis.__init__

    def counting(self, *args, **kwargs):
        nonlocal made
        made += 1
        original(self, *args, **kwargs)

    name = f"agentloom-test-broker-{uuid.uuid4().hex}"
    with Connection(os.environ["REDIS_URL"], transport=transport) as connection:
        queue = connection.SimpleQueue(name)
        try:
            queue.put({"n": -1})  # the channel's own connections are made here, once
            queue.get(timeout=10).ack()
            monkeypatch.setattr(redis.Redis, "__init__", counting)
            for n in range(MESSAGES):
                queue.put({"n": n})
            taken = []
            for _ in range(MESSAGES):
                message = queue.get(timeout=10)
                taken.append(message.payload["n"])
                message.ack()
            monkeypatch.setattr(redis.Redis, "__init__", original)
        finally:
            queue.clear()
            queue.close()
    return taken, made


def test_publishing_and_acknowledging_tasks_make_no_redis_client_each(monkeypatch):
    taken, made = _clients_made("core.broker:Transport", monkeypatch)
    assert taken == list(range(MESSAGES))
    assert made == 0, f"{made} Redis clients made for {MESSAGES} messages"


def test_kombus_own_transport_made_one_for_every_message(monkeypatch):
    """What the transport is for: without it, the same exchange makes a client per command."""
    taken, made = _clients_made(None, monkeypatch)
    assert taken == list(range(MESSAGES))
    assert made >= 2 * MESSAGES


def test_the_platform_uses_it_whenever_redis_is_the_broker(settings):
    from agentloom.celery import app

    if not settings.REDIS_URL:
        pytest.skip("this run's settings have no Redis broker")
    with app.connection_for_write() as connection:
        assert type(connection.transport).__module__ == "core.broker"
