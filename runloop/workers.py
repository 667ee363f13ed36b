"""Worker processes as the database sees them: heartbeats, leases, and what each executes.

The web, ``/healthz`` and other workers — on any host — learn that a worker lives only
from its ``WorkerHeartbeat`` row, so this works the same on the embedded default
(SQLite, filesystem broker) and on PostgreSQL + Redis with many workers.
"""
from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from runloop.models import Lease, WorkerHeartbeat

# The runs this process is executing, {run id: attempt}: RunWatch adds a run once it is
# claimed and removes it when the loop lets go. Read when the worker shuts down.
_executing: dict[int, int] = {}
_executing_lock = threading.Lock()


def executing_add(*, run_id: int, attempt: int) -> None:
    with _executing_lock:
        _executing[run_id] = attempt


def executing_remove(*, run_id: int, attempt: int) -> None:
    with _executing_lock:
        if _executing.get(run_id) == attempt:
            del _executing[run_id]


def executing() -> dict[int, int]:
    with _executing_lock:
        return dict(_executing)


def worker_name() -> str:
    """This process's name in heartbeats and leases: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def worker_beat(*, name: str, started_at: datetime) -> None:
    """Write this worker's heartbeat with the runs it executes (one row per process)."""
    values = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": started_at,
              "beat_at": timezone.now(), "runs": sorted(executing())}
    if not WorkerHeartbeat.objects.filter(name=name).update(**values):
        try:
            with transaction.atomic():
                WorkerHeartbeat.objects.create(name=name, **values)
        except IntegrityError:  # a previous process with the same host and pid left its row
            WorkerHeartbeat.objects.filter(name=name).update(**values)


def worker_forget(*, name: str) -> None:
    """A worker that shuts down cleanly takes its row with it: health stops counting it now."""
    WorkerHeartbeat.objects.filter(name=name).delete()
    Lease.objects.filter(holder=name).delete()


def workers_prune(*, older_than: timedelta) -> int:
    """Delete the rows of workers silent for ``older_than`` (killed, never shut down)."""
    deleted, _ = WorkerHeartbeat.objects.filter(beat_at__lt=timezone.now() - older_than).delete()
    return deleted


def lease_take(*, name: str, holder: str, seconds: float) -> bool:
    """Take or renew the lease ``name`` for ``seconds``; False while another holds it.

    One conditional UPDATE decides between competing workers (the row is created once,
    and a lost creation race just means someone else holds it now).
    """
    now = timezone.now()
    until = now + timedelta(seconds=seconds)
    if Lease.objects.filter(Q(holder=holder) | Q(expires_at__lt=now), name=name).update(holder=holder,
                                                                                        expires_at=until):
        return True
    try:
        with transaction.atomic():
            Lease.objects.create(name=name, holder=holder, expires_at=until)
    except IntegrityError:
        return False
    return True


@dataclass(frozen=True)
class LiveWorker:
    name: str  # host:pid
    heartbeat_age_seconds: float
    runs: int  # how many runs it is executing


def workers_live() -> list[LiveWorker]:
    """Workers whose heartbeat is younger than the stale interval, newest beat first."""
    now = timezone.now()
    rows = WorkerHeartbeat.objects.filter(
        beat_at__gte=now - timedelta(seconds=settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS))
    return [LiveWorker(name=row.name, runs=len(row.runs or []),
                       heartbeat_age_seconds=round(max(0.0, (now - row.beat_at).total_seconds()), 1))
            for row in rows.order_by("-beat_at")[:100]]
