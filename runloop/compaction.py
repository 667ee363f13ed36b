"""Compaction in the worker (CTX-30 … CTX-44): drives the pure engine's generator with real
summary calls, commits only what the engine accepted, and throttles repeated failures.

Order of concern: keep the request valid → keep information → shrink old history →
only then report that the run cannot continue.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from agents.tool_registry import registry
from context import (
    CompactFirst,
    ContextPipeline,
    ContextPolicy,
    ContextTooLong,
    Counters,
    Projected,
    Send,
    build_body,
    throttled,
    within_window,
)
from context.attachments import question_message
from context.compaction import (
    CompactionRequest,
    CompactionResult,
    PreparedSummary,
    RuntimeState,
    SummaryCall,
    SummaryReply,
    commit_prepared,
    compact,
    drive,
)
from context.compaction.masking import masking_would_do
from context.compaction.types import Source
from context.traces import Trace, traces_json
from context.undo import UNDONE, undo_hold_unpinned
from models_catalog.errors import ProviderError
from runloop.calls import collected_call
from runloop.errors import RunLost
from runloop.journal import NewRecord
from runloop.meter import context_measured
from runloop.prepared_wait import prepared_awaitable, prepared_awaited
from runloop.state import RunState
from sessions.frames import plan_text
from sessions.models import Instance, ModelCall, PreparedCompaction, RunAttention
from sessions.selectors.instances import sub_instances_running, tool_calls_unsettled
from sessions.selectors.ledger import instance_ledger
from sessions.selectors.pins import pinned_seqs
from sessions.selectors.steps import instance_frame, instance_history, last_question, preparation_last_failure
from tools.read_file import files_in_view

logger = logging.getLogger("agentloom.compaction")
# CTX-41: the token figures of a compaction, one name per meaning (metrics and `compacted`).
TOKEN_FIGURES = ("tokens_before_estimated", "tokens_before_calibrated", "tokens_after_estimated",
                 "tokens_after_calibrated")


def token_figures(when: str, *, estimated: int | None, calibrated: int | None) -> dict[str, int | None]:
    """CTX-41: a request's size in an event, one name per meaning, as in the metrics:
    ``tokens_<when>_estimated`` (our estimator's count) and ``tokens_<when>_calibrated``
    (what the trigger and the commit rule compare), ``when`` being ``before`` (the view a
    compaction starts from) or ``after`` (the compacted view). Never a bare ``tokens``: a
    reader could not tell an estimate from a calibrated figure, or either from a provider's
    count."""
    return {f"tokens_{when}_estimated": estimated, f"tokens_{when}_calibrated": calibrated}


def step_request(state: RunState, instance: Instance, pipeline: ContextPipeline, system: dict[str, Any],
                 schemas: list[dict[str, Any]], *, depth: int, force: str | None = None) -> Send:
    """CTX-30: the request of this step, compacted first when the pipeline says so (at
    most once). ``force`` names a trigger that fires whatever the figures say: after the
    provider refused a request as too long (CAT-3), the next one must be smaller.

    Raises RequestValidationError (CTX-10) and ContextTooLong (CTX-39)."""
    journal = state.journal
    if instance.parent_id is None and journal.attention(RunAttention.COMPACT):
        instance.frame = instance_frame(instance=instance)  # a manual compaction was asked for (CTX-43)
    frame = instance.frame or {}  # the loop's copy: only it and the API's flagged requests write the frame
    counters = Counters(instance.user_turns, instance.model_steps, instance.baseline_user_turns,
                        instance.baseline_model_steps)
    action = pipeline.next_action(system, schemas, counters=counters, manual=bool(frame.get("compact_requested")),
                                  force=force, failure=frame.get("compaction_failure"), now=time.time())
    if isinstance(action, Send):
        if action.throttled:
            held = frame.get("compaction_failure") or {}
            if undo_hold_unpinned(held):  # CTX-51: the first step after an undo measures the restored view
                journal.frame(instance, compaction_failure={**held, "tokens": action.figure})
            reason = "held_after_undo" if held.get("reason") == UNDONE else "throttled_after_failure"
            journal.emit("compaction_skipped", {"reason": reason,
                                                **token_figures("before", estimated=action.estimate,
                                                                calibrated=action.figure)})
        elif action.prepare and depth == 0:
            prepare_maybe(state, instance, pipeline, system, schemas, figure=action.figure, estimate=action.estimate)
        return action
    prepared = None
    if depth == 0 and action.trigger != "manual" and force is None and pipeline.policy is not None:
        prepared = journal.preparation_open()  # it ends a preparation whose worker went away: a write
        waiting = _while_prepared(state, pipeline, action, prepared, frame.get("compaction_failure"))
        if waiting is not None:
            return waiting
    compacted = compaction_run(state, instance, pipeline, action, system, schemas, depth=depth,
                                prepared=prepared if prepared is not None and (
                                    prepared.status == PreparedCompaction.Status.READY
                                    or prepared_awaitable(prepared, action)) else None)
    if compacted is None:
        return pipeline.without_compaction()
    return pipeline.after_compaction(system, schemas, compacted)


def _while_prepared(state: RunState, pipeline: ContextPipeline, action: CompactFirst,
                    prepared: PreparedCompaction | None, failure: dict[str, Any] | None) -> Send | None:
    """CTX-45 at the trigger, before anything is paid inline: the request as it is when a
    summary is still being prepared and the request fits (it is committed at a later step,
    the person waits for nothing); the request as it is, throttled, when the latest
    preparation failed (CTX-44 counts it like an inline failure). None: compact now."""
    if prepared is not None and prepared.status == PreparedCompaction.Status.PREPARING:
        if action.trigger == "tool_output_overflow" or prepared.claimed_at is None:
            # The newest results overflow on their own (the next request must be cut now),
            # or no worker has taken the preparation yet: compacting now beats waiting on a queue.
            return None
        try:
            send = pipeline.without_compaction()
        except ContextTooLong:
            return None
        state.journal.emit("compaction_skipped", {"reason": "summary_being_prepared", **_before(action)})
        return send
    if prepared is None:
        latest = preparation_last_failure(session_id=state.run.session_id)
        if latest is not None and latest["at"] > (failure or {}).get("at", 0) and throttled(
                latest, action.tokens, state.figures.budget, now=time.time()):
            state.journal.emit("compaction_skipped", {"reason": "throttled_after_failure", **_before(action)})
            return pipeline.without_compaction()
    return None


def _before(action: CompactFirst) -> dict[str, int | None]:
    return token_figures("before", estimated=action.estimate, calibrated=action.tokens)


def prepare_maybe(state: RunState, instance: Instance, pipeline: ContextPipeline, system: dict[str, Any],
                  schemas: list[dict[str, Any]], *, figure: int, estimate: int) -> None:
    """CTX-45: past the prepare point, ask once per starting point of the view for a
    summary of it to be made in the background (a worker runs ``compaction_prepare``).
    ``figure`` is the view's calibrated size, ``estimate`` our estimate of it."""
    start = pipeline.context.start
    key = (instance.pk, start.key if start is not None else None)
    if key in state.preparations_asked or pipeline.policy is None:
        return
    held = (instance.frame or {}).get("compaction_failure")
    if held and held.get("reason") == UNDONE and throttled(held, figure, state.figures.budget, now=time.time()):
        return  # CTX-51: the person undid the last summary; none is paid for until the hold lifts
    projected = pipeline.context.projected()
    if _masking_would_do(state, pipeline.policy, system, schemas, projected):
        return  # CTX-47: the trigger will fold older results, with no summary to pay for (asked again next step)
    state.preparations_asked.add(key)
    if throttled(preparation_last_failure(session_id=state.run.session_id), figure, state.figures.budget,
                 now=time.time()):
        return  # CTX-44: the last one failed; wait for growth or time, like an inline failure
    snapshot = {"system": system, "tools": schemas, "messages": projected.messages,
                "sources": list(projected.sources or [None] * len(projected.messages)),
                "traces": traces_json(projected_traces(projected) or [])}
    # What follows may take time (the session's lock, the broker; an inline summary when tasks
    # run eagerly): the answer's held wake-up goes first (issue #29).
    journal = state.journal
    journal.release()
    asked = journal.preparation_request(instance, snapshot=snapshot, tokens=figure, policy=pipeline.policy.to_dict(),
                                        estimator_id=state.figures.estimator_id)
    if asked is not None:
        journal.emit("compaction_preparing", token_figures("before", estimated=estimate, calibrated=figure))


def _masking_would_do(state: RunState, policy: ContextPolicy, system: dict[str, Any], schemas: list[dict[str, Any]],
                      projected: Projected) -> bool:
    """CTX-45 with CTX-47: whether masking alone would resolve the trigger (the pure
    ``masking_would_do`` decides; it reads only the view, the tools and the figures)."""
    figures = state.figures
    request = CompactionRequest(
        system=system, messages=projected.messages, sources=list(projected.sources or [None] * len(projected.messages)),
        task_anchor=None, runtime_state=RuntimeState(), budget=figures.budget, policy=policy,
        estimator=figures.calibrated_estimator(), tools=schemas, trigger="budget", max_summary_calls=0,
        traces=projected_traces(projected))
    return masking_would_do(request, request.traces)


def prepare_at_end(state: RunState) -> None:
    """CTX-45: a run that ends past the prepare point has a summary prepared while the
    session is idle, for the next question to commit. Never fails the run."""
    main = state.journal.main
    pipeline = state.pipelines.get(main.pk) if main is not None else None
    if main is None or pipeline is None or pipeline.policy is None or not pipeline.context.loaded:
        return
    try:
        system, schemas = state.request_parts(0)
        estimate, figure, past = pipeline.measure(system, schemas)
        if past:
            prepare_maybe(state, main, pipeline, system, schemas, figure=figure, estimate=estimate)
    except RunLost:
        raise  # not a failure to ask: the run is not this worker's, which writes nothing more
    except Exception:
        logger.exception("run %s: a summary could not be asked for at its end", state.run.pk)


def _task_anchor(instance: Instance) -> dict[str, Any] | None:
    """The last question as the view shows it: its files as blocks (RUN-13), never the
    stored attachments themselves."""
    question = last_question(instance=instance)
    return question_message(question.message) if question else None


def _idempotent_tools(state: RunState) -> frozenset[str]:
    """CTX-49: the tools without side effects, as the run knows them: the agent's version
    (its server tools as frozen, TOOL-5) over the built-ins. A tool neither knows (an
    earlier version's server tool) counts as having side effects."""
    known = {**{name: tool.idempotent for name, tool in registry.items()},
             **{tool.name: tool.idempotent for tool in state.tools}}
    return frozenset(name for name, idempotent in known.items() if idempotent)


def _runtime_state(state: RunState, instance: Instance) -> RuntimeState:
    """CTX-36: the facts the model cannot be trusted to remember, from the records and the
    frame — never from the view being replaced, where an earlier compaction may already
    have summarized them: the agent's plan (verbatim; the session's, carried from question
    to question, LOOP-4), the calls in flight (normally settled first, CTX-30) and those
    whose outcome is unknown (one call, one id, one state), sub-agents still running,
    queued supplements, the files of the questions the run sees (RUN-13), and the artifact
    ledger of every record the instance sees (CTX-49)."""
    run = state.run
    frame = instance_frame(instance=instance)
    calls = tool_calls_unsettled(run=run, instance=instance)
    return RuntimeState(
        plan=plan_text(frame.get("plan")),
        pending_calls=calls.pending,
        unknown_calls=calls.unknown,
        sub_instances=tuple(sub_instances_running(instance=instance)),
        queued_supplements=tuple(item["content"] for item in frame.get("supplements") or []),
        files=files_in_view(run=run) if instance.parent_id is None else (),
        ledger=instance_ledger(run=run, instance=instance, idempotent=_idempotent_tools(state)))


def compaction_request(state: RunState, instance: Instance, *, system: dict[str, Any], messages: list[dict[str, Any]],
                       sources: list[Source], tools: list[dict[str, Any]], policy: ContextPolicy, trigger: str,
                       max_calls: int, headroom: int = 0, traces: list[Trace] | None = None) -> CompactionRequest:
    """What the engine needs to compact ``messages``, inline or in the background: the
    run's figures, the task anchor and runtime state from the records (CTX-31, CTX-36),
    whether the provider's prompt cache can carry the summary request (CTX-46), and the
    records each message stands for through earlier checkpoints (``traces``, CTX-41), and
    the session's pinned messages (CTX-50; the main line's only: a sub-agent has none), and
    the records' facts for a summary written by code (CTX-48)."""
    figures = state.figures
    pinned = pinned_seqs(session_id=state.run.session_id) if instance.parent_id is None else frozenset()
    return CompactionRequest(
        system=system, messages=messages, sources=sources, task_anchor=_task_anchor(instance),
        runtime_state=_runtime_state(state, instance), budget=figures.budget, policy=policy,
        estimator=figures.calibrated_estimator(), tools=tools, trigger=trigger, max_summary_calls=max(0, max_calls),
        dialect=state.target.dialect, ride_cache=state.target.prompt_cache, headroom=headroom, traces=traces,
        pinned=pinned, history=instance_history(run=state.run, instance=instance))


def compaction_run(state: RunState, instance: Instance, pipeline: ContextPipeline, action: CompactFirst,
                    system: dict[str, Any], schemas: list[dict[str, Any]], *, depth: int,
                    prepared: PreparedCompaction | None = None) -> list[dict[str, Any]] | None:
    """Commit the ``prepared`` summary when it still fits the view (CTX-45), else drive
    the engine with real summary calls; the compacted messages (without the system
    message) when a checkpoint was committed, else None."""
    started = time.monotonic()
    trigger, tokens, projected = action.trigger, action.tokens, action.projected
    policy = pipeline.policy or ContextPolicy()
    journal = state.journal
    awaited = prepared is not None and prepared.status == PreparedCompaction.Status.PREPARING
    # ``prepared_awaited``: the summary being prepared is finished rather than another made (the chat says so).
    journal.emit("compaction_started",
                 {"trigger": trigger, **token_figures("before", estimated=action.estimate, calibrated=tokens),
                  **({"prepared_awaited": True} if awaited else {})})
    if awaited and prepared is not None:
        prepared = prepared_awaited(state, prepared)
    remaining = state.limits.max_model_calls - journal.counters.get("model_calls", 0) - 1
    calibration = state.figures.calibration
    request = compaction_request(
        state, instance, system=system, messages=projected.messages,
        sources=list(projected.sources or [None] * len(projected.messages)), tools=schemas, policy=policy,
        trigger=trigger, max_calls=min(policy.max_compaction_calls, remaining), traces=projected_traces(projected))
    result: CompactionResult | None = None
    note: dict[str, Any] = {"prepared": False, "prepared_age_ms": None}
    if awaited:  # CTX-41: how long the run waited for the summary being prepared
        note["prepared_awaited_ms"] = int((time.monotonic() - started) * 1000)
    if prepared is not None:
        result = commit_prepared(request, PreparedSummary(
            summary=prepared.summary, prefix=prepared.prefix or 0, digest=prepared.digest, policy=prepared.policy,
            estimator_id=prepared.estimator_id, metrics=prepared.metrics))
        if result.outcome == "compacted":
            note = {**note, "prepared": True, "prepared_age_ms": int(max(
                0.0, time.time() - prepared.ready_at.timestamp()) * 1000) if prepared.ready_at else None}
            journal.bump("model_calls", int(result.metrics.get("summary_calls") or 0))  # CTX-35: the run paid them
        else:  # no longer fits: discarded whole, and the summary is made now (the inline path)
            journal.preparation_discard(prepared, reason=result.reason)
            note["prepared_discarded"] = result.reason
            result = None

    def summarize(call: SummaryCall) -> SummaryReply:
        reply = summary_call(state, instance, call)
        journal.emit("compaction_progress", {"segment": call.segment, "of": call.planned_segments,
                                           "attempt": call.attempt, "ok": bool(reply.text)})
        return reply

    if result is None:
        result = drive(compact(request), summarize)
    # CTX-41: the engine's figures (tokens before and after, each under one name per
    # meaning), the duration -- what the person waited for (CTX-45's stall) -- and the
    # calibration they were made with (summary calls may have taught a new ratio since).
    waited = int((time.monotonic() - started) * 1000)
    metrics = {**result.metrics, **note, "duration_ms": waited, "stall_ms": waited, "trigger": trigger,
               "calibration_ratio": calibration.ratio, "calibration_samples": calibration.samples}
    if result.outcome == "compacted":
        covered = max(action.start.watermark, pipeline.context.last_seq)
        committed = _checkpoint(state, instance, result, covered, metrics, prepared if note["prepared"] else None)
        if committed is None:  # taken from under us (a resume discarded it): compact the ordinary way
            return compaction_run(state, instance, pipeline, action, system, schemas, depth=depth)
        _requests_taken(state, instance, compaction_failure=None, compact_requested=None)
        if instance.parent_id is None:  # before ``compacted``: whoever waits for that reads the new size
            journal.emit("context_measured", context_measured(state, tokens=metrics["tokens_after_calibrated"],
                                                            measured_by="estimate"))
        journal.emit("compacted", {
            "trigger": trigger, **{name: metrics.get(name) for name in TOKEN_FIGURES},
            # CTX-47: which tiers ran ("mask", "summary") and how many results were folded.
            "tiers": list(metrics.get("tiers") or []), "masked_results": metrics.get("masked_results") or 0,
            "target_reached": metrics.get("target_reached"), "view_saved": committed.view is not None,
            "revision": committed.snapshot.revision, "prepared": metrics["prepared"], "stall_ms": waited,
            "summary_source": metrics.get("summary_source")})  # CTX-48: the chat says when code wrote it
        return list(result.messages or [])
    if result.outcome == "skipped":
        _requests_taken(state, instance, compact_requested=None)
        journal.emit("compaction_skipped", {"reason": result.reason, "metrics": metrics})
    else:
        _requests_taken(state, instance, compact_requested=None,
                        compaction_failure={"tokens": tokens, "at": time.time(), "reason": result.reason})
        journal.emit("compaction_failed", {"reason": result.reason, "metrics": metrics})
    return None


def _checkpoint(state: RunState, instance: Instance, result: CompactionResult, covered: int, metrics: dict[str, Any],
                prepared: PreparedCompaction | None) -> Any:
    """Save the checkpoint (RUN-10); a prepared summary is marked used in the same
    transaction, so it is used exactly when its checkpoint commits. None when it was not
    ready any more (nothing was written)."""
    trigger = metrics["trigger"]
    # RunLost, nothing written, when the run is not this worker's any more.
    return state.journal.checkpoint(
        instance, prepared=prepared, messages=list(result.messages or []), covered_seq=covered,
        estimator_id=state.figures.estimator_id, metrics=metrics,
        records=[NewRecord("compaction_summary", {"summary": result.summary, "metrics": metrics},
                           f"compaction-{covered}-{trigger}")],
        traces=traces_json(result.traces) if result.traces is not None else None)


def projected_traces(projected: Projected) -> list[Trace] | None:
    """CTX-41: what each projected message stands for, when the projection says it for
    every message."""
    traces = projected.traces
    return list(traces) if traces and len(traces) == len(projected.messages) else None


def _requests_taken(state: RunState, instance: Instance, **frame: Any) -> None:
    """Write the frame's compaction state, and clear a manual request the run took."""
    state.journal.frame(instance, **frame)


def summary_call(state: RunState, instance: Instance, call: SummaryCall) -> SummaryReply:
    """One summarizer request: the hard limit first (CTX-39), then the provider, with the
    output limit the engine gave it (what the compacted view can hold of a summary, CTX-34).
    A request of the cached form (CTX-46) is built as the action request is -- same
    tools, same thinking blocks -- so its prefix is the action request's, byte for byte."""
    figures = state.figures
    estimate = figures.estimates.request(call.messages, call.tools)
    if not figures.fits(estimate):
        return SummaryReply(text=None, error_code="context_overflow", deterministic=True)
    # The engine sized the request for the run's output reserve, and the reply for its room.
    body = build_body(state.shape, call.messages, tools=call.tools,
                      max_output_tokens=call.max_output_tokens or figures.budget.max_output_tokens,
                      keep_thinking=call.cached and state.thinking_continues)
    body = within_window(body, shape=state.shape, room=figures.budget.output_room(figures.figure(estimate)))
    try:
        end = collected_call(state, instance, purpose=ModelCall.Purpose.COMPACTION, body=body,
                             estimator_id=figures.estimator_id, estimate=estimate, counts_as_model_call=True,
                             extends_action=call.cached)
    except ProviderError as exc:
        return SummaryReply(text=None, error_code=exc.code, deterministic=exc.permanent)
    return SummaryReply(text=state.redactor.text(end.text or ""), truncated=end.finish_reason == "length")
