"""The run event log's machinery (LOOP-5, LOOP-6): rows with per-run seqs, and their sinks.

Every event is first persisted as a RunEvent with a per-run seq — the database is the
source of truth that SSE clients resume from with Last-Event-ID. The other sinks (the
log, Redis pub/sub wake-ups, metrics) are best effort: a failing sink is logged and
skipped, never stopping the others or the run.

Two doors use it: a run's execution writes its events through its journal
(``runloop.journal``, and the step's commit, ``steps``), in the transaction of its write
and under the ownership check; every other writer (the API, a run's claim and end, the
reaper) through the events service (``sessions.services.events``), which also names the
events for the page.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from itertools import groupby
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from context.surrogates import replace_lone_surrogates
from core.db_rows import concrete_field
from sessions.event_types import EventType
from sessions.models import Run, RunEvent
from sessions.services.ownership import RunNotOwned, attempt_touch, touch_statement

logger = logging.getLogger("agentloom.events")

EVENT_TYPES = frozenset(EventType)  # the one list of names (sessions/event_types.py)

class Sink(Protocol):
    def __call__(self, event: RunEvent) -> None: ...


class BatchSink(Protocol):
    """A sink handed each committed batch of a run's events at once (in seq order)."""

    def __call__(self, events: Sequence[RunEvent]) -> None: ...


def channel_for(run_id: int) -> str:
    return f"agentloom:run:{run_id}:events"


def log_sink(event: RunEvent) -> None:
    if event.type not in {"message_delta", "thinking_delta"}:
        logger.info("run %s event %s #%s", event.run_id, event.type, event.seq)


_redis_client = None


def redis_sink(events: Sequence[RunEvent]) -> None:
    """Wake streams waiting on this run; they read the events themselves from the database,
    everything after what they sent. One publish per committed batch, with its last seq: a
    step's events wake a stream once, and it reads them in one poll, instead of one publish
    (and one more poll) per event."""
    if not settings.REDIS_URL:
        return
    global _redis_client
    if _redis_client is None:
        import redis

        _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    _redis_client.publish(channel_for(events[-1].run_id), str(events[-1].seq))


# LOOP-6: every event goes to every sink, one at a time or, for ``batch_sinks``, in the
# batch it was committed with.
sinks: list[Sink] = [log_sink]
batch_sinks: list[BatchSink] = [redis_sink]


class _Held(threading.local):
    rows: list[RunEvent] | None = None


_held = _Held()


class BroadcastHold:
    """Holds back the batch sinks' share (the wake-ups of waiting streams) of the events
    this thread commits, from ``hold`` until ``release``, which hands them on as one batch
    per run, in the order committed. The per-event sinks (the log, metrics) are not held.

    For events that are about to be followed by more within a moment, with nothing slow
    between: a run's final answer and its ``run_finished``, a step that
    announces a tool call and the ``tool_started`` of that call. One wake-up, one read and
    one write to each stream instead of two. The events themselves are committed as usual
    — a stream that reads meanwhile (its own check, a reconnection) sees them — only the
    nudge waits, and never past ``release``, which the holder calls before anything slow
    and on every way out (LOOP-6: every sink gets every event). Only this thread's events
    are held: one another thread commits meanwhile (the reaper, a background summary) wakes
    streams at once, ahead of older held ones; a stream reads by seq from the database,
    so the order of wake-ups does not matter to it. Holding again is the same hold; a hold
    another holder left on this thread unreleased (a bug) is delivered, never dropped.
    """

    def __init__(self) -> None:
        self.holding = False

    def hold(self) -> None:
        if self.holding:
            return
        if _held.rows is not None:  # a hold on this thread never released (a bug): deliver, never drop
            logger.error("event wake-ups held on this thread were never released; delivering them now")
            leftover, _held.rows = _held.rows, None
            _release(leftover)
        _held.rows = []
        self.holding = True

    def release(self) -> None:
        if not self.holding:
            return
        rows, _held.rows = _held.rows or [], None
        self.holding = False
        _release(rows)


def _release(rows: Sequence[RunEvent]) -> None:
    for _, batch in groupby(rows, key=lambda row: row.run_id):
        _broadcast_batch(list(batch))


def _broadcast(events: Sequence[RunEvent]) -> None:
    held = _held.rows
    if held is not None:  # before the per-event sinks: one of them may commit events too
        held.extend(events)
    for sink in list(sinks):
        for event in events:
            _deliver(sink, event, event.run_id)
    if held is None:
        _broadcast_batch(events)


def _broadcast_batch(events: Sequence[RunEvent]) -> None:
    for batch_sink in list(batch_sinks):
        _deliver(batch_sink, events, events[0].run_id)


