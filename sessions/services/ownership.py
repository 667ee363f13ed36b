"""Who may write a run's data: the attempt that claimed it, while it still holds it (LOOP-1).

Everything a run's execution writes — its records, events, frames, counters, heartbeats,
call logs, checkpoints, sub-instances, a completion check's verdict — is written only while
the run is still ``running`` under the attempt the worker claimed. The reaper may have ended
it (``interrupted``), a Stop of a run that missed its beats may have ended it, or a resume
may have queued it again under the next attempt: the worker of the old attempt is then no
longer its writer, and whatever it still tries to write must change nothing (``RunNotOwned``,
which the run loop knows as ``RunLost``).

The check is one conditional UPDATE of the run row (:func:`run_touch`): it matches only a
``running`` run of this attempt, writes the heartbeat (and the loop's counters), takes event
seqs, and reads back the Stop flag and what the API asked meanwhile. It is written here
once and every write of an execution makes it, in the transaction that writes:

- a step's commit and a tool announcement (``sessions.services.steps``);
- events on their own (``events.events_write`` with ``of_attempt``: the seqs are taken by
  this very UPDATE, in the statement that inserts the event when it goes alone);
- every other write (a checkpoint, a frame, a sub-instance, a call log, a record outside a
  step) inside :func:`run_owned`, a transaction that opens with it.

Because the UPDATE keeps the run row locked until the transaction ends, nothing takes the
run over between the check and the write: the reaper's and Stop's transitions wait for the
write to commit and then see its fresh heartbeat, and a resume, which moves the run only out
of an ended state, finds it still running. Once another attempt owns the run the UPDATE
matches nothing, ``RunNotOwned`` is raised and the transaction — the whole write — is rolled
back.

It is the check of the run's journal (``runloop.journal.RunJournal``, the one writer per
attempt), made in each of its write transactions. Writes that are not the run's are not checked here: what a provider
taught about a connection (a calibration sample, CTX-25; a window it proved, CAT-3) stays
true whoever owns the run, and the side writers of a run's data that are not its
execution — a manual compaction of a finished run, a summary prepared in the background —
are kept by their own guards (the session's compaction hold, the preparation's lease).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from sessions.models import Run
from sessions.run_errors import RunNotOwned

__all__ = ["RunNotOwned", "RunSignals", "attempt_touch", "run_owned", "run_touch", "touch_statement"]


@dataclass(frozen=True)
class RunSignals:
    """What the run row said at the last write: Stop pressed, and ``RunAttention`` bits."""

    cancel_requested: bool = False
    attention: int = 0


def touch_statement(*, run_id: int, attempt: int, counters: dict[str, Any] | None = None,
                    events: int = 0) -> tuple[str, list[Any]]:
    """The ownership check as SQL: an UPDATE of the run row that matches only while the run
    is ``running`` under ``attempt``, writing the heartbeat (and ``counters``) and taking
    ``events`` event seqs, ``RETURNING "event_seq", "cancel_requested", "attention"``.

    The one text of the check: run alone (:func:`run_touch`) or as the first part of a
    statement that writes with it (an event on its own, ``events._event_write_alone``)."""
    sets = ['"heartbeat_at" = %s', '"event_seq" = "event_seq" + %s']
    params: list[Any] = [timezone.now(), events]
    if counters is not None:
        sets.append('"counters" = %s')
        params.append(Run._meta.get_field("counters").get_db_prep_value(counters, connection))
    params += [run_id, Run.Status.RUNNING, attempt]
    return (f'UPDATE "{Run._meta.db_table}" SET {", ".join(sets)} '
            'WHERE "id" = %s AND "status" = %s AND "attempt" = %s '
            'RETURNING "event_seq", "cancel_requested", "attention"', params)


def run_touch(*, run: Run, counters: dict[str, Any] | None = None, events: int = 0) -> tuple[RunSignals, int]:
    """Heartbeat (and counters, and ``events`` event seqs) for a run this worker owns, in
    one UPDATE. Returns the signals and the last event seq taken; RunNotOwned when the
    run is not ``running`` under this attempt (``run.attempt``) any more."""
    return attempt_touch(run_id=run.pk, attempt=run.attempt, counters=counters, events=events)


def attempt_touch(*, run_id: int, attempt: int, counters: dict[str, Any] | None = None,
                  events: int = 0) -> tuple[RunSignals, int]:
    """:func:`run_touch` by the run's id and the attempt, for a writer that holds no row."""
    statement, params = touch_statement(run_id=run_id, attempt=attempt, counters=counters, events=events)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        raise RunNotOwned()
    return RunSignals(cancel_requested=bool(row[1]), attention=row[2]), row[0]


@contextmanager
def run_owned(*, run: Run, counters: dict[str, Any] | None = None) -> Iterator[RunSignals]:
    """A transaction in which the run is this attempt's: it opens with :func:`run_touch`
    (which holds the run row until it ends) and yields what that read back. Whatever the
    block writes commits only with it; RunNotOwned, before anything is written, when the
    run is not this attempt's any more. Joins the caller's transaction without a savepoint:
    a failure in the block fails the caller's whole write anyway."""
    with transaction.atomic(savepoint=False):
        signals, _ = run_touch(run=run, counters=counters)
        yield signals
