"""How a committed run reaches a worker.

The run loop registers its Celery task here when Django starts (``AppConfig.ready``), so
the history service never imports Celery and a run is only queued after its transaction
commits (a worker can never load a row that is not there yet).
"""
from __future__ import annotations

from typing import Callable

import logging

from django.db import transaction

logger = logging.getLogger("agentloom.dispatch")

_dispatcher: Callable[[int], None] | None = None


def dispatcher_set(dispatcher: Callable[[int], None] | None) -> None:
    global _dispatcher
    _dispatcher = dispatcher


def run_dispatch_on_commit(run_id: int) -> None:
    """Queue the run once the current transaction commits (at once outside one)."""
    dispatcher = _dispatcher
    if dispatcher is not None:
        transaction.on_commit(lambda: _dispatch_or_fail(dispatcher, run_id))


def _dispatch_or_fail(dispatcher: Callable[[int], None], run_id: int) -> None:
    """When the broker cannot take the run, fail it at once with a retryable error rather
    than leave it queued forever, blocking the session (a resume queues it again)."""
    try:
        dispatcher(run_id)
    except Exception:  # the broker boundary: any transport error means "not queued"
        logger.exception("run %s could not be queued", run_id)
        from sessions.models import Run
        from sessions.services.runs import run_finish

        run = Run.objects.filter(pk=run_id).select_related("session").first()
        if run is not None:
            run_finish(run=run, status=Run.Status.FAILED, expected_from=(Run.Status.QUEUED,), error={
                "code": "queue_unavailable", "retryable": True,
                "message": "The task queue is unavailable, so this could not start; resume it in a moment."})


_compaction_dispatcher: Callable[[int], None] | None = None


def compaction_dispatcher_set(dispatcher: Callable[[int], None] | None) -> None:
    global _compaction_dispatcher
    _compaction_dispatcher = dispatcher


def compaction_dispatch_on_commit(run_id: int) -> None:
    """Queue a manual compaction of a finished run's history once the transaction commits."""
    dispatcher = _compaction_dispatcher
    if dispatcher is not None:
        transaction.on_commit(lambda: dispatcher(run_id))
