"""What one step of a run writes, in one transaction and few statements (LOOP-1).

Every step is saved before the next begins (a worker killed anywhere loses at most the
step in flight), so each save is a commit; what makes it cheap is that a commit is a
handful of statements that do everything at once:

- the records: seqs taken with one UPDATE of the session row, rows in with one INSERT;
- the run row: one UPDATE that writes the heartbeat and the counters, takes the event
  seqs, and *checks ownership* (only a ``running`` run of this worker's attempt matches:
  ``sessions.services.ownership``, the check every write of an execution makes) —
  returning whether Stop was pressed and what the API asked meanwhile, so the loop needs
  no other read to know it;
- the events: one INSERT; and the step's model-call log: one INSERT;
- no savepoint: the services it calls join its transaction without one
  (``atomic(savepoint=False)``), since a failure fails the whole step anyway and each
  savepoint is two more round trips (SAVEPOINT, RELEASE).

A step with one tool call is three commits — the answer, the announcement that its tools
start (``step_announce``: Stop is read fresh before a tool starts, LOOP-7), the results —
and 12 round trips with the next call's new blobs, besides each commit's BEGIN and COMMIT
(``tests/runloop/test_step_cost.py``, ``benchmarks/loop.py``).

A step saved twice (a save retried after a crash) hits the records' entry-key
constraint; the whole transaction rolls back and the careful path de-duplicates.

Counts of model steps are kept by the worker in memory and written with checkpoints and
when the run ends; a worker that died leaves them to be counted again from the records
when the run resumes (``model_steps.instance_steps_recount``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import IntegrityError, transaction

from core.db_rows import rows_insert
from sessions.models import Instance, ModelCall, Run, SessionMessage
from sessions.services.event_log import events_write
from sessions.services.ownership import RunSignals, run_touch
from sessions.services.records import NewRecord, records_append, records_append_new

CallLogRow = ModelCall | Callable[[], ModelCall]


def step_commit(*, run: Run, instance: Instance, records: Sequence[NewRecord] = (),
                events: Sequence[tuple[str, dict[str, Any] | None]] = (), counters: dict[str, Any] | None = None,
                model_steps: int = 0, model_call: CallLogRow | None = None) -> tuple[list[SessionMessage], RunSignals]:
    """Save one step: its records, its events, the counters and heartbeat and the call
    log, atomically, and only while this worker owns the run. ``model_call``: the log's
    row, or what makes it — then made inside the transaction (again, if it is retried), so
    what the log stores besides its row commits with the step or not at all.

    ``model_steps`` is added to the caller's instance (in memory) only if the records were
    new. Returns the rows inserted and the run's signals; ``ownership.RunNotOwned``
    (nothing written) when the run is not ours any more.
    """
    try:
        with transaction.atomic():
            rows = records_append_new(session=run.session, run=run, instance=instance, records=records)
            return rows, _rest(run, instance, events, counters, model_steps, model_call)
    except IntegrityError:
        pass  # a record of this step was saved before (a retried save): de-duplicate
    with transaction.atomic():
        rows = records_append(session=run.session, run=run, instance=instance, records=records)
        return rows, _rest(run, instance, events, counters, model_steps if rows else 0, model_call)


def step_announce(*, run: Run, events: Sequence[tuple[str, dict[str, Any] | None]],
                  counters: dict[str, Any] | None = None) -> RunSignals:
    """Events that must go out on their own (tools about to start), with the heartbeat and
    a fresh read of the Stop flag, in two statements."""
    with transaction.atomic():
        signals, last_seq = run_touch(run=run, counters=counters, events=len(events))
        events_write(run_id=run.pk, events=events, last_seq=last_seq)
    return signals


def _rest(run: Run, instance: Instance, events: Sequence[tuple[str, dict[str, Any] | None]],
          counters: dict[str, Any] | None, model_steps: int, model_call: CallLogRow | None) -> RunSignals:
    signals, last_seq = run_touch(run=run, counters=counters, events=len(events))
    if events:
        events_write(run_id=run.pk, events=events, last_seq=last_seq)
    if model_call is not None:
        rows_insert([model_call() if callable(model_call) else model_call])
    if model_steps:
        instance.model_steps += model_steps
    return signals
