"""What every worker process does besides running tasks (LOOP-1): beat, reap, shut down cleanly.

- When it is ready, and then every heartbeat period (``AGENTLOOM_HEARTBEAT_STALE_SECONDS``
  / 4, at most 5 s), a thread writes the worker's heartbeat row (``/healthz`` reads it).
- It reaps stale runs once at start, whatever other workers do, and then on every beat
  while it holds the ``reaper`` lease: one reaper acts at a time across any number of
  workers and hosts, with no beat process to run, on SQLite as on PostgreSQL. A holder
  that dies loses the lease after three periods and another worker takes over, so an
  orphaned run is ended within the stale interval plus about one period. With the reaping
  it wakes queued runs that waited for their person's (or space's) earlier runs and have
  room now (``run_slots.runs_wake_waiting``): the net under the wake each end gives.
- The lease holder also drops the context inspector's copies older than each agent's
  retention (``call_logs_prune``), at most once an hour — no beat process to run — and
  settles the tool servers' questions whose waiting worker died (``tool_inputs_settle``).
- Shutting down (Ctrl-C, SIGTERM, ``make run`` stopping), it ends the runs it was
  executing as ``interrupted`` (resumable) and deletes its heartbeat row.
- When it is ready it lists the operator's tool servers (``AGENTLOOM_MCP_SERVERS``,
  TOOL-2): each command is started, asked for its tools and stopped, and the listing kept.

The hooks are Celery's worker signals; they fire only in worker processes.
"""
from __future__ import annotations

import logging
import os
import threading
from datetime import datetime, timedelta

from celery import signals
from django.conf import settings
from django.db import DatabaseError, connections
from django.utils import timezone

from agentloom.collector import collector_settle
from agentloom.warmup import worker_warm
from core.db_pool import worker_pool_apply
from runloop.reaper import runs_interrupt_on_shutdown, runs_reap_interrupted
from runloop.workers import executing, lease_take, worker_beat, worker_forget, worker_name, workers_prune
from sessions.services.approvals import approvals_expire
from sessions.services.inputs import tool_inputs_settle
from sessions.services.retention import call_logs_prune
from sessions.services.run_slots import runs_wake_waiting
from sessions.services.runs import heartbeat_period
from toolservers.selectors import operator_servers
from toolservers.services import operator_servers_sync

logger = logging.getLogger("agentloom.worker")

REAPER_LEASE = "reaper"
LEASE_PERIODS = 3
FORGET_SILENT_WORKERS_AFTER = timedelta(days=1)
PRUNE_CALL_LOGS_EVERY = timedelta(hours=1)
SHUTDOWN_WRITE_SECONDS = 10.0


class Housekeeper:
    """The worker's heartbeat and reaper thread. ``tick`` is one round, callable alone."""

    def __init__(self, *, name: str) -> None:
        self.name = name
        self.started_at: datetime = timezone.now()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pruned_at: datetime | None = None

    def tick(self, *, first: bool = False) -> list[int]:
        """Beat; reap when this worker holds the reaper lease (or unconditionally at start)."""
        worker_beat(name=self.name, started_at=self.started_at)
        holds = lease_take(name=REAPER_LEASE, holder=self.name, seconds=LEASE_PERIODS * heartbeat_period())
        if not (first or holds):
            return []
        reaped = runs_reap_interrupted()
        if reaped:
            logger.warning("ended runs whose worker stopped: %s (resumable)", ", ".join(map(str, reaped)))
        # Runs waiting for their person's (or space's) earlier runs that have room now: each
        # end wakes the next, this is the net under it (sessions/services/run_slots.py).
        woken = runs_wake_waiting()
        if woken:
            logger.info("woke runs waiting for room: %s", ", ".join(map(str, woken)))
        if holds:
            # TOOL-8: calls nobody decided in time are denied; their runs go on.
            expired = approvals_expire()
            if expired:
                logger.info("approvals expired; runs sent back to the queue: %s", ", ".join(map(str, expired)))
            workers_prune(older_than=FORGET_SILENT_WORKERS_AFTER)
            now = timezone.now()
            if self._pruned_at is None or now - self._pruned_at >= PRUNE_CALL_LOGS_EVERY:
                self._pruned_at = now
                pruned = call_logs_prune(now=now)
                tool_inputs_settle(now=now)  # TOOL-10: questions whose waiting worker died
                if pruned.get("calls"):
                    logger.info("dropped %s model-call copies past their agent's retention", pruned["calls"])
        return reaped

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="agentloom-housekeeping", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=heartbeat_period() + 5)

    def _loop(self) -> None:
        first = True
        try:
            while not self._stop.is_set():
                try:
                    self.tick(first=first)
                    first = False
                except DatabaseError:
                    # A database that is briefly away (restart, lock time-out) must not end
                    # the beats for good: drop the connection and try again next period.
                    logger.exception("worker heartbeat failed; retrying in %.1f s", heartbeat_period())
                    connections.close_all()
                self._stop.wait(heartbeat_period())
        finally:
            connections.close_all()


