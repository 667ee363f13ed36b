"""How a committed run reaches a worker.

The run loop registers its Celery task here when Django starts (``AppConfig.ready``), so
the history service never imports Celery and a run is only queued after its transaction
commits (a worker can never load a row that is not there yet).
"""
from __future__ import annotations

from typing import Callable

from django.db import transaction

_dispatcher: Callable[[int], None] | None = None


def dispatcher_set(dispatcher: Callable[[int], None] | None) -> None:
    global _dispatcher
    _dispatcher = dispatcher


def run_dispatch_on_commit(run_id: int) -> None:
    """Queue the run once the current transaction commits (at once outside one)."""
    dispatcher = _dispatcher
    if dispatcher is not None:
        transaction.on_commit(lambda: dispatcher(run_id))


_compaction_dispatcher: Callable[[int], None] | None = None


def compaction_dispatcher_set(dispatcher: Callable[[int], None] | None) -> None:
    global _compaction_dispatcher
    _compaction_dispatcher = dispatcher


def compaction_dispatch_on_commit(run_id: int) -> None:
    """Queue a manual compaction of a finished run's history once the transaction commits."""
    dispatcher = _compaction_dispatcher
    if dispatcher is not None:
        transaction.on_commit(lambda: dispatcher(run_id))
