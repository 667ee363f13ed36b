"""CTX-45 in a worker: a summary of a snapshot of the view, made while the run (or the
idle session) goes on.

The run loop asks for one past the prepare point (``compaction.prepare_maybe``); a worker
runs :func:`compaction_prepare` with the row's id. It summarizes the snapshot the row
holds with the ordinary engine and the run's own model target, figures and call log
(CTX-46's cached form included), leaving room for what the view grows by before the
trigger, and saves the summary and the prefix it covers. Nothing here touches the view:
the trigger commits the summary, or discards it, under the commit rules
(``compaction.compaction_run``). A worker killed meanwhile leaves a row whose lease
lapses; nothing else was written but the call log.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from context import ContextPolicy
from context.compaction import SummaryCall, SummaryReply, compact, drive, prepared_from
from context.traces import traces_from_json
from core.log_redaction import secrets_kept_from_logs
from models_catalog.errors import ProviderError
from models_catalog.slots import BACKGROUND
from runloop.compaction import compaction_request, summary_call, token_figures
from runloop.journal import RunJournal
from runloop.journal.side import (
    preparation_claim,
    preparation_failed,
    preparation_ready,
    preparation_renew,
    side_event,
)
from runloop.learning import calibration_save
from runloop.state import RunState, run_state_build
from sessions.models import PreparedCompaction
from sessions.selectors.steps import run_for_execution, run_is_active

logger = logging.getLogger("agentloom.compaction")


def compaction_prepare(*, prepared_id: int) -> str:
    """Prepare the queued summary ``prepared_id``: ``ready``, ``failed``, ``discarded``
    (ended meanwhile) or ``not_claimed`` (another delivery took it). Never raises."""
    prepared = preparation_claim(prepared_id=prepared_id)
    if prepared is None:
        return "not_claimed"
    try:
        # It writes for the run, not as it (a side writer's journal): its lease keeps its writes.
        run = run_for_execution(run_id=prepared.run_id)
        state = run_state_build(run, RunJournal.side(run))
        state.slot_kind = BACKGROUND  # CAT-11: it yields the model server to the runs' own calls
    except Exception:
        logger.exception("prepared summary %s: its run's model could not be reached", prepared_id)
        preparation_failed(prepared=prepared, reason="could_not_start")
        return "failed"
    # LOOP-8: the summary calls send the run's key; every log line keeps it out meanwhile.
    with secrets_kept_from_logs(state.redactor.secrets):
        try:
            return _prepare(state, prepared)
        except Exception:
            logger.exception("prepared summary %s failed", prepared_id)
            preparation_failed(prepared=prepared, reason="internal_error")
            return "failed"
        finally:
            state.tool_sessions.close_all()


def _prepare(state: RunState, prepared: PreparedCompaction) -> str:
    started = time.monotonic()
    snapshot = prepared.snapshot
    policy = ContextPolicy.from_dict(prepared.policy)
    figures = state.figures
    if figures.estimator_id != prepared.estimator_id:
        preparation_failed(prepared=prepared, reason="estimator_changed")
        return "failed"
    instance = prepared.instance
    # Room for what the view grows by until the trigger fires: the summary is committed then.
    headroom = max(0, int(figures.budget.trigger_threshold(policy)) - prepared.tokens)
    request = compaction_request(
        state, instance, system=snapshot["system"], messages=snapshot["messages"],
        sources=[tuple(source) if source else None for source in snapshot["sources"]], tools=snapshot["tools"],
        policy=policy, trigger="budget", max_calls=policy.max_compaction_calls, headroom=headroom,
        traces=traces_from_json(snapshot.get("traces"), len(snapshot["messages"])))
    request = replace(request, summary_only=True)  # CTX-47: a preparation is for the summary tier

    def keep_lease() -> None:
        # CAT-11: waiting for the model server behind the runs' own calls may take longer
        # than the preparation's lease: it is kept meanwhile, and the wait ends once the
        # summary is no longer wanted (discarded: the summary call fails with that code).
        if not preparation_renew(prepared=prepared):
            raise ProviderError("The prepared summary was discarded while it waited for the model server.",
                                permanent=True, code="discarded")

    state.slot_poll = keep_lease

    def summarize(call: SummaryCall) -> SummaryReply:
        if not preparation_renew(prepared=prepared):  # discarded meanwhile: stop paying for it
            return SummaryReply(text=None, error_code="discarded", deterministic=True)
        return summary_call(state, instance, call)

    result = drive(compact(request), summarize)
    made = prepared_from(result, request)
    metrics: dict[str, Any] = {**(made.metrics if made is not None else result.metrics),
                               "duration_ms": int((time.monotonic() - started) * 1000), "headroom": headroom}
    calibration_save(state)
    if made is None:
        preparation_failed(prepared=prepared, reason=result.reason, metrics=metrics)
        return "failed"
    if not preparation_ready(prepared=prepared, summary=made.summary, prefix=made.prefix, digest=made.digest,
                             metrics=metrics):
        return "discarded"
    if run_is_active(run_id=prepared.run_id):
        # The chat's meter says a summary is ready (an idle session's shows it when loaded).
        side_event(run_id=prepared.run_id, type="compaction_prepared",
                   data={**token_figures("after", estimated=metrics.get("tokens_after_estimated"),
                                         calibrated=metrics.get("tokens_after_calibrated")),
                         "summary_calls": metrics.get("summary_calls")})
    return "ready"
