"""The writes of a run's side writers, which do not execute it (issue #46): a manual
compaction of a finished run (CTX-43) and a summary prepared in the background (CTX-45).
Kept by their own guards — the session's compaction hold, the preparation's lease — not by
the ownership of an attempt; they write the run's data through the journal
(``RunJournal(executes=False)``) and these few writes of their own."""
from __future__ import annotations

from typing import Any

from sessions.services.events import event_emit
from sessions.services.manual_compaction import compaction_hold_release
from sessions.services.prepared import preparation_claim, preparation_failed, preparation_ready, preparation_renew

__all__ = ["compaction_hold_release", "preparation_claim", "preparation_failed", "preparation_ready",
           "preparation_renew", "side_event"]


def side_event(*, run_id: int, type: str, data: dict[str, Any] | None = None) -> None:
    """An event of a side writer (``compaction_failed``, ``compaction_prepared``), written
    whoever executes the run."""
    event_emit(run_id=run_id, type=type, data=data)
