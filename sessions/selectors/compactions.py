"""Reads about a session's compactions for undoing one (CTX-51): which checkpoint of the
main line is the newest, whether it is a compaction or an undo, and the summary record
the chat shows for it. Nothing here writes; nothing encrypted is decrypted but where said."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions.models import CompactionSnapshot, MessageKind, Run, SessionMessage

# Where an undo checkpoint says what it undid (its metrics are plain JSON, as a compaction's).
UNDO_METRICS = "undo"


def snapshot_is_undo(snapshot: CompactionSnapshot) -> bool:
    """An undo's checkpoint (CTX-51), not a compaction's."""
    return isinstance(snapshot.metrics, dict) and isinstance(snapshot.metrics.get(UNDO_METRICS), dict)


def main_snapshot_newest(*, session_id: int) -> CompactionSnapshot | None:
    """The newest checkpoint of the session's main line: of any run's main instance, by
    creation (an id is taken in commit order under the session's lock, as every checkpoint
    of a main instance is written by the one run that holds the session, or its manual
    compaction). The messages (encrypted) are not read."""
    return (CompactionSnapshot.objects.filter(instance__run__session_id=session_id, instance__parent__isnull=True)
            .select_related("instance", "instance__run").defer("messages", "instance__frame", "instance__run__counters")
            .order_by("-id").first())


def summary_record_seq(*, snapshot: CompactionSnapshot) -> int | None:
    """The seq of the ``compaction_summary`` record saved with a compaction's checkpoint
    (same instance; entry key ``compaction-<covered>-<trigger>``, written in the same
    transaction, so the newest such record). Not decrypted."""
    return (SessionMessage.objects.filter(instance_id=snapshot.instance_id, kind=MessageKind.COMPACTION_SUMMARY,
                                          entry_key__startswith=f"compaction-{snapshot.covered_seq}-")
            .order_by("-seq").values_list("seq", flat=True).first())


@dataclass(frozen=True)
class UndoTarget:
    """The compaction an undo would undo now: its checkpoint, its run and the seq of the
    summary record the chat shows (None when it has none)."""

    snapshot_id: int
    run_id: int
    summary_seq: int | None


def undo_target(*, session_id: int, runs_active: bool | None = None) -> UndoTarget | None:
    """The compaction the session's creator may undo now (CTX-51): the newest checkpoint of
    the main line, when it is a compaction and no run of the session is active; else None.
    ``runs_active``: the caller already knows (a page that listed the runs). A manual
    compaction under way is not looked for here: the service refuses it (409) in words."""
    if runs_active is None:
        runs_active = Run.objects.filter(session_id=session_id, status__in=Run.ACTIVE_STATUSES).exists()
    if runs_active:
        return None
    newest = main_snapshot_newest(session_id=session_id)
    if newest is None or snapshot_is_undo(newest):
        return None
    return UndoTarget(snapshot_id=newest.pk, run_id=newest.instance.run_id, summary_seq=summary_record_seq(
        snapshot=newest))


def undo_facts(snapshot: CompactionSnapshot) -> dict[str, Any]:
    """What an undo checkpoint says it undid (``{}`` for a compaction's)."""
    return dict(snapshot.metrics[UNDO_METRICS]) if snapshot_is_undo(snapshot) else {}
