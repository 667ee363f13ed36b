"""Retention of the context inspector's copies (per agent, ``call_log_retention_days``).

Operators who need less history can have the copies of what model calls received dropped
after a number of days. Only the log goes — records, events, usage, the calls' figures
and the files attached to questions (RUN-13: part of their question's record) stay; a
session's files go with its records, when the session itself is deleted (a cascade).
A whole instance's log goes at once (a call's references are a delta of the calls before
it in the same instance), and a piece of a request is deleted only when no kept
call of its session refers to it any more.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents.models import Agent
from sessions.models import ModelCall, SentBlob
from sessions.services.model_calls import in_chunks

PRUNED = {"v": 2, "pruned": True}


def _referenced(session_id: int) -> set[int]:
    ids: set[int] = set()
    for request in ModelCall.objects.filter(run__session_id=session_id).values_list("request", flat=True):
        if isinstance(request, dict) and not request.get("pruned"):
            ids.update(request.get("add") or ())
            ids.update((request.get("blobs") or {}).values())
    return ids


def call_logs_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Drop the copies older than their agent's retention; returns what was dropped."""
    now = now or timezone.now()
    pruned_calls = pruned_blobs = 0
    for agent in Agent.objects.filter(call_log_retention_days__isnull=False).only("pk", "call_log_retention_days"):
        days = agent.call_log_retention_days
        if days is None:  # not selected above; the column is nullable
            continue
        cutoff = now - timedelta(days=days)
        # An instance whose newest call is older than the cutoff: its whole chain goes.
        pending = ModelCall.objects.filter(run__session__agent=agent, pruned_at__isnull=True).values("instance_id")
        instances = (ModelCall.objects.filter(run__session__agent=agent, instance_id__in=pending).values("instance_id")
                     .annotate(newest=Max("created_at")).filter(newest__lt=cutoff)
                     .values_list("instance_id", flat=True))
        for instance_id in list(instances):
            with transaction.atomic():
                calls = ModelCall.objects.filter(instance_id=instance_id, pruned_at__isnull=True).select_related("run")
                session_ids = set(calls.values_list("run__session_id", flat=True))
                for call in calls:
                    call.request, call.pruned_at = PRUNED, now
                    call.save(update_fields=["request", "pruned_at"])
                    pruned_calls += 1
                for session_id in session_ids:
                    keep = _referenced(session_id)
                    unused = [pk for pk in SentBlob.objects.filter(session_id=session_id).values_list("pk", flat=True)
                              if pk not in keep]  # not an exclude(pk__in=keep): keep may be past a statement's bound
                    for chunk in in_chunks(unused, ["id"]):
                        pruned_blobs += SentBlob.objects.filter(pk__in=chunk).delete()[0]
    return {"calls": pruned_calls, "blobs": pruned_blobs}
