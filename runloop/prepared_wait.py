"""CTX-45 in the run: waiting for the summary a worker is preparing, rather than making
another inline that would discard it (``compaction.compaction_run``)."""
from __future__ import annotations

import time

from context import CompactFirst
from runloop.state import RunState
from sessions.models import PreparedCompaction

# How often a run that waits for the summary being prepared reads its row (seconds, first and most).
PREPARED_POLL_SECONDS = (0.1, 1.0)


def prepared_awaitable(prepared: PreparedCompaction, action: CompactFirst) -> bool:
    """CTX-45: a summary a worker is making when the request no longer fits without one
    (``_while_prepared`` sent nothing): waiting for it costs less than a new inline one,
    which would discard it, since it is further along. The overflow of the newest results
    alone is compacted at once (their cut is not the summary's)."""
    return (prepared.status == PreparedCompaction.Status.PREPARING and prepared.claimed_at is not None
            and action.trigger != "tool_output_overflow")


def prepared_awaited(state: RunState, prepared: PreparedCompaction) -> PreparedCompaction | None:
    """Wait for the summary being prepared to end: its row once ready; None when it failed,
    was discarded, or its worker went away (its lease lapsed: ``preparation_open`` ends it),
    and the summary is then made inline. A Stop ends the wait (``state.check``)."""
    wait = PREPARED_POLL_SECONDS[0]
    while True:
        state.check()
        current = state.journal.preparation_open()
        if current is None or current.pk != prepared.pk:
            return None
        if current.status == PreparedCompaction.Status.READY:
            return current
        time.sleep(wait)  # a worker's summary call takes seconds: its row is read a few times a second at most
        wait = min(PREPARED_POLL_SECONDS[1], wait * 1.5)
