"""Compaction in the worker (CTX-30 … CTX-44): drives the pure engine's generator with real
summary calls, commits only what the engine accepted, and throttles repeated failures.

Order of concern: keep the request valid → keep information → shrink old history →
only then report that the run cannot continue.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agentloom.runloop.calls import body_build, collected_call, hard_limit
from agentloom.runloop.meter import context_measured
from agentloom.runloop.state import RunState, policy_of, run_state_build, system_message
from context import CalibratedEstimator, ContextPolicy, Counters, LegacyCharPolicy, evaluate_triggers
from context.compaction import (
    CompactionRequest,
    RuntimeState,
    SummaryReply,
    compact,
    drive,
    newest_results_overflow,
    unknown_outcome_calls,
)
from models_catalog.errors import ProviderError
from sessions.frames import plan_text
from sessions.models import Instance, ModelCall, Run, RunAttention, SessionMessage
from sessions.selectors import calls_pending, main_instance, sub_instances_running
from sessions.services.events import event_emit
from sessions.services.frames import frame_update
from sessions.services.history import (
    ContextCache,
    PreparedContext,
    checkpoint_commit,
    compaction_request_taken,
    context_project,
)
from sessions.services.records import NewRecord

logger = logging.getLogger("agentloom.compaction")

# CTX-44: after a failed compaction, wait until the view grew by this share, or this long.
RETRY_GROWTH = 0.10
RETRY_AFTER_SECONDS = 600


@dataclass(frozen=True)
class Preparation:
    """What a step sends: the (possibly compacted) messages and their estimate."""

    messages: list[dict[str, Any]]
    estimate: int
    # What the projection changed to make the request valid, positions counted in
    # ``messages`` (the system message is 0); none after a compaction rewrote them.
    repairs: list[dict[str, Any]] = field(default_factory=list)


def prepare(state: RunState, instance: Instance, prepared: PreparedContext, system: dict[str, Any],
            schemas: list[dict[str, Any]], *, depth: int, force: str | None = None) -> Preparation:
    """CTX-30: decide whether to compact before this action call, and do it at most once.

    ``force`` names a trigger that fires whatever the figures say: after the provider
    refused a request as too long (CAT-3), the next one must be smaller.
    """
    estimator = state.estimator()
    messages = [system, *prepared.messages]
    policy = policy_of(state)
    if policy is None:  # CTX-40: a version without a policy keeps the legacy character threshold
        messages = list(LegacyCharPolicy().select(messages))
        # The character threshold drops whole messages: the repairs stand, their positions do not.
        return Preparation(messages, estimator.request(messages, schemas, track=("view", instance.pk), read_only=True),
                           [{**r, "position": None} for r in prepared.repairs])
    estimate = estimator.request(messages, schemas, track=("view", instance.pk), read_only=True)
    # CTX-25: the trigger, the commit rule, segment budgets and the hard limit all read
    # the same calibrated figures.
    calibrated_estimator = CalibratedEstimator(estimator, state.calibration.ratio)
    calibrated = state.figure(estimate)
    if instance.parent_id is None and state.signals.attention & RunAttention.COMPACT:
        instance.refresh_from_db(fields=["frame"])  # a manual compaction was asked for (CTX-43)
    frame = instance.frame or {}  # the loop's copy: only it and the API's flagged requests write the frame
    counters = Counters(instance.user_turns, instance.model_steps, instance.baseline_user_turns,
                        instance.baseline_model_steps)
    triggers = evaluate_triggers(policy=policy, budget=state.budget, estimated_tokens=calibrated, counters=counters)
    manual = bool(frame.get("compact_requested"))
    repairs = [{**r, "position": r["position"] + 1} if isinstance(r.get("position"), int) else r
               for r in prepared.repairs]
    if not triggers and not manual and not force:
        return Preparation(messages, estimate, repairs)
    trigger = "manual" if manual else force or triggers.fired[0]
    if trigger == "budget" and newest_results_overflow(messages, estimator=calibrated_estimator, tools=schemas,
                                                       threshold=state.budget.trigger_threshold(policy)):
        trigger = "tool_output_overflow"  # CTX-42: the results just in overflow on their own
    if not manual and not force and _throttled(frame, calibrated, state):
        event_emit(run_id=state.run.pk, type="compaction_skipped",
                   data={"reason": "throttled_after_failure", "tokens": calibrated})
        return Preparation(messages, estimate, repairs)
    result = _run_compaction(state, instance, prepared, system, schemas, policy, trigger, calibrated, depth=depth,
                             estimator=calibrated_estimator)
    if result is None:
        return Preparation(messages, estimate, repairs)
    return Preparation(result, estimator.request(result, schemas))


def _throttled(frame: dict[str, Any], tokens: int, state: RunState) -> bool:
    failure = frame.get("compaction_failure")
    if not failure:
        return False
    grown = tokens >= failure.get("tokens", 0) * (1 + RETRY_GROWTH)
    waited = time.time() - failure.get("at", 0) >= RETRY_AFTER_SECONDS
    over_hard_limit = tokens + state.budget.max_output_tokens > hard_limit(state)
    return not (grown or waited or over_hard_limit)


def _task_anchor(instance: Instance) -> dict[str, Any] | None:
    question = SessionMessage.objects.filter(instance=instance, kind="user").order_by("-seq").first()
    return question.message if question else None


def _runtime_state(instance: Instance, prepared: PreparedContext) -> RuntimeState:
    """CTX-36: the facts the model cannot be trusted to remember, from code — never left to
    the summary: the agent's plan (verbatim), the tool group in flight (normally settled
    first, CTX-30), calls whose outcome is unknown, sub-agents still running, and queued
    supplements."""
    frame = Instance.objects.get(pk=instance.pk).frame or {}
    return RuntimeState(
        plan=plan_text(frame.get("plan")),
        pending_calls=tuple(calls_pending(instance=instance)),
        unknown_calls=unknown_outcome_calls(prepared.messages),
        sub_instances=tuple(sub_instances_running(instance=instance)),
        queued_supplements=tuple(item["content"] for item in frame.get("supplements") or []))


def _run_compaction(state: RunState, instance: Instance, prepared: PreparedContext, system: dict[str, Any],
                    schemas: list[dict[str, Any]], policy: ContextPolicy, trigger: str, tokens: int, *,
                    depth: int, estimator: Any = None) -> list[dict[str, Any]] | None:
    started = time.monotonic()
    event_emit(run_id=state.run.pk, type="compaction_started", data={"trigger": trigger, "tokens": tokens})
    remaining = state.limits["max_model_calls"] - state.counters.get("model_calls", 0) - 1
    request = CompactionRequest(
        system=system, messages=prepared.messages, sources=list(prepared.sources or [None] * len(prepared.messages)),
        task_anchor=_task_anchor(instance), runtime_state=_runtime_state(instance, prepared),
        budget=state.budget,
        policy=policy, estimator=estimator or state.estimator(), tools=schemas, trigger=trigger,
        max_summary_calls=max(0, min(policy.max_compaction_calls, remaining)),
        dialect=state.target.dialect,
    )
    def summarize(call) -> SummaryReply:
        reply = _summary_call(state, instance, call)
        event_emit(run_id=state.run.pk, type="compaction_progress",
                   data={"segment": call.segment, "of": call.planned_segments, "attempt": call.attempt,
                         "ok": bool(reply.text)})
        return reply

    result = drive(compact(request), summarize)
    metrics = _metrics(state, result, prepared, system, schemas, trigger=trigger, started=started)
    if result.outcome == "compacted":
        covered = max(prepared.start_watermark, _last_seq(state, instance))
        committed = checkpoint_commit(
            run=state.run, instance=instance, messages=result.messages, covered_seq=covered,
            estimator_id=state.estimator().id, metrics=metrics,
            records=[NewRecord("compaction_summary", {"summary": result.summary, "metrics": metrics},
                               f"compaction-{covered}-{trigger}")])
        _requests_taken(state, instance, compaction_failure=None, compact_requested=None)
        if instance.parent_id is None:  # before ``compacted``: whoever waits for that reads the new size
            event_emit(run_id=state.run.pk, type="context_measured",
                       data=context_measured(state, tokens=metrics["tokens_after_calibrated"], measured_by="estimate"))
        event_emit(run_id=state.run.pk, type="compacted", data={
            "trigger": trigger, "tokens_before": metrics.get("tokens_before"), "tokens_after": metrics.get("tokens_after"),
            "target_reached": metrics.get("target_reached"), "view_saved": committed.view is not None,
            "revision": committed.snapshot.revision})
        state.caches.pop(instance.pk, None)
        return [system, *result.messages]
    if result.outcome == "skipped":
        _requests_taken(state, instance, compact_requested=None)
        event_emit(run_id=state.run.pk, type="compaction_skipped", data={"reason": result.reason, "metrics": metrics})
    else:
        _requests_taken(state, instance, compact_requested=None,
                        compaction_failure={"tokens": tokens, "at": time.time(), "reason": result.reason})
        event_emit(run_id=state.run.pk, type="compaction_failed", data={"reason": result.reason, "metrics": metrics})
    return None


def _metrics(state: RunState, result: Any, prepared: PreparedContext, system: dict[str, Any],
             schemas: list[dict[str, Any]], *, trigger: str, started: float) -> dict[str, Any]:
    """CTX-41 metrics: the engine's, plus tokens before and after both as our estimator
    counts them and calibrated, each under its own name, with the ratio used."""
    estimator = state.estimator()
    before = estimator.request([system, *prepared.messages], schemas)
    after = estimator.request([system, *result.messages], schemas) if result.outcome == "compacted" else None
    return {**result.metrics, "duration_ms": int((time.monotonic() - started) * 1000), "trigger": trigger,
            "tokens_before_estimated": before, "tokens_before_calibrated": state.figure(before),
            "tokens_after_estimated": after, "tokens_after_calibrated": state.figure(after) if after is not None else None,
            "calibration_ratio": state.calibration.ratio,
            "calibration_samples": state.calibration.samples}


def _requests_taken(state: RunState, instance: Instance, **frame: Any) -> None:
    """Write the frame's compaction state, and clear a manual request the run took."""
    frame_update(instance=instance, **frame)
    if instance.parent_id is None and state.signals.attention & RunAttention.COMPACT:
        compaction_request_taken(run=state.run)


