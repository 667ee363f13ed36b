"""Event streams on Redis share one pub/sub connection per event loop (issue #29).

Against the suite's Redis (CI has one; skipped without): however many streams are open,
the web process holds one subscriber connection; a nudge wakes the streams of its run and
no other; when Redis drops that connection, every stream waiting is woken and polls the
database from then on, and the next stream opened subscribes afresh. A batch of events
committed together (a step's) is one nudge.
"""
from __future__ import annotations

import asyncio
import itertools
import os

import pytest
import redis

from sessions import event_stream as stream
from sessions.services.events import channel_for

pytestmark = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (set REDIS_URL; CI does)")

_runs = itertools.count(900_000_000 + os.getpid() * 1000)


def _subscribers(client: redis.Redis, channel: str) -> int:
    return client.pubsub_numsub(channel)[0][1]


async def _until(predicate) -> None:
    while not predicate():  # a condition, not a sleep: bounded by the test's own time-out
        await asyncio.sleep(0.01)


def test_many_streams_one_connection_and_each_nudge_wakes_its_own_run(settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    publisher = redis.Redis.from_url(settings.REDIS_URL)
    first, second = next(_runs), next(_runs)

    async def scenario():
        wakers = [stream._Waker(first) for _ in range(20)] + [stream._Waker(second) for _ in range(5)]
        for waker in wakers:
            await waker.open()
        hub = stream._nudges_for_this_loop()
        assert all(waker.nudges is hub for waker in wakers)
        # One subscriber per channel, whatever the number of streams on it.
        assert (_subscribers(publisher, channel_for(first)), _subscribers(publisher, channel_for(second))) == (1, 1)
        publisher.publish(channel_for(first), "7")
        woken = await asyncio.wait_for(asyncio.gather(*(w.wait(30) for w in wakers[:20])), timeout=30)
        assert all(woken)
        assert not any(waker.woken.is_set() for waker in wakers[20:])  # the other run's streams slept on
        for waker in wakers:
            await waker.close()
        await _until(lambda: _subscribers(publisher, channel_for(first)) == 0)
        assert _subscribers(publisher, channel_for(second)) == 0

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def test_redis_dropping_the_shared_connection_wakes_every_stream_into_polling(settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    admin = redis.Redis.from_url(settings.REDIS_URL)
    run = next(_runs)

    async def scenario():
        wakers = [stream._Waker(run) for _ in range(3)]
        for waker in wakers:
            await waker.open()
        hub = stream._nudges_for_this_loop()
        waits = [asyncio.ensure_future(w.wait(30)) for w in wakers]
        admin.client_kill_filter(_type="pubsub")  # what a restarted Redis does to its subscribers
        assert await asyncio.wait_for(asyncio.gather(*waits), timeout=30) == [True, True, True]
        assert hub.broken and all(waker.nudges is None for waker in wakers)  # polling from now on
        later = stream._Waker(run)
        await later.open()
        assert later.nudges is not None and later.nudges is not hub
        await _until(lambda: _subscribers(admin, channel_for(run)) == 1)
        await later.close()

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


@pytest.mark.django_db(transaction=True)
def test_a_batch_of_events_wakes_its_streams_once_with_its_last_seq(settings, fake_session):
    """A step's events are committed together; the streams read them in one poll, so one
    nudge says so (was one publish, and one more poll, per event)."""
    from django.db import transaction

    from sessions.services.events import events_write
    from sessions.services.questions import question_ask

    settings.REDIS_URL = os.environ["REDIS_URL"]
    run = question_ask(session=fake_session(), content="Hello")
    listener = redis.Redis.from_url(settings.REDIS_URL).pubsub()
    listener.subscribe(channel_for(run.pk))
    assert listener.get_message(timeout=10)["type"] == "subscribe"
    with transaction.atomic():
        rows = events_write(run_id=run.pk, events=[("run_started", {"attempt": 0}), ("message_delta", {"text": "a"}),
                                                   ("context_measured", {"tokens": 3})])
    # Published after the commit returned: whatever the batch published arrived before this.
    redis.Redis.from_url(settings.REDIS_URL).publish(channel_for(run.pk), "end")
    heard = []
    while not heard or heard[-1] != b"end":
        message = listener.get_message(timeout=10)
        assert message is not None, heard
        heard.append(message["data"])
    listener.close()
    assert heard == [str(rows[-1].seq).encode(), b"end"]
