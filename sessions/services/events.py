"""The events service (LOOP-5): what the page and the API know events by, and the door
for the writers of a run's events that are not its execution (the API's
``supplement_received``, a run's claim and end, the reaper, a side writer). The rows and
their sinks are ``sessions.services.event_log``'s; a run's execution writes its events
through its journal (``runloop.journal``).
"""
from __future__ import annotations

from typing import Any

from sessions.models import RunEvent
from sessions.services.event_log import (
    EVENT_TYPES,
    BatchSink,
    BroadcastHold,
    DeltaBuffer,
    Sink,
    StopFlag,
    batch_sinks,
    channel_for,
    event_seqs_take,
    event_write,
    events_write,
    log_sink,
    redis_sink,
    sinks,
)

__all__ = ["EVENTSOURCE_NAMES", "EVENT_TYPES", "RENAMED", "BatchSink", "BroadcastHold", "DeltaBuffer", "Sink",
           "StopFlag", "batch_sinks", "channel_for", "event_emit", "event_seqs_take", "event_type_current",
           "events_write", "log_sink", "redis_sink", "sinks"]

# A browser's EventSource dispatches an event named ``error``, ``open`` or ``message`` to
# its own handlers too (``onerror`` is the connection-lost handler): no event of ours may
# carry one of those names on the wire.
EVENTSOURCE_NAMES = frozenset({"error", "open", "message"})
# Names events were stored under before they were renamed; read back under the new name.
RENAMED = {"error": "run_error"}


def event_type_current(stored: str) -> str:
    """The name an event is sent and read under: a row stored as ``error`` by an earlier
    version is a ``run_error``."""
    return RENAMED.get(stored, stored)



def event_emit(*, run_id: int, type: str, data: dict[str, Any] | None = None,
               stop_flag: StopFlag | None = None, of_attempt: int | None = None) -> RunEvent:
    """Persist one event with the next per-run seq, then hand it to the sinks after commit.
    ``of_attempt`` as for ``events_write``."""
    return event_write(run_id=run_id, type=type, data=data, stop_flag=stop_flag, of_attempt=of_attempt)
