"""RunJournal: the one writer of one attempt's execution of a run (LOOP-1, issue #46).

Contract of every writing method, the same for all:

- it writes in ONE transaction, which opens with (or is) the ownership check of
  ``sessions.services.ownership`` — the conditional ``UPDATE … RETURNING`` of the run row
  that matches only while the run is ``running`` under this attempt, writes the heartbeat
  and the counters, and takes the event seqs;
- once another attempt owns the run (reaped, stopped, resumed and claimed again) the
  check matches nothing: the method writes nothing and raises ``RunLost``;
- it reads back what the run row says — Stop pressed, the API's requests
  (``RunAttention``) — into :attr:`RunJournal.signals`, and the watch's Stop flag;
- the events that belong to the write are committed with it and handed to the sinks on
  commit (``transaction.on_commit``, as Zulip's ``do_*`` actions send theirs); the
  wake-ups of streams may be held for a moment (:meth:`hold`, :meth:`release`), which is
  the journal's business, never the step machine's;
- records it writes are fed to the instance's context pipeline (``feeds``), so the next
  step's context needs no read back.

A side writer of a run's data that does not execute it (a manual compaction of a finished
run, a summary prepared in the background) has a journal with ``executes=False``: its
writes are plain transactions, kept by their own guards (the session's compaction hold,
the preparation's lease).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from django.db import transaction

from core.db_rows import rows_insert
from runloop.errors import RunCancelled, RunLost
from runloop.journal.watch import RunWatch
from sessions.models import Instance, ModelCall, PreparedCompaction, Run, RunAttention, SessionMessage, ToolInput
from sessions.run_errors import RunError
from sessions.selectors.context import context_load
from sessions.selectors.records import record_as_engine_dict
from sessions.selectors.steps import assistant_steps
from sessions.services.approvals import ApprovalAsk, approval_started, approvals_wait
from sessions.services.checkpoints import CheckpointResult, checkpoint_commit
from sessions.services.event_log import BroadcastHold, DeltaBuffer, events_write
from sessions.services.frames import frame_update
from sessions.services.inputs import input_answered_data, tool_input_close, tool_input_delivered, tool_input_open
from sessions.services.manual_compaction import compaction_request_taken
from sessions.services.model_calls import (
    CallChain,
    PreparedCall,
    model_call_close,
    model_call_open,
    model_call_prepare,
    session_action_model_note,
)
from sessions.services.model_steps import instance_steps_recount
from sessions.services.ownership import RunSignals, run_owned, run_touch
from sessions.services.prepared import preparation_open, preparation_request, preparation_take, preparations_end
from sessions.services.records import NewRecord
from sessions.services.runs import run_claim, run_finish, run_reopen_record, run_wait_for_server
from sessions.services.steps import step_announce, step_commit
from sessions.services.supplements import supplements_take

Event = tuple[str, dict[str, Any] | None]
Deltas = DeltaBuffer  # streamed text on its way, a few events a second (``RunJournal.deltas``)
ACTION = ModelCall.Purpose.ACTION


class Fed(Protocol):
    """What the journal feeds the records it wrote to: an instance's context pipeline."""

    @property
    def context(self) -> Any: ...


@dataclass
class ActionLog:
    """An action call's log, made when the step that saves its answer commits: what it sent
    is stored inside that transaction (a worker that lost the run stores none of it), and
    the instance's call chain advances to it once it committed."""

    make: Callable[[], PreparedCall]
    prepared: PreparedCall | None = None

    def row(self) -> ModelCall:
        self.prepared = self.make()
        return self.prepared.call


