"""The journal of a run: its one writer (LOOP-1, issue #46).

:class:`RunJournal` writes everything one attempt's execution of a run writes — records,
events, model-call logs, frames, checkpoints, sub-instances, counters, heartbeats — and is
the only door from the run loop to ``sessions.services`` (the side writers' few writes are
in ``runloop.journal.side``). One per attempt, made from the run, its main instance and
the attempt, never from the ``RunState``. The step machine decides; the journal writes.
"""
from runloop.journal.journal import ActionLog, Deltas, RunJournal
from runloop.journal.watch import RunWatch

# The shapes of what the journal writes, and what its end may say: the step machine builds
# records with these and catches this, and imports them from its writer.
from sessions.services.approvals import ApprovalAsk
from sessions.services.model_steps import assistant_record
from sessions.services.records import NewRecord
from sessions.services.runs import SupplementsPending

__all__ = ["ActionLog", "ApprovalAsk", "Deltas", "NewRecord", "RunJournal", "RunWatch", "SupplementsPending",
           "assistant_record"]
