"""Compaction in the worker (CTX-30 … CTX-44): drives the pure engine's generator with real
summary calls, commits only what the engine accepted, and throttles repeated failures.

Order of concern: keep the request valid → keep information → shrink old history →
only then report that the run cannot continue.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from agentloom.runloop.calls import collected_call
from agentloom.runloop.log_redaction import secrets_kept_from_logs
from agentloom.runloop.meter import context_measured
from agentloom.runloop.state import RunState, run_state_build, system_message
from context import CompactFirst, ContextPipeline, ContextPolicy, Counters, Send, build_body
from context.compaction import CompactionRequest, RuntimeState, SummaryCall, SummaryReply, compact, drive
from models_catalog.errors import ProviderError
from sessions.frames import plan_text
from sessions.models import Instance, ModelCall, Run, RunAttention, SessionMessage
from sessions.selectors import main_instance, sub_instances_running, tool_calls_unsettled
from sessions.services.events import event_emit
from sessions.services.frames import frame_update
from sessions.services.history import checkpoint_commit, compaction_request_taken
from sessions.services.records import NewRecord

logger = logging.getLogger("agentloom.compaction")
# CTX-41: the token figures of a compaction, one name per meaning (metrics and `compacted`).
TOKEN_FIGURES = ("tokens_before_estimated", "tokens_before_calibrated", "tokens_after_estimated",
                 "tokens_after_calibrated")


def step_request(state: RunState, instance: Instance, pipeline: ContextPipeline, system: dict[str, Any],
                 schemas: list[dict[str, Any]], *, depth: int, force: str | None = None) -> Send:
    """CTX-30: the request of this step, compacted first when the pipeline says so (at
    most once). ``force`` names a trigger that fires whatever the figures say: after the
    provider refused a request as too long (CAT-3), the next one must be smaller.

    Raises RequestValidationError (CTX-10) and ContextTooLong (CTX-39)."""
    if instance.parent_id is None and state.signals.attention & RunAttention.COMPACT:
        instance.refresh_from_db(fields=["frame"])  # a manual compaction was asked for (CTX-43)
    frame = instance.frame or {}  # the loop's copy: only it and the API's flagged requests write the frame
    counters = Counters(instance.user_turns, instance.model_steps, instance.baseline_user_turns,
                        instance.baseline_model_steps)
    action = pipeline.next_action(system, schemas, counters=counters, manual=bool(frame.get("compact_requested")),
                                  force=force, failure=frame.get("compaction_failure"), now=time.time())
    if isinstance(action, Send):
        if action.throttled:
            event_emit(run_id=state.run.pk, type="compaction_skipped",
                       data={"reason": "throttled_after_failure", "tokens": action.figure})
        return action
    compacted = _run_compaction(state, instance, pipeline, action, system, schemas, depth=depth)
    if compacted is None:
        return pipeline.without_compaction()
    return pipeline.after_compaction(system, schemas, compacted)


def _task_anchor(instance: Instance) -> dict[str, Any] | None:
    question = SessionMessage.objects.filter(instance=instance, kind="user").order_by("-seq").first()
    return question.message if question else None


def _runtime_state(run: Run, instance: Instance) -> RuntimeState:
    """CTX-36: the facts the model cannot be trusted to remember, from the records and the
    frame — never from the view being replaced, where an earlier compaction may already
    have summarized them: the agent's plan (verbatim; the session's, carried from question
    to question, LOOP-4), the calls in flight (normally settled first, CTX-30) and those
    whose outcome is unknown (one call, one id, one state), sub-agents still running, and
    queued supplements."""
    frame = Instance.objects.get(pk=instance.pk).frame or {}
    calls = tool_calls_unsettled(run=run, instance=instance)
    return RuntimeState(
        plan=plan_text(frame.get("plan")),
        pending_calls=calls.pending,
        unknown_calls=calls.unknown,
        sub_instances=tuple(sub_instances_running(instance=instance)),
        queued_supplements=tuple(item["content"] for item in frame.get("supplements") or []))


def _run_compaction(state: RunState, instance: Instance, pipeline: ContextPipeline, action: CompactFirst,
                    system: dict[str, Any], schemas: list[dict[str, Any]], *,
                    depth: int) -> list[dict[str, Any]] | None:
    """Drive the engine with real summary calls; the compacted messages (without the
    system message) when a checkpoint was committed, else None."""
    started = time.monotonic()
    trigger, tokens, projected = action.trigger, action.tokens, action.projected
    policy = pipeline.policy or ContextPolicy()
    event_emit(run_id=state.run.pk, type="compaction_started", data={"trigger": trigger, "tokens": tokens})
    remaining = state.limits["max_model_calls"] - state.counters.get("model_calls", 0) - 1
    figures = state.figures
    calibration = figures.calibration
    request = CompactionRequest(
        system=system, messages=projected.messages,
        sources=list(projected.sources or [None] * len(projected.messages)),
        task_anchor=_task_anchor(instance), runtime_state=_runtime_state(state.run, instance),
        budget=figures.budget,
        policy=policy, estimator=figures.calibrated_estimator(), tools=schemas, trigger=trigger,
        max_summary_calls=max(0, min(policy.max_compaction_calls, remaining)),
        dialect=state.target.dialect,
    )

    def summarize(call: SummaryCall) -> SummaryReply:
        reply = _summary_call(state, instance, call)
        event_emit(run_id=state.run.pk, type="compaction_progress",
                   data={"segment": call.segment, "of": call.planned_segments, "attempt": call.attempt,
                         "ok": bool(reply.text)})
        return reply

    result = drive(compact(request), summarize)
    # CTX-41: the engine's figures (tokens before and after, each under one name per
    # meaning), the duration, and the calibration they were made with (summary calls
    # may have taught a new ratio since).
    metrics = {**result.metrics, "duration_ms": int((time.monotonic() - started) * 1000), "trigger": trigger,
               "calibration_ratio": calibration.ratio, "calibration_samples": calibration.samples}
    if result.outcome == "compacted":
        covered = max(action.start.watermark, pipeline.context.last_seq)
        committed = checkpoint_commit(
            run=state.run, instance=instance, messages=result.messages, covered_seq=covered,
            estimator_id=figures.estimator_id, metrics=metrics,
            records=[NewRecord("compaction_summary", {"summary": result.summary, "metrics": metrics},
                               f"compaction-{covered}-{trigger}")])
        _requests_taken(state, instance, compaction_failure=None, compact_requested=None)
        if instance.parent_id is None:  # before ``compacted``: whoever waits for that reads the new size
            event_emit(run_id=state.run.pk, type="context_measured",
                       data=context_measured(state, tokens=metrics["tokens_after_calibrated"], measured_by="estimate"))
        event_emit(run_id=state.run.pk, type="compacted", data={
            "trigger": trigger, **{name: metrics.get(name) for name in TOKEN_FIGURES},
            "target_reached": metrics.get("target_reached"), "view_saved": committed.view is not None,
            "revision": committed.snapshot.revision})
        return list(result.messages)
    if result.outcome == "skipped":
        _requests_taken(state, instance, compact_requested=None)
        event_emit(run_id=state.run.pk, type="compaction_skipped", data={"reason": result.reason, "metrics": metrics})
    else:
        _requests_taken(state, instance, compact_requested=None,
                        compaction_failure={"tokens": tokens, "at": time.time(), "reason": result.reason})
        event_emit(run_id=state.run.pk, type="compaction_failed", data={"reason": result.reason, "metrics": metrics})
    return None


def _requests_taken(state: RunState, instance: Instance, **frame: Any) -> None:
    """Write the frame's compaction state, and clear a manual request the run took."""
    frame_update(instance=instance, **frame)
    if instance.parent_id is None and state.signals.attention & RunAttention.COMPACT:
        compaction_request_taken(run=state.run)


