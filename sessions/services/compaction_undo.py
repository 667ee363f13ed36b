"""Undoing the newest compaction of a session's main line (CTX-51).

The session's creator (the chat, the API) or an operator (the console, audited) may undo the
newest compaction while no run is active. The undo is a new checkpoint, written in one
transaction like any other (RUN-10):

- the compacting instance gets a new snapshot (the next revision) holding the starting point
  that compaction replaced (``context.undo.undo_decision``): the previous checkpoint's
  messages at its watermark, or — when it was the instance's first — the view or records
  the instance started from. A resume of that run reads it;
- the session's reusable view the compaction made (RUN-7) is removed: it describes a main
  line the person took back. A new question then starts from the best view under it, the
  one the compacted run had itself started from (RUN-8), and reads every record after it —
  exactly what it would have read had the compaction never been committed. Nothing is
  re-projected or stored twice: the view before the compaction *is* that starting point
  plus the records, and the projector reads them as it always does;
- the records are untouched; one ``compaction_undone`` record is appended to the compacted
  run (who, when, which compaction), which the chat reads to mark the summary "undone" and
  the projector ignores (metadata, SPEC §3);
- the triggers are held (CTX-44's back-off state in the frame, reason ``undone``) so the
  next step does not compact the restored view again at once: they wait until the request
  grew by a tenth past its size at that step (``context.undo.undo_holds``). A manual
  compaction (CTX-43) is never held;
- every summary prepared in the background (CTX-45) is discarded: the view changed.

Only the newest checkpoint, and only a compaction: undoing an undo is refused (409
``already_undone``; a manual compaction summarizes again). Everything is refused with
nothing written while a run is active (409 ``answer_running``), while a manual compaction
holds the session (409 ``compaction_running``) and when there is no compaction (409
``nothing_to_undo``); ``expected`` (the checkpoint the person saw) guards a page that is no
longer current (409 ``not_newest``). The session row is locked first, as asking, resuming
and compacting lock it, so two tabs undoing at once are ordered by the database: one wins,
the other finds the undo and is refused.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from context.undo import ALREADY_UNDONE, UNDONE, Base, Checkpoint, undo_decision
from core.errors import Conflict
from sessions.models import CompactionSnapshot, Instance, Run, Session, SessionMessage, SessionView
from sessions.selectors.compactions import (
    UNDO_METRICS,
    main_snapshot_newest,
    snapshot_is_undo,
    summary_record_seq,
)
from sessions.selectors.context import VIEW_TRACES, context_start
from sessions.services.access_audit import access_audit_write
from sessions.services.frames import frame_update
from sessions.services.manual_compaction import AnswerRunning, CompactionRunning, compaction_hold_check, session_lock
from sessions.services.prepared import preparations_discard
from sessions.services.records import NewRecord, records_append


class NothingToUndo(Conflict):
    code = "nothing_to_undo"


@dataclass(frozen=True)
class UndoResult:
    """The new checkpoint, the one it undid, the record saying so, and whether the
    session's view made by the undone compaction was removed."""

    snapshot: CompactionSnapshot
    undone: CompactionSnapshot
    record: SessionMessage | None
    view_removed: bool


