"""CTX-43: a manual compaction of a session whose latest run has ended, asked for by its
person (``sessions.services.manual_compaction.compaction_request``) and run by a worker
under the session's compaction hold. The same engine and commit rules as the run loop's
(``runloop.compaction``); its writes are a side writer's (``runloop.journal.side``).
"""
from __future__ import annotations

import logging

from context import CompactFirst, ContextPolicy, Counters
from core.log_redaction import secrets_kept_from_logs
from runloop.compaction import compaction_run
from runloop.errors import RunStopped
from runloop.journal import RunJournal
from runloop.journal.side import compaction_hold_release, side_event
from runloop.state import RunState, run_state_build, system_message
from sessions.models import Run
from sessions.selectors.instances import main_instance
from sessions.selectors.steps import run_for_execution, run_superseded

logger = logging.getLogger("agentloom.compaction")


def compaction_manual(*, run_id: int) -> str:
    """CTX-43 for a session with no active run: compact its latest run's main history now,
    under the same commit rules; a compliant result becomes the next run's starting view."""
    run = run_for_execution(run_id=run_id)
    try:
        return _compaction_manual(run)
    finally:  # the session takes questions again, whatever happened (one thing at a time)
        compaction_hold_release(run_id=run.pk)


def _compaction_manual(run: Run) -> str:
    if run.status in Run.ACTIVE_STATUSES:
        return "active"  # the loop picks the request up at its next preparation
    if run_superseded(run=run):
        # A newer question started meanwhile: it will compact by its own triggers; writing
        # into this older run now would put a foreign record inside the newer run's prefix.
        return "superseded"
    try:
        state = run_state_build(run, RunJournal.side(run))
    except RunStopped as stop:  # e.g. figures an admin set leave no input in the window the server keeps (CAT-9)
        side_event(run_id=run.pk, type="compaction_failed", data={"reason": stop.error.code,
                                                                   "message": stop.error.message})
        return "failed"
    # A finished run's history, under the session's compaction hold: its journal is a side
    # writer's (``run_state_build`` without a journal of the run's execution).
    # LOOP-8: the summary call sends the run's key and builds its tool servers' headers;
    # every log line of the process keeps them out meanwhile, as while a run executes.
    # What goes wrong is logged here, inside, never by the task runner outside (its log
    # line would quote the exception as it was).
    with secrets_kept_from_logs(state.redactor.secrets):
        try:
            return _compact_manually(state, run)
        except Exception:
            logger.exception("manual compaction of run %s failed", run.pk)
            try:  # the chat waits for the end of the compaction it asked for
                side_event(run_id=run.pk, type="compaction_failed", data={"reason": "internal_error"})
            except Exception:
                logger.exception("manual compaction of run %s: its failure could not be recorded", run.pk)
            return "failed"


def _compact_manually(state: RunState, run: Run) -> str:
    instance = main_instance(run=run)
    pipeline = state.pipeline(instance, 0)
    pipeline.policy = pipeline.policy or ContextPolicy()  # asked for by a person: under the defaults without one
    # The commit rule judges what the next request will carry: the agent's tools included.
    schemas = [tool.schema() for tool in state.tools_at(0)]
    system = system_message(state, 0)
    action = pipeline.next_action(system, schemas, counters=Counters(), manual=True)
    if not isinstance(action, CompactFirst):
        return "not_compacted"
    result = compaction_run(state, instance, pipeline, action, system, schemas, depth=0)
    return "compacted" if result is not None else "not_compacted"
