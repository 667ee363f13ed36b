"""Marks runs whose worker vanished as ``interrupted`` (LOOP-1) so they can be resumed."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from sessions.models import Run
from sessions.services.runs import run_finish


def runs_reap_interrupted(*, stale_after: float | None = None) -> list[int]:
    """Running runs without a heartbeat for ``stale_after`` seconds become interrupted.

    Safe with many workers: the status change is a conditional update, so a run is
    reaped once, and a live worker's heartbeat keeps its run out of reach.
    """
    seconds = settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS if stale_after is None else stale_after
    cutoff = timezone.now() - timedelta(seconds=seconds)
    reaped = []
    for run in Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=cutoff).select_related("session"):
        # The heartbeat is checked again in the UPDATE itself: a run that beat since the
        # query above is alive and keeps running.
        if run_finish(run=run, status=Run.Status.INTERRUPTED, reason="the worker stopped responding",
                      expected_from=(Run.Status.RUNNING,), where=Q(heartbeat_at__lt=cutoff),
                      error={"code": "interrupted", "message": "The worker running this stopped; resume to continue.",
                             "retryable": True}):
            reaped.append(run.pk)
    return reaped