def _summary_call(state: RunState, instance: Instance, call: SummaryCall) -> SummaryReply:
    """One summarizer request: the hard limit first (CTX-39), then the provider, with the
    output limit the engine gave it (what the compacted view can hold of a summary, CTX-34)."""
    figures = state.figures
    estimate = figures.estimates.request(call.messages)
    if not figures.fits(estimate):
        return SummaryReply(text=None, error_code="context_overflow", deterministic=True)
    # The engine sized the request for the run's output reserve, and the reply for its room.
    body = build_body(state.target.shape, call.messages,
                      max_output_tokens=call.max_output_tokens or figures.budget.max_output_tokens)
    try:
        end = collected_call(state, instance, purpose=ModelCall.Purpose.COMPACTION, body=body,
                             estimator_id=figures.estimator_id, estimate=estimate, counts_as_model_call=True)
    except ProviderError as exc:
        return SummaryReply(text=None, error_code=exc.code, deterministic=exc.permanent)
    return SummaryReply(text=state.redactor.text(end.text or ""), truncated=end.finish_reason == "length")


def compaction_manual(*, run_id: int) -> str:
    """CTX-43 for a session with no active run: compact its latest run's main history now,
    under the same commit rules; a compliant result becomes the next run's starting view."""
    run = Run.objects.select_related("session", "version").get(pk=run_id)
    if run.status in Run.ACTIVE_STATUSES:
        return "active"  # the loop picks the request up at its next preparation
    if Run.objects.filter(session_id=run.session_id, pk__gt=run.pk).exists():
        # A newer question started meanwhile: it will compact by its own triggers; writing
        # into this older run now would put a foreign record inside the newer run's prefix.
        return "superseded"
    state = run_state_build(run)
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
                event_emit(run_id=run.pk, type="compaction_failed", data={"reason": "internal_error"})
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
    result = _run_compaction(state, instance, pipeline, action, system, schemas, depth=0)
    return "compacted" if result is not None else "not_compacted"
