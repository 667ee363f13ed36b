"""A model server's request slots, shared by every worker process (CAT-11).

A one-slot server (llama-cpp-python's, a llama-server started with ``--parallel 1``) does
not queue a second request: llama-cpp-python ends the running stream at once with
``[DONE]`` and no finish reason, and answers the newcomer. So the workers never send a
server more calls at once than its connection's ``concurrency``, whatever the call —
action calls, summaries (in the run or prepared in the background), completion checks,
discovery and Test connection.

The semaphore lives in the database, so it holds across processes on SQLite (the embedded
worker) and PostgreSQL alike, with no lock held while a call runs:

* a slot is a ``ModelSlotLease`` row ``(server, slot)`` with ``slot < concurrency``; the
  unique pair makes two processes racing for the last slot get it once at most;
* a lease expires ``LEASE_SECONDS`` after its last renewal; a call renews it as its answer
  streams (``Lease.kept``), so a killed worker's slot frees itself within that time;
* a call that finds no free slot registers a ``ModelSlotWaiter`` and polls with a growing
  pause (``POLL_FIRST`` … ``POLL_MAX``), never a busy loop. Action calls go before
  background summaries (CTX-45 preparations yield), each kind in the order it came;
* the server is the base URL's scheme, host and port: two connections to one server
  share its slots.

Unknown concurrency is unlimited (no lease at all): a hosted provider queues or answers
429 itself, and bounding it by a guess would slow every run for nothing.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from models_catalog.models import ModelConnection, ModelSlotLease, ModelSlotWaiter
from models_catalog.url_syntax import MalformedURL, url_parse

ACTION = "action"
BACKGROUND = "background"
LEASE_SECONDS = 60.0
POLL_FIRST = 0.05
POLL_MAX = 1.0
_DEFAULT_PORTS = {"http": 80, "https": 443}

T = TypeVar("T")


class ServerBusy(Exception):
    """No slot came within the caller's ``max_wait`` (discovery asked while a person waits)."""


def server_key(base_url: str | None) -> str:
    """The server a base URL reaches: lower-case scheme, host and port (paths share it)."""
    text = (base_url or "").strip()
    try:
        parsed = url_parse(text)
    except MalformedURL:
        return text.rstrip("/")[:500]
    scheme = parsed.scheme.lower()
    port = parsed.port or _DEFAULT_PORTS.get(scheme)
    return f"{scheme}://{(parsed.host or '').lower().rstrip('.')}:{port}"[:500]


def server_concurrency(base_url: str | None) -> int | None:
    """The concurrency of the server at ``base_url`` as its connections know it: the
    smallest any of them says, or None (unknown: unlimited). For calls made before a
    connection is saved (discovery, Test connection) to a server already configured."""
    key = server_key(base_url)
    known = [figure for url, figure in ModelConnection.objects.filter(concurrency__isnull=False)
             .values_list("base_url", "concurrency") if figure is not None and server_key(url) == key]
    return min(known) if known else None


@dataclass
class Lease:
    """A held slot. ``renew`` keeps it (at most every third of its lifetime);
    ``release`` frees it."""

    server: str
    slot: int
    holder: str
    lifetime: float = LEASE_SECONDS
    renewed: float = field(default_factory=time.monotonic)

    def renew(self) -> None:
        if time.monotonic() - self.renewed < self.lifetime / 3:
            return
        self.renewed = time.monotonic()
        ModelSlotLease.objects.filter(server=self.server, slot=self.slot, holder=self.holder).update(
            expires_at=timezone.now() + timedelta(seconds=self.lifetime))

    def release(self) -> None:
        ModelSlotLease.objects.filter(server=self.server, slot=self.slot, holder=self.holder).delete()

    def kept(self, events: Iterator[T]) -> Iterator[T]:
        """``events`` as they come, the lease renewed while they do (a long answer keeps its slot)."""
        for event in events:
            self.renew()
            yield event


@dataclass(frozen=True)
class Waiting:
    """What a waiting call is told, and may do: ``on_wait`` once when it starts waiting,
    ``on_waited(seconds)`` once it has a slot, ``on_poll`` at every look (a run beats its
    heartbeat and raises to give up: Stop, or the run taken over)."""

    on_wait: Callable[[], None] | None = None
    on_waited: Callable[[float], None] | None = None
    on_poll: Callable[[], None] | None = None


