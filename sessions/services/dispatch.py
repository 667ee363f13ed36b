"""How committed work reaches a worker: the dispatchers the run loop registers.

The run loop registers its Celery tasks here when Django starts (``AppConfig.ready``), so
the session services never import Celery, and a lower floor never imports the run loop.
Queueing itself (after commit, failing the run when the broker refuses) is
``runs.run_dispatch_on_commit``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

Dispatcher = Callable[[int], None]
logger = logging.getLogger("agentloom.dispatch")

_dispatcher: Dispatcher | None = None
_compaction_dispatcher: Dispatcher | None = None
_preparation_dispatcher: Dispatcher | None = None


def dispatcher_set(dispatcher: Dispatcher | None) -> None:
    """Register how a run id reaches a worker (None: nothing is queued)."""
    global _dispatcher
    _dispatcher = dispatcher


def dispatcher_get() -> Dispatcher | None:
    return _dispatcher


def compaction_dispatcher_set(dispatcher: Dispatcher | None) -> None:
    global _compaction_dispatcher
    _compaction_dispatcher = dispatcher


def compaction_dispatch_on_commit(run_id: int) -> None:
    """Queue a manual compaction of a finished run's history once the transaction commits."""
    dispatcher = _compaction_dispatcher
    if dispatcher is not None:
        transaction.on_commit(lambda: dispatcher(run_id))


def preparation_dispatcher_set(dispatcher: Dispatcher | None) -> None:
    global _preparation_dispatcher
    _preparation_dispatcher = dispatcher


def preparation_dispatch_on_commit(prepared_id: int) -> None:
    """Queue a background summary (CTX-45) once the transaction commits. A broker that
    refuses it loses nothing: the trigger compacts inline and the lease ends the row."""
    dispatcher = _preparation_dispatcher
    if dispatcher is not None:
        transaction.on_commit(lambda: _dispatch_quietly(dispatcher, prepared_id))


def _dispatch_quietly(dispatcher: Dispatcher, prepared_id: int) -> None:
    try:
        dispatcher(prepared_id)
    except Exception:
        logger.exception("a prepared summary (%s) could not be queued; the trigger will compact inline", prepared_id)
