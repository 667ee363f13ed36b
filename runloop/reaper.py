"""Ends runs whose worker vanished (LOOP-1), so no session stays blocked after a crash.

A run without a heartbeat for ``AGENTLOOM_HEARTBEAT_STALE_SECONDS`` becomes ``interrupted``;
one the user asked to stop becomes ``cancelled`` as soon as it missed two beats (Stop
always wins). Both are resumable. Workers call ``runs_reap_interrupted`` when they start
and on a schedule (``runloop.housekeeping``); a worker shutting down ends the
runs it was executing with ``runs_interrupt_on_shutdown``.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from sessions.models import Run
from sessions.run_errors import INTERRUPTED, SHUT_DOWN
from sessions.services.runs import orphan_cutoff, run_finish


def runs_reap_interrupted(*, stale_after: float | None = None) -> list[int]:
    """End running runs without a recent heartbeat; returns their ids.

    Safe with many workers: every status change is a conditional UPDATE that checks the
    heartbeat again, so a run is reaped once and a live worker's beat keeps its run.
    """
    seconds = settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS if stale_after is None else stale_after
    stale = Q(heartbeat_at__lt=timezone.now() - timedelta(seconds=seconds))
    stopped = Q(cancel_requested=True, heartbeat_at__lt=orphan_cutoff()) | (Q(cancel_requested=True) & stale)
    reaped = []
    for run in Run.objects.filter(stale | stopped, status=Run.Status.RUNNING).select_related("session"):
        if run.cancel_requested and run_finish(run=run, status=Run.Status.CANCELLED, reason="stopped by user",
                                               expected_from=(Run.Status.RUNNING,), where=stopped):
            reaped.append(run.pk)
        elif run_finish(run=run, status=Run.Status.INTERRUPTED, reason="the worker stopped responding",
                        expected_from=(Run.Status.RUNNING,), where=stale, error=INTERRUPTED):
            reaped.append(run.pk)
    return reaped


def runs_interrupt_on_shutdown(*, attempts: Mapping[int, int]) -> list[int]:
    """End the runs a stopping worker process is executing: ``{run id: attempt}``.

    Each is ended only while it still runs the attempt this worker claimed (a run reaped
    and resumed elsewhere meanwhile is left alone): ``cancelled`` when Stop was asked,
    otherwise ``interrupted``. The worker's threads then find the run no longer theirs and
    write nothing more.
    """
    ended = []
    for run in Run.objects.filter(pk__in=list(attempts), status=Run.Status.RUNNING).select_related("session"):
        mine = Q(attempt=attempts[run.pk])
        if run.cancel_requested:
            moved = run_finish(run=run, status=Run.Status.CANCELLED, reason="stopped by user",
                               expected_from=(Run.Status.RUNNING,), where=mine)
        else:
            moved = run_finish(run=run, status=Run.Status.INTERRUPTED, reason="the worker was shut down",
                               expected_from=(Run.Status.RUNNING,), where=mine, error=SHUT_DOWN)
        if moved:
            ended.append(run.pk)
    return ended