def _last_seq(state: RunState, instance: Instance) -> int:
    cache = state.caches.get(instance.pk)
    return cache.last_seq if cache is not None else 0


def _summary_call(state: RunState, instance: Instance, call) -> SummaryReply:
    """One summarizer request: the hard limit first (CTX-39), then the provider."""
    estimator = state.estimator()
    estimate = estimator.request(call.messages)
    output = state.budget.max_output_tokens  # the engine sized the request for this reserve
    if state.figure(estimate) + output > hard_limit(state):
        return SummaryReply(text=None, error_code="context_overflow", deterministic=True)
    body = body_build(state.target, call.messages, max_output_tokens=output)
    try:
        end = collected_call(state, instance, purpose=ModelCall.Purpose.COMPACTION, body=body,
                             estimator_id=estimator.id, estimate=estimate, counts_as_model_call=True)
    except ProviderError as exc:
        return SummaryReply(text=None, error_code=exc.code, deterministic=exc.permanent)
    return SummaryReply(text=state.redactor.text(end.text or ""))


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
    instance = main_instance(run=run)
    policy = policy_of(state) or ContextPolicy()
    cache = state.caches.setdefault(instance.pk, ContextCache())
    tools = state.tools_at(0)
    prepared = context_project(run=run, instance=instance, cache=cache,
                               screen_tools=["browser_use", *(t.name for t in tools if t.observes_screen)])
    system = system_message(state, 0)
    # The commit rule judges what the next request will carry: the agent's tools included.
    schemas = [tool.schema() for tool in tools]
    tokens = state.figure(state.estimator().request([system, *prepared.messages], schemas))
    result = _run_compaction(state, instance, prepared, system, schemas, policy, "manual", tokens, depth=0,
                             estimator=CalibratedEstimator(state.estimator(), state.calibration.ratio))
    return "compacted" if result is not None else "not_compacted"