def _deliver(sink: Callable[[Any], None], what: Any, run_id: int) -> None:
    try:
        sink(what)
    except Exception:  # LOOP-6: one broken sink never stops the others or the run
        logger.warning("event sink %s failed for run %s", getattr(sink, "__name__", sink), run_id, exc_info=True)


def event_seqs_take(*, run_id: int, count: int) -> tuple[int, bool]:
    """Allocate ``count`` event seqs of a run; returns the last one and the run's Stop flag
    as the same UPDATE read it. One UPDATE, which also holds the run row until the caller's
    transaction ends, so producers of one run (the loop, the API's supplement_received,
    the reaper) take turns, never the same seq."""
    table = Run._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f'UPDATE "{table}" SET "event_seq" = "event_seq" + %s WHERE "id" = %s '
                       'RETURNING "event_seq", "cancel_requested"', [count, run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return row[0], bool(row[1])


StopFlag = Callable[[bool], None]  # told the run's Stop flag as a write just read it


def events_write(*, run_id: int, events: Sequence[tuple[str, dict[str, Any] | None]],
                 last_seq: int | None = None, stop_flag: StopFlag | None = None,
                 of_attempt: int | None = None) -> list[RunEvent]:
    """Persist events with the run's next seqs (one INSERT), then hand them to the sinks
    after commit. ``last_seq``: seqs the caller already allocated in its own UPDATE of the
    run (a step's commit does), the last of them; else they are allocated here, and
    ``stop_flag`` is told the Stop flag that allocation read (the loop streaming an answer
    then needs no query of its own for it, LOOP-7).

    ``of_attempt``: the writer is the run's execution under that attempt, and writes only
    while it owns the run — the seqs are then taken by the ownership check itself
    (``ownership.touch_statement``, which also beats), and ``RunNotOwned`` is raised, with
    nothing written, once another attempt owns it. Without it (the API's
    ``supplement_received``, the end of a run whoever ends it) the seqs are simply taken."""
    for type, _ in events:
        if type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type!r}")
    if not events:
        return []
    # The door of every event: no lone surrogate is stored, whatever entry let one through
    # (it would break every page and stream that shows the run). Small payloads, the same
    # objects back when clean.
    events = [(type, replace_lone_surrogates(data)) for type, data in events]
    if (last_seq is None and len(events) == 1 and connection.vendor == "postgresql"
            and not connection.in_atomic_block):
        return [_event_write_alone(run_id=run_id, type=events[0][0], data=events[0][1], stop_flag=stop_flag,
                                   of_attempt=of_attempt)]
    # No savepoint: inside a step's transaction a failed INSERT fails the whole step anyway,
    # and a savepoint is two more round trips (SAVEPOINT, RELEASE) for every step.
    with transaction.atomic(savepoint=False):
        cancelled = None
        if last_seq is None and of_attempt is not None:
            signals, last_seq = attempt_touch(run_id=run_id, attempt=of_attempt, events=len(events))
            cancelled = signals.cancel_requested
        elif last_seq is None:
            last_seq, cancelled = event_seqs_take(run_id=run_id, count=len(events))
        first = last_seq - len(events) + 1
        rows = [RunEvent(run_id=run_id, seq=first + offset, type=type, payload=data or {})
                for offset, (type, data) in enumerate(events)]
        _events_insert(rows)
    transaction.on_commit(lambda: _broadcast(rows))
    if stop_flag is not None and cancelled is not None:
        stop_flag(cancelled)
    return rows


_EVENT_COLUMNS = ("run_id", "seq", "type", "payload", "created_at")


def _event_write_alone(*, run_id: int, type: str, data: dict[str, Any] | None,
                       stop_flag: StopFlag | None, of_attempt: int | None) -> RunEvent:
    """One event outside any transaction (streamed text on its way), on PostgreSQL: its seq
    taken and its row inserted by one statement, which commits by itself: one round trip,
    a few times a second while an answer streams (docs/performance.md). The same UPDATE and INSERT as ``events_write``:
    for a run's execution (``of_attempt``), the ownership check's UPDATE, so a worker that
    lost its run inserts nothing (the INSERT reads its seq from the UPDATE's row)."""
    payload, created = (concrete_field(RunEvent, name) for name in _EVENT_COLUMNS[3:])
    row = RunEvent(run_id=run_id, type=type, payload=data or {}, created_at=timezone.now())
    columns = ", ".join(f'"{name}"' for name in _EVENT_COLUMNS)
    if of_attempt is None:
        seq_taken, params = (f'UPDATE "{Run._meta.db_table}" SET "event_seq" = "event_seq" + 1 WHERE "id" = %s '
                             'RETURNING "event_seq", "cancel_requested"', [run_id])
    else:
        seq_taken, params = touch_statement(run_id=run_id, attempt=of_attempt, events=1)
    with connection.cursor() as cursor:
        cursor.execute(
            f'WITH s AS ({seq_taken}), '
            f'e AS (INSERT INTO "{RunEvent._meta.db_table}" ({columns}) '
            'SELECT %s, s."event_seq", %s, %s, %s FROM s RETURNING "seq") '
            'SELECT s."event_seq", s."cancel_requested" FROM s, e',
            [*params, run_id, type, payload.get_db_prep_save(row.payload, connection),
             created.get_db_prep_save(row.created_at, connection)])
        written = cursor.fetchone()
    if written is None and of_attempt is not None:
        raise RunNotOwned()
    if written is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    row.seq = written[0]
    _broadcast([row])
    if stop_flag is not None:
        stop_flag(bool(written[1]))
    return row


