"""Compaction checkpoints (RUN-10): the snapshot, the moved baselines and — when the
observed-prefix rule allows (RUN-7) — the session's reusable view, in one transaction."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from sessions.models import CompactionSnapshot, Instance, Run, SessionMessage, SessionView
from sessions.selectors.context import VIEW_TRACES
from sessions.selectors.instances import calls_pending
from sessions.services.prepared import preparations_discard
from sessions.services.records import NewRecord, records_append


def view_allowed(*, run: Run, instance: Instance, covered_seq: int) -> bool:
    """RUN-7, the observed-prefix rule: may a checkpoint at ``covered_seq`` become a view?

    Only for a main instance whose inherited prefix plus its own records are *all* the
    session's main-instance records up to ``covered_seq`` (no other run wrote in between),
    with no pending tool group and no queued supplement.
    """
    if instance.parent_id is not None or covered_seq > run.session.last_seq:
        return False
    foreign = SessionMessage.objects.filter(
        session_id=run.session_id, in_main=True, seq__gt=run.inherited_watermark, seq__lte=covered_seq
    ).exclude(instance=instance)
    frame = instance.frame or {}
    return not foreign.exists() and not calls_pending(instance=instance) and not frame.get("supplements")


@dataclass(frozen=True)
class CheckpointResult:
    snapshot: CompactionSnapshot
    view: SessionView | None
    records: list[SessionMessage]


def checkpoint_commit(*, run: Run, instance: Instance, messages: list[dict[str, Any]], covered_seq: int,
                      estimator_id: str, metrics: dict[str, Any] | None = None,
                      records: Sequence[NewRecord] = (), traces: list[Any] | None = None) -> CheckpointResult:
    """Save a compaction checkpoint (RUN-10): record sync, the encrypted snapshot, the moved
    baselines and — when RUN-7 allows — the reusable view, all in one transaction. The
    caller's counts are the current ones (the loop keeps model steps in memory) and are
    saved with it. ``traces`` (JSON, one per message: the record ranges each stands for,
    CTX-41) are kept in the snapshot's metrics as ``view_traces``; the view made with it
    reads them there (``context_start``)."""
    with transaction.atomic():
        appended = records_append(session=run.session, run=run, instance=instance, records=records) if records else []
        locked = Instance.objects.select_for_update().get(pk=instance.pk)
        last = locked.snapshots.order_by("-revision").values_list("revision", flat=True).first() or 0
        locked.model_steps = max(locked.model_steps, instance.model_steps)
        locked.baseline_user_turns = locked.user_turns
        locked.baseline_model_steps = locked.model_steps
        locked.save(update_fields=["model_steps", "baseline_user_turns", "baseline_model_steps"])
        snapshot = CompactionSnapshot.objects.create(
            instance=locked, revision=last + 1, covered_seq=covered_seq,
            inherited_watermark=run.inherited_watermark, messages=messages,
            baseline_user_turns=locked.user_turns, baseline_model_steps=locked.model_steps,
            estimator_id=estimator_id,
            metrics={**(metrics or {}), **({VIEW_TRACES: traces} if traces is not None else {})},
        )
        # CTX-45: every summary prepared of the view before this checkpoint is stale now.
        preparations_discard(session_id=run.session_id, reason="view_changed")
        run.session.refresh_from_db(fields=["last_seq"])
        view = None
        if view_allowed(run=run, instance=locked, covered_seq=covered_seq):
            view = SessionView.objects.create(
                session_id=run.session_id, watermark=covered_seq, messages=messages,
                user_turns=locked.user_turns, model_steps=locked.model_steps,
                baseline_user_turns=locked.user_turns, baseline_model_steps=locked.model_steps,
                estimator_id=estimator_id, source_run=run,
            )
    instance.baseline_user_turns = locked.baseline_user_turns
    instance.baseline_model_steps = locked.baseline_model_steps
    return CheckpointResult(snapshot=snapshot, view=view, records=appended)