def _take(server: str, limit: int, kind: str, holder: str, waiter_id: int | None, lifetime: float) -> Lease | None:
    """One look: a free slot if this call's turn has come, else None."""
    now = timezone.now()
    ModelSlotLease.objects.filter(server=server, expires_at__lt=now).delete()
    ModelSlotWaiter.objects.filter(server=server, expires_at__lt=now).delete()
    held = set(ModelSlotLease.objects.filter(server=server).values_list("slot", flat=True))
    free = [slot for slot in range(limit) if slot not in held]
    if len(held) >= limit or not free:
        return None
    # Who is ahead: action calls before background ones, each kind in its order of arrival
    # (a call not yet registered is behind every registered one of its kind).
    waiters = ModelSlotWaiter.objects.filter(server=server)
    if waiter_id is not None:
        waiters = waiters.exclude(pk=waiter_id)
    same_kind_ahead = Q(kind=kind) if waiter_id is None else Q(kind=kind, pk__lt=waiter_id)
    ahead = waiters.filter(Q(kind=ACTION) | same_kind_ahead) if kind == BACKGROUND else waiters.filter(same_kind_ahead)
    if ahead.count() >= len(free):
        return None
    expires = now + timedelta(seconds=lifetime)
    for slot in free:
        try:
            with transaction.atomic():  # a savepoint when the caller is in a transaction
                ModelSlotLease.objects.create(server=server, slot=slot, holder=holder, kind=kind, expires_at=expires)
        except IntegrityError:
            continue  # another process took it between the look and the insert
        return Lease(server=server, slot=slot, holder=holder, lifetime=lifetime)
    return None


def slot_acquire(*, base_url: str | None, concurrency: int | None, kind: str = ACTION,
                 waiting: Waiting | None = None, lifetime: float = LEASE_SECONDS,
                 max_wait: float | None = None) -> Lease | None:
    """A slot of the server at ``base_url`` (None when its concurrency is unknown: no
    bound). Waits as long as it takes, or ``max_wait`` seconds (then ServerBusy);
    ``waiting.on_poll`` may raise to give up."""
    if not concurrency or concurrency < 1:
        return None
    server = server_key(base_url)
    holder = uuid.uuid4().hex
    lease = _take(server, concurrency, kind, holder, None, lifetime)
    if lease is not None:
        return lease
    waiting = waiting or Waiting()
    started = time.monotonic()
    waiter = ModelSlotWaiter.objects.create(server=server, kind=kind,
                                            expires_at=timezone.now() + timedelta(seconds=lifetime))
    if waiting.on_wait:
        waiting.on_wait()
    pause = POLL_FIRST
    try:
        while True:
            if waiting.on_poll:
                waiting.on_poll()
            time.sleep(pause)
            pause = min(pause * 1.5, POLL_MAX)
            ModelSlotWaiter.objects.filter(pk=waiter.pk).update(
                expires_at=timezone.now() + timedelta(seconds=lifetime))
            lease = _take(server, concurrency, kind, holder, waiter.pk, lifetime)
            if lease is not None:
                break
            if max_wait is not None and time.monotonic() - started >= max_wait:
                raise ServerBusy()
    finally:
        ModelSlotWaiter.objects.filter(pk=waiter.pk).delete()
    if waiting.on_waited:
        waiting.on_waited(time.monotonic() - started)
    return lease


@contextmanager
def model_slot(*, base_url: str | None, concurrency: int | None, kind: str = ACTION,
               waiting: Waiting | None = None, lifetime: float = LEASE_SECONDS,
               max_wait: float | None = None) -> Iterator[Lease | None]:
    """Hold a slot of the server for the block (nothing when the concurrency is unknown)."""
    lease = slot_acquire(base_url=base_url, concurrency=concurrency, kind=kind, waiting=waiting, lifetime=lifetime,
                         max_wait=max_wait)
    try:
        yield lease
    finally:
        if lease is not None:
            lease.release()


def slots_held(base_url: str | None) -> int:
    """How many unexpired slots of the server are held (the admin's and the tests' view)."""
    return ModelSlotLease.objects.filter(server=server_key(base_url), expires_at__gte=timezone.now()).count()