class RunJournal:
    """The one writer of an attempt's execution of ``run`` (see the module's contract)."""

    def __init__(self, *, run: Run, instance: Instance | None, attempt: int, executes: bool = True) -> None:
        run.attempt = attempt  # every write checks this attempt, whatever the row said when read
        self.run, self.main, self.attempt, self.executes = run, instance, attempt, executes
        self.counters: dict[str, Any] = run.counters
        # What the run row said at the last write (Stop, the API's requests), and when: each
        # step reads it from its own commit instead of asking again (LOOP-1, LOOP-7).
        self.signals = RunSignals(cancel_requested=run.cancel_requested, attention=run.attention)
        self.touched_at = time.monotonic()
        self.watch = RunWatch(run.pk, attempt=attempt)
        self.steps: dict[int, int] = {}  # assistant records per instance
        self.call_chains: dict[tuple[int, str], CallChain] = {}
        self.feeds: dict[int, Fed] = {}  # the context pipelines, by instance: fed what is written
        self._wakeups = BroadcastHold()

    @classmethod
    def claim(cls, *, run_id: int) -> RunJournal | None:
        """Claim a queued run (``run_claim``, which writes ``run_started``): the journal of
        the attempt claimed, or None when someone else has it (a second delivery)."""
        run = run_claim(run_id=run_id)
        if run is None:
            return None
        journal = cls(run=run, instance=getattr(run, "main_as_claimed", None), attempt=run.attempt)
        # The claim wrote the heartbeat and read the Stop flag: the first beat and Stop check
        # are due one interval from now, not at the first token (issue #29).
        journal.watch.noted(cancelled=run.cancel_requested)
        return journal

    @classmethod
    def side(cls, run: Run) -> RunJournal:
        """The journal of a side writer of ``run``'s data that does not execute it (a manual
        compaction of a finished run, a summary prepared in the background): plain
        transactions, its events' seqs taken without the ownership check, its writes kept
        by its own guards (the session's compaction hold, the preparation's lease)."""
        return cls(run=run, instance=None, attempt=run.attempt, executes=False)

    # ------------------------------------------------------------- the check

    def _noted(self, signals: RunSignals) -> None:
        self.signals, self.touched_at = signals, time.monotonic()
        self.watch.noted(cancelled=signals.cancel_requested)

    def attention(self, bit: int) -> bool:
        """Whether the API asked for ``bit`` (a ``RunAttention``) as the last write read it."""
        return bool(self.signals.attention & bit)

    def asked(self, bit: int) -> None:
        """Note a request the run row has not said yet (a supplement seen while finishing)."""
        self.signals = RunSignals(self.signals.cancel_requested, self.signals.attention | bit)

    @contextmanager
    def owned(self) -> Iterator[None]:
        """The transaction a write goes in: it opens with the ownership check (with the
        counters and heartbeat), so the block writes only while this attempt owns the run,
        else RunLost and nothing is written. For a tool writing the run's own storage (the
        plan) too. A side writer's is a plain transaction."""
        if not self.executes:
            with transaction.atomic():
                yield
            return
        with run_owned(run=self.run, counters=self.counters) as signals:
            self._noted(signals)
            yield

    def touch(self) -> None:
        """Heartbeat, counters and the ownership check in one UPDATE."""
        signals, _ = run_touch(run=self.run, counters=self.counters)
        self._noted(signals)

    def check(self) -> None:
        """Between steps: RunLost once a beat found the run taken over, a fresh read after a
        quiet spell, RunCancelled once Stop was pressed."""
        if self.watch.lost:
            raise RunLost()
        if time.monotonic() - self.touched_at >= self.watch.heartbeat_every:
            self.touch()
        if self.signals.cancel_requested:
            raise RunCancelled()

    def bump(self, name: str, by: int = 1) -> None:
        """Count in memory; the next write saves the counters with it."""
        self.counters[name] = self.counters.get(name, 0) + by

    # ------------------------------------------------------------- wake-ups

    def hold(self) -> None:
        """Hold back the wake-ups of streams for what follows at once (issue #29)."""
        self._wakeups.hold()

    def release(self) -> None:
        """Hand the held wake-ups on: before anything slow, and on every way out."""
        self._wakeups.release()

    # ------------------------------------------------------------- events

    def emit(self, type: str, data: dict[str, Any] | None = None) -> None:
        """An event on its own: its seq taken by the ownership check, Stop read back."""
        events_write(run_id=self.run.pk, events=[(type, data)], stop_flag=self.watch.stop_flag_read,
                     of_attempt=self.attempt if self.executes else None)

    def deltas(self, type: str, *, extra: dict[str, Any], redact: Callable[[str], str],
               hold: Callable[[str], int]) -> Deltas:
        """Streamed text as a few events a second, each flush written only while the run is
        ours, reading the Stop flag with its seqs (no poll of its own while text flows)."""
        return DeltaBuffer(self.run.pk, type, extra=extra, redact=redact, hold=hold,
                           stop_flag=self.watch.stop_flag_read, of_attempt=self.attempt if self.executes else None)

    # ------------------------------------------------------------- records

    def _fed(self, instance: Instance, rows: Sequence[SessionMessage]) -> None:
        fed = self.feeds.get(instance.pk)
        if fed is not None and rows:
            fed.context.feed([record_as_engine_dict(row) for row in rows])

    def load(self, *, instance: Instance, snapshots: bool) -> tuple[Any, list[dict[str, Any]]]:
        """What an instance's context starts from and its records since (a read)."""
        return context_load(run=self.run, instance=instance, snapshots=snapshots)

    def step(self, instance: Instance, *, records: Sequence[NewRecord] = (), events: Sequence[Event] = (),
             model_steps: int = 0, model_call: ActionLog | None = None) -> list[SessionMessage]:
        """A step (``steps.step_commit``): its records, events and call log with the counters
        and heartbeat. Returns the rows inserted (a retried save inserts none)."""
        rows, signals = step_commit(run=self.run, instance=instance, counters=self.counters, records=records,
                                    events=events, model_steps=model_steps,
                                    model_call=model_call.row if model_call is not None else None)
        self._noted(signals)
        if model_call is not None and model_call.prepared is not None:
            self.call_chain(instance, ACTION).advance(model_call.prepared)
        self._fed(instance, rows)
        return rows

    def announce(self, events: Sequence[Event]) -> None:
        """Events that go out on their own (tools about to start), Stop read fresh (LOOP-7)."""
        self._noted(step_announce(run=self.run, events=events, counters=self.counters))

    def step_number(self, instance: Instance) -> int:
        """The next assistant step of an instance (counted once, then kept)."""
        if instance.pk not in self.steps:
            self.steps[instance.pk] = assistant_steps(instance=instance)
        self.steps[instance.pk] += 1
        return self.steps[instance.pk]

    def supplements_take(self, instance: Instance) -> list[SessionMessage]:
        """RUN-5: the queued supplements into the records, with the frame."""
        with self.owned():
            rows = supplements_take(run=self.run, instance=instance)
        self._fed(instance, rows)
        return rows

    def reopen(self, instance: Instance) -> None:
        """A resumed attempt: its steps counted again, and a ``resumed`` record (RUN-6)."""
        with self.owned():
            instance_steps_recount(run=self.run, instance=instance)
            run_reopen_record(run=self.run)

    def sub_instance(self, parent: Instance, *, key: str, depth: int, task: str, call_id: str) -> Instance:
        """RUN-3: a sub-instance made, given its task and announced, in one transaction."""
        with self.owned():
            sub, _ = Instance.objects.get_or_create(run=self.run, key=key[:64],
                                                    defaults={"parent": parent, "depth": depth})
            self.step(sub, records=[NewRecord("user", {"role": "user", "content": task}, "task")],
                      events=[("sub_instance_started", {"instance": str(sub.pk), "call_id": call_id})])
        return sub

    def verdict(self, instance: Instance, verdict: dict[str, Any]) -> None:
        """LOOP-9: a completion check's verdict, in the counters and as a record, at once."""
        steps = assistant_steps(instance=instance)
        counters = self.counters
        before = counters.get("verification")
        counters["verification"] = verdict
        try:
            self.step(instance, records=[NewRecord("context", {"verification": verdict},
                                                   f"verification-{self.attempt}-{steps}")])
        except RunLost:
            self._restore(counters, "verification", before)
            raise

    @staticmethod
    def _restore(counters: dict[str, Any], name: str, before: Any) -> None:
        if before is None:
            counters.pop(name, None)
        else:
            counters[name] = before

    def frame(self, instance: Instance, **changes: Any) -> None:
        """The instance's compaction state in its frame; a manual request taken is cleared."""
        with self.owned():
            frame_update(instance=instance, **changes)
            if instance.parent_id is None and self.attention(RunAttention.COMPACT):
                compaction_request_taken(run=self.run)

    # ------------------------------------------------------------- model calls

    def call_chain(self, instance: Instance, purpose: str) -> CallChain:
        """What this run last logged for an instance and purpose: the next log is its delta."""
        return self.call_chains.setdefault((instance.pk, purpose), CallChain())

    def model_noted(self, *, provider: str, model: str, other_models: bool) -> None:
        """CTX-11: the session's action calls go to this model too."""
        with self.owned():
            session_action_model_note(session_id=self.run.session_id, provider=provider, model=model,
                                      other_models=other_models)

    def action_log(self, instance: Instance, **fields: Any) -> ActionLog:
        """An action call's log, to save with the step of its answer (:meth:`step`)."""
        return ActionLog(lambda: model_call_prepare(run=self.run, instance=instance, purpose=ACTION,
                                                    chain=self.call_chain(instance, ACTION), **fields))

    def action_logged(self, instance: Instance, **fields: Any) -> None:
        """An action call's log on its own (it failed, or the server cut its prompt)."""
        log = self.action_log(instance, **fields)
        with self.owned():
            rows_insert([log.row()])
        assert log.prepared is not None
        self.call_chain(instance, ACTION).advance(log.prepared)

    def call_open(self, instance: Instance, *, chain: CallChain, **fields: Any) -> ModelCall:
        """A summary or check call's log, opened before it is sent."""
        with self.owned():
            return model_call_open(run=self.run, instance=instance, chain=chain, **fields)

    def call_close(self, call: ModelCall, **fields: Any) -> None:
        """... and closed with its outcome."""
        with self.owned():
            model_call_close(call=call, **fields)

    # ------------------------------------------------------------- compaction

    def preparation_open(self) -> PreparedCompaction | None:
        """CTX-45: the session's summary under way or ready (ending one whose worker left)."""
        with self.owned():
            return preparation_open(session_id=self.run.session_id)

    def preparation_request(self, instance: Instance, **fields: Any) -> PreparedCompaction | None:
        """CTX-45: ask for a summary of a snapshot of the view to be made in the background."""
        with self.owned():
            return preparation_request(run=self.run, instance=instance, **fields)

    def preparation_discard(self, prepared: PreparedCompaction, *, reason: str) -> None:
        """CTX-45: a prepared summary that no longer fits the view, discarded whole."""
        with self.owned():
            preparations_end(prepared=prepared, status=PreparedCompaction.Status.DISCARDED, reason=reason)

    def checkpoint(self, instance: Instance, *, prepared: PreparedCompaction | None = None,
                   **fields: Any) -> CheckpointResult | None:
        """RUN-10: a compaction checkpoint; the ``prepared`` summary it was made of marked
        used in the same transaction. None when that was not ready any more."""
        with self.owned():
            if prepared is not None and not preparation_take(prepared=prepared):
                return None
            return checkpoint_commit(run=self.run, instance=instance, **fields)

    # ------------------------------------------------------------- the end

    def finish(self, status: str, *, error: RunError | None = None, reason: str = "",
               event_data: dict[str, Any] | None = None, announce: bool = True) -> None:
        """Record the end, only from ``running`` and only while this attempt owns the run
        (``run_finish``'s guarded transition is the check); the error announced first
        (``run_error``), only while the run is ours. The main instance's steps counted in
        memory are saved with it. ``SupplementsPending`` when a supplement arrived meanwhile
        (RUN-5: the loop answers it too)."""
        if error is not None and announce:
            self.emit("run_error", error.event())
        if not run_finish(run=self.run, status=status, error=error, reason=reason, event_data=event_data,
                          expected_from=(str(Run.Status.RUNNING),), of_attempt=self.attempt,
                          main_steps=self.main.model_steps if self.main is not None else None):
            raise RunLost()

    def wait_for_approvals(self, instance: Instance, *, step: int, asks: Sequence[ApprovalAsk]) -> None:
        """TOOL-8: the calls that wait recorded, announced and the run moved to ``waiting``,
        at once (its guarded transition is the check)."""
        if not approvals_wait(run=self.run, attempt=self.attempt, instance=instance, step=step, asks=asks):
            raise RunLost()

    def approved_call_starts(self, approval_id: int) -> bool:
        """TOOL-9: an approved call marked started before it is made, while the run is this
        attempt's; False when an earlier attempt started it (it is never made twice)."""
        with self.owned():
            return approval_started(approval_id=approval_id)

    # TOOL-10: a server's question during a call, only while the run is this attempt's.

    def input_open(self, instance: Instance, *, call_id: str, question: Any) -> ToolInput:
        with self.owned():
            return tool_input_open(run=self.run, instance_id=instance.pk, attempt=self.attempt, call_id=call_id,
                                   question=question)

    def input_close(self, row: ToolInput, *, status: str) -> bool:
        """End the question's wait (Stop, the bound) and say so, unless an answer came first."""
        with self.owned():
            if not tool_input_close(row=row, status=status):
                return False
            row.status = status
            self.emit("input_answered", input_answered_data(row))
        return True

    def input_delivered(self, row: ToolInput) -> None:
        with self.owned():
            tool_input_delivered(row=row)

    def wait_for_server(self, *, seconds: float, error: RunError) -> None:
        """LOOP-3: back to the queue until the server's time (its guarded transition is the check)."""
        if not run_wait_for_server(run=self.run, attempt=self.attempt, seconds=seconds, error=error):
            raise RunLost()