def compaction_undo(*, session: Session, by: Any, operator: bool = False,
                    expected: int | None = None) -> UndoResult:
    """CTX-51: undo the newest compaction of ``session``'s main line (see the module).

    ``by``: the person who asked — the session's creator, or (``operator``) a staff user of
    the console, whose undo is written to the access audit in the same transaction.
    ``expected``: the id of the compaction checkpoint the caller means; another newest one
    is a 409 ``not_newest``. Opens its own transaction; Conflict (409), nothing written,
    as the module says."""
    with transaction.atomic():
        session_lock(session_id=session.pk)
        if Run.objects.filter(session_id=session.pk, status__in=Run.ACTIVE_STATUSES).exists():
            raise AnswerRunning("An answer is running in this session. Wait for it to finish (or stop it), "
                                "then undo the summary.")
        try:
            compaction_hold_check(session_id=session.pk)  # a hold whose worker never came back is released
        except CompactionRunning:
            raise CompactionRunning("Earlier messages are being summarized right now. Wait until that is done, "
                                    "then undo the summary.") from None
        newest = main_snapshot_newest(session_id=session.pk)
        if newest is None:
            raise NothingToUndo("There is no summary to undo in this session.")
        if snapshot_is_undo(newest):
            raise NothingToUndo("The latest summary was already undone. To summarize the earlier messages again, "
                                "use Compact now.", code=ALREADY_UNDONE)
        if expected is not None and expected != newest.pk:
            raise Conflict("That summary is no longer the latest one: reload the page to see the conversation as "
                           "it is now.", code="not_newest")
        instance = Instance.objects.select_for_update().get(pk=newest.instance_id)
        run = newest.instance.run
        decision = undo_decision(_checkpoints(instance=instance), _base(run=run, instance=instance))
        restored = decision.restored
        if restored is None:  # not reached: the newest checkpoint is a compaction (checked above)
            raise NothingToUndo("There is no summary to undo in this session.", code=decision.reason)
        now = timezone.now()
        facts = {"undone_revision": newest.revision, "undone_snapshot": newest.pk,
                 "undone_covered_seq": newest.covered_seq, "by": "operator" if operator else "creator",
                 "user": getattr(by, "pk", None), "at": now.isoformat()}
        snapshot = CompactionSnapshot.objects.create(
            instance=instance, revision=newest.revision + 1, covered_seq=restored.watermark,
            inherited_watermark=newest.inherited_watermark, messages=list(restored.messages or []),
            baseline_user_turns=instance.baseline_user_turns, baseline_model_steps=instance.baseline_model_steps,
            estimator_id=restored.estimator_id or newest.estimator_id,
            metrics={"trigger": "undo", UNDO_METRICS: facts,
                     **({VIEW_TRACES: restored.traces} if restored.traces is not None else {})})
        view_removed = _view_remove(session=session, run=run, covered_seq=newest.covered_seq)
        preparations_discard(session_id=session.pk, reason="view_changed")
        _hold(instance=instance, session=session)
        record = records_append(session=session, run=run, instance=instance, records=[NewRecord(
            "compaction_undone", {**facts, "summary_seq": summary_record_seq(snapshot=newest)},
            f"compaction-undone-{newest.revision}")])
        if operator:
            access_audit_write(user=by, what="compaction_undo", session=session, run=run,
                               detail={"revision": newest.revision, "snapshot": newest.pk,
                                       "covered_seq": newest.covered_seq, "undo_snapshot": snapshot.pk})
    return UndoResult(snapshot=snapshot, undone=newest, record=record[0] if record else None,
                      view_removed=view_removed)


def _checkpoints(*, instance: Instance) -> list[Checkpoint]:
    """The instance's two newest checkpoints: the one to undo and the one before it (the
    only ones ``undo_decision`` reads; older messages stay encrypted and unread)."""
    rows = list(instance.snapshots.order_by("-revision")[:2])
    return [Checkpoint(revision=row.revision, covered_seq=row.covered_seq, messages=row.messages,
                       traces=(row.metrics or {}).get(VIEW_TRACES), estimator_id=row.estimator_id,
                       undoes=(row.metrics.get(UNDO_METRICS) or {}).get("undone_revision", 0)
                       if snapshot_is_undo(row) else None)
            for row in reversed(rows)]


def _base(*, run: Run, instance: Instance) -> Base:
    """Where the instance started before its first checkpoint: the best view of the session
    under its run's inherited watermark (RUN-8), or the records (``context_start`` without
    snapshots, as the run's first step read it)."""
    start = context_start(run=run, instance=instance, snapshots=False)
    if start.messages is None:
        return Base()
    return Base(watermark=start.watermark, messages=list(start.messages), traces=start.traces,
                estimator_id=start.estimator_id)


def _view_remove(*, session: Session, run: Run, covered_seq: int) -> bool:
    """Remove the session's reusable view the undone compaction made (RUN-7: saved with its
    checkpoint, by its run, at its covered seq), so no later run starts from it."""
    view = (SessionView.objects.filter(session_id=session.pk, source_run_id=run.pk, watermark=covered_seq)
            .order_by("-id").first())
    if view is None:
        return False  # RUN-7 made none: the session's next run never read that compaction
    view.delete()
    return True


def _hold(*, instance: Instance, session: Session) -> None:
    """Hold the triggers back (CTX-44's state, reason ``undone``; ``tokens`` pinned by the
    next step): in the compacted run's frame (a resume of it reads it) and in the session's
    latest main frame, which the next question carries on (``main_line_carried``)."""
    hold = {"tokens": 0, "at": time.time(), "reason": UNDONE}
    frame_update(instance=instance, compaction_failure=hold)
    latest = (Instance.objects.filter(run__session_id=session.pk, parent__isnull=True)
              .order_by("-run_id").only("pk", "parent_id").first())
    if latest is not None and latest.pk != instance.pk:
        frame_update(instance=latest, compaction_failure=hold)