_current: dict[str, Housekeeper] = {}


def _exit_at_start_when_told(**kwargs) -> None:
    if settings.AGENTLOOM_FAULT_WORKER_EXIT_AT_START:
        logger.error("AGENTLOOM_FAULT_WORKER_EXIT_AT_START is set (fault tests only): the worker exits now")
        os._exit(3)


def _start(**kwargs) -> None:
    housekeeper = Housekeeper(name=worker_name())
    _current["housekeeper"] = housekeeper
    housekeeper.start()
    if operator_servers():
        # The operator's tool servers are listed by the workers, never by a web request
        # (TOOL-2); on a thread of its own, so a slow command delays no run.
        threading.Thread(target=_list_operator_servers, name="agentloom-tool-servers", daemon=True).start()


def _list_operator_servers() -> None:
    try:
        operator_servers_sync()
    except DatabaseError:
        logger.exception("could not record the operator's tool servers; the next worker start lists them again")
    finally:
        connections.close_all()


def _shut_down(**kwargs) -> None:
    """Runs inside Celery's signal handler on the main thread: the database work happens
    in a thread of its own (its own connection), bounded in time."""
    housekeeper = _current.pop("housekeeper", None)

    def work() -> None:
        try:
            if housekeeper is not None:
                housekeeper.stop()
            ended = runs_interrupt_on_shutdown(attempts=executing())
            if ended:
                logger.warning("shutting down: runs %s marked interrupted (resumable)", ", ".join(map(str, ended)))
            worker_forget(name=worker_name())
        except DatabaseError:
            logger.exception("could not record the shutdown; the reaper will end these runs")
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, name="agentloom-shutdown")
    thread.start()
    thread.join(timeout=SHUTDOWN_WRITE_SECONDS)


def _pool_fits_threads(sender=None, **kwargs) -> None:
    """The worker's connection pool holds two per thread (core/db_pool.py)."""
    threads = sender.concurrency if sender is not None and isinstance(sender.concurrency, int) else 8
    worker_pool_apply(threads)


def _collector_settle(**kwargs) -> None:
    collector_settle()


def _warm_when_ready(sender=None, **kwargs) -> None:
    """The threads (or solo) pool runs its tasks in this process: warm it now. A prefork
    pool's children warm as they start (``_warm``); the parent runs no run."""
    pool = getattr(sender, "pool", None)
    if "prefork" not in type(pool).__module__:
        worker_warm()


def _warm(**kwargs) -> None:
    worker_warm()


def worker_hooks_connect() -> None:
    """Connect the worker lifecycle hooks (idempotent; they fire in worker processes only)."""
    signals.worker_init.connect(_pool_fits_threads, dispatch_uid="agentloom-db-pool", weak=False)
    signals.worker_init.connect(_exit_at_start_when_told, dispatch_uid="agentloom-exit-at-start", weak=False)
    # Before the housekeeping and the collector: the pool is full for the first beat, and
    # what the warm-up loads is frozen with the rest (agentloom/warmup.py).
    signals.worker_ready.connect(_warm_when_ready, dispatch_uid="agentloom-warm", weak=False)
    signals.worker_process_init.connect(_warm, dispatch_uid="agentloom-warm-child", weak=False)
    signals.worker_ready.connect(_start, dispatch_uid="agentloom-housekeeping", weak=False)
    signals.worker_shutting_down.connect(_shut_down, dispatch_uid="agentloom-shutdown", weak=False)
    # After the housekeeping thread has started: what is alive then stays (agentloom/collector.py).
    # A prefork child settles its own collector; the threads pool runs tasks in this process.
    signals.worker_ready.connect(_collector_settle, dispatch_uid="agentloom-collector", weak=False)
    signals.worker_process_init.connect(_collector_settle, dispatch_uid="agentloom-collector-child", weak=False)