def _events_insert(rows: Sequence[RunEvent]) -> None:
    """The rows in one INSERT (a batch past the database's bound on parameters in a few),
    written out, reading back no ids (every question writes several batches of events;
    docs/performance.md says why not ``bulk_create``). The rows get their ``created_at``; their ids stay unset."""
    fields = [concrete_field(RunEvent, name) for name in _EVENT_COLUMNS]
    payload, created = fields[3:]
    now = timezone.now()
    columns = ", ".join(f'"{field.column}"' for field in fields)
    size = max(1, connection.ops.bulk_batch_size(fields, rows))
    for start in range(0, len(rows), size):
        batch = rows[start:start + size]
        values: list[Any] = []
        for row in batch:
            row.created_at = now
            values += [row.run_id, row.seq, row.type, payload.get_db_prep_save(row.payload, connection),
                       created.get_db_prep_save(now, connection)]
        placeholders = ", ".join(["(%s, %s, %s, %s, %s)"] * len(batch))
        with connection.cursor() as cursor:
            cursor.execute(f'INSERT INTO "{RunEvent._meta.db_table}" ({columns}) VALUES {placeholders}', values)

def event_write(*, run_id: int, type: str, data: dict[str, Any] | None = None,
               stop_flag: StopFlag | None = None, of_attempt: int | None = None) -> RunEvent:
    """Persist one event with the next per-run seq, then hand it to the sinks after commit.
    ``of_attempt`` as for ``events_write``."""
    return events_write(run_id=run_id, events=[(type, data)], stop_flag=stop_flag, of_attempt=of_attempt)[0]

class DeltaBuffer:
    """Coalesces stream deltas into a few events a second instead of one per token; the
    first words go out at once when the stream goes on after them.

    With a ``redact`` function and its ``hold`` (how many trailing characters could still
    grow into a secret), the text is redacted as a whole before it leaves: a key split
    across chunks (tokenizers always split keys), in any of the forms the redactor knows, is
    caught, because a tail that could be the beginning of one waits for the next flush
    (LOOP-8). Text that cannot begin a secret is never held back.
    """

    def __init__(self, run_id: int, type: str, *, flush_chars: int = 4_000, flush_seconds: float = 0.15,
                 clock: Callable[[], float] | None = None, extra: dict[str, Any] | None = None,
                 redact: Callable[[str], str] | None = None, hold: Callable[[str], int] | None = None,
                 stop_flag: StopFlag | None = None, of_attempt: int | None = None) -> None:
        import time

        self.run_id, self.type, self.extra = run_id, type, extra or {}
        self.flush_chars, self.flush_seconds = flush_chars, flush_seconds
        self.clock = clock or time.monotonic
        self.redact = redact or (lambda text: text)
        self.hold = hold or (lambda text: 0)
        self.stop_flag = stop_flag
        self.of_attempt = of_attempt  # the run's execution writes them: only while it owns the run
        self.text = ""
        self.flushed = False
        self.since = self.clock()

    def add(self, text: str) -> None:
        if not text:
            return
        # The first words leave as soon as more follow them, not a flush interval later,
        # so a person sees the answer begin when it begins; an answer that
        # comes whole in one piece is still written once, with its step.
        waiting = bool(self.text) and not self.flushed
        self.text += text
        if waiting or len(self.text) >= self.flush_chars or self.clock() - self.since >= self.flush_seconds:
            self.flush()

    def _cut(self, final: bool) -> int:
        """Where the text may be cut: before any tail that could still grow into a secret."""
        return len(self.text) if final else len(self.text) - self.hold(self.text)

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        """Everything still buffered, as events for the caller to write with its step (one
        transaction instead of one more write per answer)."""
        ready, self.text = self.text, ""
        self.since = self.clock()
        return [(self.type, {**self.extra, "text": self.redact(ready)})] if ready else []

    def flush(self, *, final: bool = False) -> None:
        cut = self._cut(final)
        ready, self.text = self.text[:cut], self.text[cut:]
        if ready:
            event_write(run_id=self.run_id, type=self.type, data={**self.extra, "text": self.redact(ready)},
                       stop_flag=self.stop_flag, of_attempt=self.of_attempt)
            self.flushed = True
        self.since = self.clock()
