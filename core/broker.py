"""The Celery broker's transport on Redis: kombu's, keeping one Redis client per channel.

kombu's Redis channel makes a new ``redis.Redis`` for every command it sends outside its
consumer's own connection: each task published (the web process, at every question) and,
with late acknowledgement, twice for each task a worker takes (noting it unacknowledged,
then acknowledging it). A client is cheap to use and dear to make — redis-py builds a
table of several hundred response callbacks in each. The clients kombu made all share the channel's
connection pool and are safe to share between threads, so one is kept per pool.

``settings.CELERY_BROKER_TRANSPORT`` names this transport whenever ``REDIS_URL`` is set.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _kept_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        kept = self._kept_client
        # A channel that lost its connection makes a new pool: a client of the old one is not kept.
        if kept is None or kept.connection_pool is not self.pool:
            kept = self._kept_client = self._create_client()
        yield kept


class Transport(kombu_redis.Transport):
    Channel = Channel


def prepare_broker_folders() -> None:
    """The filesystem transport needs its folders to exist before the first message."""
    from django.conf import settings

    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
            os.makedirs(settings.CELERY_BROKER_TRANSPORT_OPTIONS[key], exist_ok=True)
