"""The reads the run loop's step machine makes of a run's records (issue #46): one home,
so the step machine asks here instead of querying the models itself. Reads only; the
run's writes go through its journal (``runloop.journal``)."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from context.compaction import HistoryFacts
from context.compaction.history import history_facts
from sessions.models import Instance, PreparedCompaction, Run, SessionMessage
from sessions.selectors.records import visible_records_for_engine


def run_for_execution(*, run_id: int) -> Run:
    """A run with what building its state reads (its session and frozen version)."""
    return Run.objects.select_related("session", "version").get(pk=run_id)


def run_is_active(*, run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).exists()


def run_superseded(*, run: Run) -> bool:
    """A newer question of the session started after ``run``."""
    return Run.objects.filter(session_id=run.session_id, pk__gt=run.pk).exists()


def last_question(*, instance: Instance) -> SessionMessage | None:
    """The instance's latest user record (its task, for a sub-instance)."""
    return SessionMessage.objects.filter(instance=instance, kind="user").order_by("-seq").first()


def tool_results(*, instance: Instance) -> QuerySet[SessionMessage]:
    """The instance's tool results, oldest first."""
    return SessionMessage.objects.filter(instance=instance, kind="tool_result").order_by("seq")


def assistant_steps(*, instance: Instance) -> int:
    """How many assistant records the instance has."""
    return SessionMessage.objects.filter(instance=instance, kind="assistant").count()


def instance_frame(*, instance: Instance) -> dict[str, Any]:
    """The instance's frame as stored now (the API may have written it meanwhile)."""
    return Instance.objects.only("frame").get(pk=instance.pk).frame or {}


def last_assistant(*, instance: Instance) -> SessionMessage | None:
    return SessionMessage.objects.filter(instance=instance, kind="assistant").order_by("-seq").first()


def result_keys(*, instance: Instance, step: int) -> set[str]:
    """The entry keys of the results saved for the calls of ``step``."""
    return set(SessionMessage.objects.filter(instance=instance, entry_key__startswith=f"result-{step}-")
               .values_list("entry_key", flat=True))


def preparation_last_failure(*, session_id: int) -> dict[str, Any] | None:
    """CTX-44: the session's latest failed preparation, as the throttle reads a failure."""
    row = (PreparedCompaction.objects.filter(session_id=session_id, status=PreparedCompaction.Status.FAILED)
           .only("tokens", "ended_at", "reason").order_by("-id").first())
    if row is None or row.ended_at is None:
        return None
    return {"tokens": row.tokens, "at": row.ended_at.timestamp(), "reason": row.reason}


def instance_history(*, run: Run, instance: Instance) -> HistoryFacts:
    """CTX-48: what a summary written by code is made of, from every record the instance's
    context is built from (never from its view): its real user messages in order, its tool
    calls with their statuses (pending only in ``run``, the open one) and its last answer."""
    return history_facts(visible_records_for_engine(run=run, instance=instance), open_runs={run.pk})
