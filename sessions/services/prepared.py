"""CTX-45: the rows of summaries prepared in the background (``PreparedCompaction``).

The run loop asks for a preparation when its figure passes the prepare point
(:func:`preparation_request`), a worker claims and fills it (:func:`preparation_claim`,
:func:`preparation_renew`, :func:`preparation_ready` or :func:`preparation_failed`), and
the trigger takes the session's open one (:func:`preparation_open`) to commit it
(:func:`preparation_take`, in the checkpoint's transaction) or discard it
(:func:`preparations_discard`). Every change of status is one conditional UPDATE from the
status it expects, so a discard that races a preparation's end leaves exactly one of them.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from context.compaction import prefix_digest
from sessions.models import Instance, PreparedCompaction, Run
from sessions.selectors.steps import preparation_last_failure as preparation_last_failure  # a read: its home
from sessions.services import dispatch

Status = PreparedCompaction.Status
# What a preparation's worker leaves when it goes away: no failure of the summarizer, so
# it holds nothing back (CTX-44 counts only the summaries that failed).
ABANDONED = "abandoned"


def _lease() -> Any:
    return timezone.now() + timedelta(seconds=settings.AGENTLOOM_PREPARATION_LEASE_SECONDS)


def _ended(status: Any, reason: str) -> dict[str, Any]:
    """The fields of a row that ends: its snapshot (conversation text) is not kept."""
    return {"status": status, "reason": reason, "ended_at": timezone.now(), "snapshot": {}, "lease_until": None}


def _abandoned_end(*, session_id: int) -> None:
    """A preparation whose lease lapsed lost its worker: end it, so another may start."""
    PreparedCompaction.objects.filter(session_id=session_id, status=Status.PREPARING,
                                      lease_until__lt=timezone.now()).update(**_ended(Status.DISCARDED, ABANDONED))


def preparation_request(*, run: Run, instance: Instance, snapshot: dict[str, Any], tokens: int,
                        policy: dict[str, Any], estimator_id: str) -> PreparedCompaction | None:
    """Ask for a summary of ``snapshot`` (``system``, ``tools``, ``messages``, ``sources``)
    to be prepared; queued for a worker once the transaction commits. None when the
    session has one under way, or a ready one that still fits this view (one at a time);
    a ready one that no longer fits is discarded first."""
    messages = snapshot["messages"]
    with transaction.atomic():
        _abandoned_end(session_id=run.session_id)
        for row in PreparedCompaction.objects.select_for_update().filter(
                session_id=run.session_id, status__in=PreparedCompaction.OPEN_STATUSES).defer("snapshot"):
            fits = (row.status == Status.PREPARING or (
                row.policy == policy and row.estimator_id == estimator_id and row.prefix is not None
                and row.prefix <= len(messages) and prefix_digest(messages[:row.prefix]) == row.digest))
            if fits:
                return None
            preparations_end(prepared=row, status=Status.DISCARDED, reason="view_changed")
        try:
            with transaction.atomic():
                prepared = PreparedCompaction.objects.create(
                    session_id=run.session_id, run=run, instance=instance, snapshot=snapshot, tokens=tokens,
                    policy=policy, estimator_id=estimator_id, lease_until=_lease())
        except IntegrityError:  # another worker asked at the same moment: its preparation stands
            return None
        dispatch.preparation_dispatch_on_commit(prepared.pk)
    return prepared


def preparation_claim(*, prepared_id: int) -> PreparedCompaction | None:
    """Take a queued preparation for this worker (a second delivery gets None)."""
    claimed = PreparedCompaction.objects.filter(pk=prepared_id, status=Status.PREPARING,
                                                claimed_at__isnull=True).update(claimed_at=timezone.now(),
                                                                                lease_until=_lease())
    if not claimed:
        return None
    return PreparedCompaction.objects.select_related("run", "instance", "session").get(pk=prepared_id)


def preparation_renew(*, prepared: PreparedCompaction) -> bool:
    """Keep the lease before another summary call; False when it was ended meanwhile."""
    return bool(PreparedCompaction.objects.filter(pk=prepared.pk, status=Status.PREPARING)
                .update(lease_until=_lease()))


def preparation_ready(*, prepared: PreparedCompaction, summary: str, prefix: int, digest: str,
                      metrics: dict[str, Any]) -> bool:
    """The summary is ready; False when the preparation was ended meanwhile (discarded)."""
    return bool(PreparedCompaction.objects.filter(pk=prepared.pk, status=Status.PREPARING).update(
        status=Status.READY, summary=summary, prefix=prefix, digest=digest, metrics=metrics,
        ready_at=timezone.now(), snapshot={}, lease_until=None))


def preparation_failed(*, prepared: PreparedCompaction, reason: str, metrics: dict[str, Any] | None = None) -> None:
    """The summarizer failed (or the preparation could not run): ended, with why. The
    metrics are kept even when it was discarded meanwhile: what it spent is counted."""
    rows = PreparedCompaction.objects.filter(pk=prepared.pk)
    rows.filter(status=Status.PREPARING).update(**_ended(Status.FAILED, reason))
    if metrics:
        rows.update(metrics=metrics)


def preparations_end(*, prepared: PreparedCompaction, status: Any, reason: str) -> bool:
    """End one open preparation (``used`` or ``discarded``), if it is still open."""
    return bool(PreparedCompaction.objects.filter(pk=prepared.pk, status__in=PreparedCompaction.OPEN_STATUSES)
                .update(**_ended(status, reason)))


def preparations_discard(*, session_id: int, reason: str, keep: int | None = None) -> int:
    """The view they were made of changed (another compaction, a resume): discard every
    open preparation of the session, whole. Returns how many."""
    rows = PreparedCompaction.objects.filter(session_id=session_id, status__in=PreparedCompaction.OPEN_STATUSES)
    if keep is not None:
        rows = rows.exclude(pk=keep)
    return rows.update(**_ended(Status.DISCARDED, reason))


def preparation_open(*, session_id: int) -> PreparedCompaction | None:
    """The session's preparation under way (lease kept) or ready, newest first."""
    _abandoned_end(session_id=session_id)
    return (PreparedCompaction.objects.filter(session_id=session_id, status__in=PreparedCompaction.OPEN_STATUSES)
            .defer("snapshot").order_by("-id").first())


def preparation_take(*, prepared: PreparedCompaction) -> bool:
    """Mark a ready preparation used; inside the checkpoint's transaction, so it is used
    exactly when the checkpoint made of it commits. False when it is not ready any more."""
    return bool(PreparedCompaction.objects.filter(pk=prepared.pk, status=Status.READY)
                .update(**_ended(Status.USED, "committed")))
