"""Reads the console pages need beyond ``sessions.selectors``. Nothing here writes.

Only the functions that return records, events or model calls decrypt anything; the
views that call them write the access audit first.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Min, QuerySet

from sessions.models import CompactionSnapshot, Instance, ModelCall, Run, RunEvent, Session, SessionMessage

EVENTS_PAGE_DEFAULT = 500
EVENTS_PAGE_MAX = 2_000
CALLS_PAGE = 5


def _records(session: Session, instance: str | None) -> QuerySet[SessionMessage]:
    """The RUN-11 instance filter: None for all, "main", or a sub-instance id (validated by the caller)."""
    query = SessionMessage.objects.filter(session=session)
    if instance == Instance.MAIN:
        return query.filter(in_main=True)
    if instance is not None:
        return query.filter(instance_id=int(instance))
    return query


def records_previous_cursor(*, session: Session, after: int, limit: int, instance: str | None) -> int | None:
    """The ``after`` of the page before the one that starts after ``after``, walking the same
    index backwards (keyset, no OFFSET); None on the first page."""
    seqs = list(_records(session, instance).filter(seq__lte=after).order_by("-seq")
                .values_list("seq", flat=True)[: limit + 1])
    if not seqs:
        return None
    return seqs[limit] if len(seqs) > limit else 0


def records_more_after(*, session: Session, after: int, instance: str | None) -> bool:
    return _records(session, instance).filter(seq__gt=after).exists()


def records_count(*, session: Session, instance: str | None) -> int:
    return _records(session, instance).count()


def session_sub_instances(*, session: Session) -> list[Instance]:
    """The session's sub-instances, for the instance filter (frames stay encrypted)."""
    return list(Instance.objects.filter(run__session=session, parent__isnull=False)
                .defer("frame").order_by("id"))


def session_snapshots(*, session: Session) -> list[CompactionSnapshot]:
    """Every compaction of the session's instances, oldest first; the compacted messages
    (encrypted) are not read — the metrics are plain JSON."""
    return list(CompactionSnapshot.objects.filter(instance__run__session=session)
                .select_related("instance").defer("messages", "instance__frame")
                .order_by("created_at", "id"))


def compaction_summary_seqs(*, session: Session) -> dict[tuple[int, int], int]:
    """(instance id, covered seq) → the seq of the ``compaction_summary`` record saved with
    that checkpoint (its entry key is ``compaction-<covered>-<trigger>``). Not decrypted."""
    found: dict[tuple[int, int], int] = {}
    rows = (SessionMessage.objects.filter(session=session, kind="compaction_summary")
            .values_list("instance_id", "entry_key", "seq"))
    for instance_id, entry_key, seq in rows:
        parts = entry_key.split("-")
        if len(parts) >= 2 and parts[0] == "compaction" and parts[1].isdigit():
            found.setdefault((instance_id, int(parts[1])), seq)
    return found


def run_events(*, run: Run, after: int, limit: int) -> list[RunEvent]:
    """A page of the run's events in seq order (decrypts payloads)."""
    return list(RunEvent.objects.filter(run=run, seq__gt=after).order_by("seq")[:limit])


def run_attempt_started_at(*, run: Run, seq: int) -> datetime | None:
    """When the attempt that event ``seq`` belongs to began: the time of the last
    ``run_started`` at or before it (plain columns, nothing decrypted)."""
    return (RunEvent.objects.filter(run=run, type="run_started", seq__lte=seq).order_by("-seq")
            .values_list("created_at", flat=True).first())


def run_events_more_after(*, run: Run, after: int) -> bool:
    return RunEvent.objects.filter(run=run, seq__gt=after).exists()


def run_calls_overview(*, run: Run) -> list[ModelCall]:
    """Every model call of the run, without the encrypted request."""
    return list(ModelCall.objects.filter(run=run).select_related("instance").defer("request", "instance__frame")
                .order_by("id"))



def session_run_questions(*, session: Session) -> dict[int, Any]:
    """Each run's question: the message of its first user record on the main line, by run
    id (decrypts one record a run — the first seqs are found on plain columns)."""
    firsts = (SessionMessage.objects.filter(session=session, kind="user", in_main=True)
              .values("run_id").annotate(first=Min("seq")).values_list("first", flat=True))
    return dict(SessionMessage.objects.filter(session=session, seq__in=list(firsts)).values_list("run_id", "message"))
