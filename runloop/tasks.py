"""Celery tasks of the run loop: an id in, the service does the rest (STYLE §7)."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="agentloom.run_execute", acks_late=True, ignore_result=True)
def run_execute_task(run_id: int) -> None:
    from runloop.loop import run_execute

    run_execute(run_id=run_id)


def dispatch_run(run_id: int) -> None:
    """Queue a committed run for any worker (registered with the history service; a
    broker failure here fails the run cleanly, see ``sessions.services.dispatch``)."""
    from core.broker import prepare_broker_folders

    prepare_broker_folders()
    # The id's repr given: Celery's own (saferepr) was a third of sending each question's task.
    run_execute_task.apply_async((run_id,), argsrepr=f"({run_id},)", kwargsrepr="{}")


@shared_task(name="agentloom.compaction_manual", acks_late=True, ignore_result=True)
def compaction_manual_task(run_id: int) -> None:
    from runloop.compaction_manual import compaction_manual

    compaction_manual(run_id=run_id)


def dispatch_compaction(run_id: int) -> None:
    from core.broker import prepare_broker_folders

    prepare_broker_folders()
    compaction_manual_task.delay(run_id)


@shared_task(name="agentloom.compaction_prepare", acks_late=True, ignore_result=True)
def compaction_prepare_task(prepared_id: int) -> None:
    from runloop.preparation import compaction_prepare

    compaction_prepare(prepared_id=prepared_id)


def dispatch_preparation(prepared_id: int) -> None:
    """Queue a summary to prepare in the background (CTX-45)."""
    from core.broker import prepare_broker_folders

    prepare_broker_folders()
    compaction_prepare_task.delay(prepared_id)


@shared_task(name="agentloom.call_logs_prune", ignore_result=True)
def call_logs_prune_task() -> None:
    from sessions.services.retention import call_logs_prune

    call_logs_prune()
