"""The run loop (LOOP-1): claim → [finish tools → supplements → context → validate →
hard limit → model (streaming) → save → tools → save] until an answer, a limit, a Stop
or an error. Every step is saved before the next begins, so a worker killed anywhere
loses at most the step in flight and the run can be resumed.

No network call happens inside a database transaction: each save commits before the
next model or tool call starts.
"""
from __future__ import annotations

import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from agentloom.runloop import compaction
from agentloom.runloop.errors import RunCancelled, RunLost, RunStopped
from sessions.services.events import DeltaBuffer, event_emit
from agentloom.runloop.reaper import runs_reap_interrupted
from agentloom.runloop.redaction import Redactor
from agentloom.runloop.watch import RunWatch
from agentloom.tools import Tool, ToolContext, ToolOutcome, registry, tool_invoke
from agentloom.tools.delegate import MAX_DEPTH
from context import Budget, EstimateCache, RequestValidationError, build_request_body, get_estimator
from models_catalog.client import ReasoningDelta, StreamEnd, TextDelta, call_with_retries, get_chat_client
from models_catalog.errors import ContextOverflowError, ProviderError
from models_catalog.http import CHAT_LIMITS
from sessions.models import Instance, ModelCall, Run, SessionMessage
from sessions.selectors import main_instance
from sessions.services.history import ContextCache, context_project, step_save_assistant, supplements_take
from sessions.services.records import NewRecord, record_append, records_append
from sessions.services.runs import SupplementsPending, run_claim, run_finish

logger = logging.getLogger("agentloom.runloop")

DEFAULT_LIMITS = {"max_model_calls": 25, "max_tool_calls": 50, "max_wall_seconds": 900, "max_depth": MAX_DEPTH,
                  "max_sub_instances": 8}
SUB_AGENT_NOTE = ("You are a sub-agent working on one delegated task. Work it through with your tools if needed, "
                  "then answer with the result only; your answer is returned to the agent that delegated.")
UNKNOWN_ON_RESUME = ("[unknown outcome] The run was interrupted while this call was pending, and the tool is not "
                     "safe to repeat automatically. It may or may not have taken effect: check before relying on it.")
NOT_STARTED = "[cancelled] The user stopped the run before this tool started; it did not run."


@dataclass
class RunState:
    """Everything one execution of a run needs, built once per claim."""

    run: Run
    limits: dict[str, int]
    budget: Budget
    tools: list[Tool]
    watch: RunWatch
    redactor: Redactor
    api_key: str
    base_url: str
    provider: str
    model: str
    supports_images: bool
    started: float = field(default_factory=time.monotonic)
    sub_instances: int = 0
    caches: dict[int, ContextCache] = field(default_factory=dict)
    estimates: EstimateCache | None = None
    calibration: float = 1.0  # provider count / our estimate, set at each preparation (CTX-25)

    def estimator(self) -> EstimateCache:
        """One estimate cache per run: each step estimates only what is new (CTX-24)."""
        if self.estimates is None:
            self.estimates = EstimateCache(get_estimator(self.model, self.provider))
        return self.estimates

    @property
    def counters(self) -> dict[str, int]:
        return self.run.counters

    def ensure_owned(self) -> None:
        self.watch.beat(force=True)
        if self.watch.lost:
            raise RunLost()

    def bump(self, name: str, by: int = 1) -> None:
        self.run.counters[name] = self.run.counters.get(name, 0) + by
        Run.objects.filter(pk=self.run.pk).update(counters=self.run.counters, heartbeat_at=timezone.now())

    def check(self) -> None:
        """Between steps: ownership, a Stop request, then the per-run bounds (LOOP-2)."""
        self.ensure_owned()
        if self.watch.cancel_requested(fresh=True):
            raise RunCancelled()
        self.watch.beat()
        if self.counters.get("model_calls", 0) >= self.limits["max_model_calls"]:
            raise RunStopped("limit_reached", f"The run reached its limit of {self.limits['max_model_calls']} model calls.")
        if self.counters.get("tool_calls", 0) >= self.limits["max_tool_calls"]:
            raise RunStopped("limit_reached", f"The run reached its limit of {self.limits['max_tool_calls']} tool calls.")
        if time.monotonic() - self.started > self.limits["max_wall_seconds"]:
            raise RunStopped("limit_reached", f"The run reached its time limit of {self.limits['max_wall_seconds']} seconds.")


def _state_for(run: Run) -> RunState:
    version = run.version
    budget_figures = run.budget or {}
    limits = {**DEFAULT_LIMITS, **{k: v for k, v in (budget_figures.get("limits") or {}).items() if isinstance(v, int)}}
    connection = version.model_connection
    api_key = connection.api_key if connection is not None else ""
    names = [name for name in version.tools if name in registry]
    return RunState(
        run=run,
        limits=limits,
        budget=Budget(context_window=budget_figures.get("context_window", version.context_window),
                      max_output_tokens=budget_figures.get("max_output_tokens", version.max_output_tokens),
                      safety_margin_tokens=budget_figures.get("safety_margin_tokens", version.safety_margin_tokens)),
        tools=[registry[name] for name in names],
        watch=RunWatch(run.pk, attempt=run.attempt),
        redactor=Redactor([api_key]),
        api_key=api_key,
        base_url=version.base_url,
        provider=budget_figures.get("provider", version.provider),
        model=budget_figures.get("model", version.model),
        supports_images=bool(connection.supports_images) if connection is not None else False,
    )


def run_execute(*, run_id: int) -> None:
    """Claim a queued run and drive it to a terminal state. A second delivery does nothing."""
    runs_reap_interrupted()
    run = run_claim(run_id=run_id)
    if run is None:
        return
    try:
        state = _state_for(run)
    except Exception:  # e.g. a key that no longer decrypts: fail clearly, never hang "running"
        logger.exception("run %s could not start", run.pk)
        run_finish(run=run, status=Run.Status.FAILED, error={
            "code": "internal_error", "retryable": True,
            "message": "The run could not start on our side; an operator has the details."})
        return
    state.watch.start_background()
    try:
        _drive(state)
    except RunLost:
        logger.warning("run %s is no longer owned by this worker; stopping without writing", run.pk)
    finally:
        state.watch.stop_background()


def _drive(state: RunState) -> None:
    run = state.run
    try:
        event_emit(run_id=run.pk, type="run_started", data={"attempt": run.attempt})
        main = main_instance(run=run)
        resolve_pending_calls(state, main)
        while True:
            answer = instance_loop(state, main, depth=0)
            if run.version.verify_before_complete:
                _verify(state, main, answer)
            try:
                _finish(state, Run.Status.COMPLETED)
                break
            except SupplementsPending:
                continue  # a supplement arrived while finishing: answer it too (RUN-5)
    except RunLost:
        raise
    except RunCancelled:
        _finish(state, Run.Status.CANCELLED, reason="stopped by user")
    except RunStopped as stop:
        _finish(state, Run.Status.FAILED, error=stop.to_error())
    except Exception:
        logger.exception("run %s failed unexpectedly", run.pk)
        _drop_dead_connection()
        _finish(state, Run.Status.FAILED, error={"code": "internal_error", "retryable": True,
                                                 "message": "Something went wrong on our side; you can resume the run."})


def _drop_dead_connection() -> None:
    """A database connection cut mid-run is unusable; reconnect before recording the
    failure, or the run would stay "running" until the reaper finds it."""
    from django.db import connection

    if connection.connection is not None and not connection.is_usable():
        connection.close()


def _finish(state: RunState, status: str, *, error: dict | None = None, reason: str = "") -> None:
    """Record the end, only from ``running`` and only while this worker's attempt owns it."""
    if error:
        event_emit(run_id=state.run.pk, type="error", data=error)
    extra = {"verification": state.counters["verification"]} if "verification" in state.counters else None
    run_finish(run=state.run, status=status, error=error, reason=reason, event_data=extra,
               expected_from=(Run.Status.RUNNING,), where=Q(attempt=state.run.attempt))


def _verify(state: RunState, instance: Instance, answer: str) -> None:
    """LOOP-9: check the candidate answer; the verdict is recorded, never a model step."""
    from agentloom.runloop.verification import evidence_from_records, verify_candidate

    task = SessionMessage.objects.filter(instance=instance, kind="user").order_by("-seq").first()
    evidence = evidence_from_records(SessionMessage.objects.filter(instance=instance, kind="tool_result").order_by("seq"))

    def log_call(body: dict, estimator_id: str, estimate: int):
        log = ModelCall.objects.create(run=state.run, instance=instance, purpose=ModelCall.Purpose.VERIFICATION,
                                       provider=state.provider, model=state.model, estimator_id=estimator_id,
                                       estimated_tokens=estimate,
                                       request={"messages": body["messages"], "tools": [], "estimates": []})
        return lambda outcome, usage: _close_log(log, outcome, usage)

    verdict = verify_candidate(
        provider=state.provider, adapter_provider=_adapter_provider(state.provider), model=state.model,
        base_url=state.base_url or None, api_key=state.api_key or None,
        allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS, context_window=state.budget.context_window,
        max_output_tokens=state.budget.max_output_tokens, safety_margin_tokens=state.budget.safety_margin_tokens,
        task=(task.message.get("content") if task else "") or "", plan=(instance.frame or {}).get("plan"),
        evidence=evidence, candidate=answer, base_delay=settings.AGENTLOOM_RETRY_BASE_DELAY, log_call=log_call)
    state.run.counters["verification"] = verdict
    Run.objects.filter(pk=state.run.pk).update(counters=state.run.counters)
    record_append(session=state.run.session, run=state.run, instance=instance, kind="context",
                  entry_key=f"verification-{state.run.attempt}-{_assistant_count(instance)}",
                  message={"verification": verdict})


# --- one instance: the step machine ---------------------------------------------------------------


def _system_message(state: RunState, depth: int) -> dict[str, Any]:
    text = state.run.version.instructions or "You are a helpful assistant."
    if depth:
        text = f"{text}\n\n{SUB_AGENT_NOTE}"
    return {"role": "system", "content": text}


def _adapter_provider(provider: str) -> str:
    return "openai_compatible" if provider == "demo" else provider


def _assistant_count(instance: Instance) -> int:
    return SessionMessage.objects.filter(instance=instance, kind="assistant").count()


def instance_loop(state: RunState, instance: Instance, *, depth: int) -> str:
    """Drive one instance until it answers; returns the answer text."""
    tools = [tool for tool in state.tools if depth < state.limits["max_depth"] or tool.name != "delegate"]
    schemas = [tool.schema() for tool in tools]
    while True:
        state.check()
        if instance.parent_id is None:
            supplements_take(run=state.run, instance=instance)
        prepared = context_project(run=state.run, instance=instance, cache=state.caches.setdefault(instance.pk, ContextCache()),
                                   screen_tools=["browser_use", *(t.name for t in tools if t.observes_screen)])
        preparation = compaction.prepare(state, instance, prepared, _system_message(state, depth), schemas, depth=depth)
        body = _request_body(state, preparation.messages, schemas)
        end = _call_model(state, instance, body)
        step = _assistant_count(instance) + 1
        message = state.redactor.message(end.assistant_message())
        calls = [call for call in end.tool_calls if call.complete] if not end.cut else []
        if calls:  # stored redacted (LOOP-8); the tools themselves run with what the model wrote
            message["tool_calls"] = [state.redactor.message(call.to_message_dict()) for call in calls]
        else:
            message.pop("tool_calls", None)
        state.ensure_owned()  # the call may have outlived this worker's claim on the run
        if end.cut:  # stopped mid-stream
            if message.get("content"):
                step_save_assistant(run=state.run, instance=instance, message=message, entry_key=f"assistant-{step}")
            raise RunCancelled()
        step_save_assistant(run=state.run, instance=instance, message=message, entry_key=f"assistant-{step}")
        if not calls:
            if instance.parent_id is None and (Instance.objects.get(pk=instance.pk).frame or {}).get("supplements"):
                continue  # a supplement arrived while answering: take it and go on (RUN-5)
            return message.get("content") or ""
        run_tool_calls(state, instance, step, calls, depth=depth)


def _request_body(state: RunState, messages: list[dict], schemas: list[dict]) -> dict[str, Any]:
    try:
        body = build_request_body(messages, provider=_adapter_provider(state.provider), model=state.model,
                                  max_output_tokens=state.budget.max_output_tokens, tools=schemas or None,
                                  supports_images=state.supports_images)
    except RequestValidationError as exc:
        # CTX-10: an invalid request is a bug. Never send it; say so and keep the records.
        logger.error("run %s: refusing to send an invalid request: %s", state.run.pk, exc)
        raise RunStopped("invalid_request", "The conversation could not be turned into a valid request; "
                         "nothing was sent. This is a bug and has been logged.") from None
    estimator = state.estimator()
    estimate = estimator.request(body["messages"], body.get("tools"))
    hard_limit = state.budget.context_window - state.budget.safety_margin_tokens
    # CTX-39, checked before anything is sent; with the provider's own counts when they say
    # we under-estimate (CTX-25), so a request the provider would refuse is not sent.
    checked = max(estimate, math.ceil(estimate * state.calibration))
    if checked + state.budget.max_output_tokens > hard_limit:
        raise RunStopped("context_overflow", "The conversation is too long for this model's context window "
                         f"(about {checked:,} tokens plus {state.budget.max_output_tokens:,} reserved for the answer).")
    body["_estimate"] = (estimator.id, estimate, [estimator.message(m) for m in body["messages"]])
    return body


def _call_model(state: RunState, instance: Instance, body: dict[str, Any]) -> StreamEnd:
    """One streaming model call with bounded retries (LOOP-3), deltas as events, Stop honoured."""
    estimator_id, estimate, per_message = body.pop("_estimate")
    log = ModelCall.objects.create(
        run=state.run, instance=instance, provider=state.provider, model=state.model, estimator_id=estimator_id,
        estimated_tokens=estimate,
        request={"messages": body["messages"], "tools": body.get("tools") or [], "estimates": per_message},
    )
    state.bump("model_calls")
    source = {"instance": "main" if instance.parent_id is None else str(instance.pk)}

    def attempt() -> StreamEnd:
        redaction = {"redact": state.redactor.text, "secrets": state.redactor.secrets}
        text = DeltaBuffer(state.run.pk, "message_delta", extra=source, **redaction)
        thinking = DeltaBuffer(state.run.pk, "thinking_delta", extra=source, **redaction)
        pieces: list[str] = []
        end: StreamEnd | None = None
        limits = replace(CHAT_LIMITS, read_timeout=settings.AGENTLOOM_PROVIDER_READ_TIMEOUT)
        with get_chat_client(provider=state.provider, base_url=state.base_url or None, api_key=state.api_key or None,
                             allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS, limits=limits) as client:
            stream = client.stream_chat(body)
            try:
                for event in stream:
                    if isinstance(event, TextDelta):
                        pieces.append(event.text)
                        text.add(event.text)
                    elif isinstance(event, ReasoningDelta):
                        thinking.add(event.text)
                    elif isinstance(event, StreamEnd):
                        end = event
                    state.watch.beat()
                    if end is None and state.watch.cancel_requested():
                        # LOOP-7 mid-stream: keep what was said, marked interrupted; calls whose
                        # arguments were still streaming are dropped and never executed (CTX-6).
                        text.flush(final=True)
                        return StreamEnd(finish_reason="cancelled", usage=None, cut=True, text="".join(pieces))
            finally:
                stream.close()
        text.flush(final=True)
        thinking.flush(final=True)
        if end is None:
            raise ProviderError("The provider's answer ended without a final event.", permanent=False,
                                code="provider_unavailable")
        return end.raise_if_cut()

    def on_retry(number: int, error: ProviderError, delay: float) -> None:
        event_emit(run_id=state.run.pk, type="error", data={"code": error.code, "message": str(error),
                                                             "retrying_in": round(delay, 1), "attempt": number,
                                                             "reset": True, **source})

    try:
        end = call_with_retries(attempt, max_attempts=settings.AGENTLOOM_PROVIDER_ATTEMPTS,
                                base_delay=settings.AGENTLOOM_RETRY_BASE_DELAY, max_delay=30.0, on_retry=on_retry)
    except ContextOverflowError as exc:
        _close_log(log, "context_overflow")
        raise RunStopped("context_overflow", str(exc)) from None
    except ProviderError as exc:
        _close_log(log, exc.code)
        raise RunStopped(exc.code, str(exc), retryable=exc.transient) from None
    usage = end.usage.raw if end.usage else None
    _close_log(log, "cancelled" if end.finish_reason == "cancelled" else "ok", usage)
    return end


def _close_log(log: ModelCall, outcome: str, usage: dict | None = None) -> None:
    ModelCall.objects.filter(pk=log.pk).update(outcome=outcome, usage=usage, finished_at=timezone.now())


# --- tools ----------------------------------------------------------------------------------------


def _result_message(call_id: str, name: str, outcome: ToolOutcome) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": outcome.content, "status": outcome.status}


def run_tool_calls(state: RunState, instance: Instance, step: int, calls: list, *, depth: int) -> None:
    """Run a step's calls (concurrently when several), save results in call order."""
    for call in calls:
        event_emit(run_id=state.run.pk, type="tool_call_detected",
                   data={"call_id": call.id, "name": call.name, "arguments": state.redactor.text(call.arguments)})
    _frame_pending(instance, [call.id for call in calls])
    allowed = {tool.name: tool for tool in state.tools}
    outcomes: list[ToolOutcome | None] = [None] * len(calls)
    started: list[float] = [0.0] * len(calls)
    plain = [(i, c) for i, c in enumerate(calls) if c.name != "delegate" or c.name not in allowed]

    def invoke(index: int, call) -> ToolOutcome | None:
        try:
            tool = allowed.get(call.name)
            if tool is None:
                return ToolOutcome("error", f"This agent has no tool named {call.name!r}.")
            context = ToolContext(run_id=state.run.pk, session_id=state.run.session_id, instance_id=instance.pk,
                                  services={"should_cancel": state.watch.cancel_requested_from_thread})
            return tool_invoke(tool, call.arguments, context)
        finally:
            connections.close_all()

    if state.watch.cancel_requested(fresh=True):  # LOOP-7: stopped after the calls were announced
        _save_not_started(state, instance, step, list(enumerate(calls)))
        raise RunCancelled()
    for index, call in plain:
        started[index] = time.monotonic()
        event_emit(run_id=state.run.pk, type="tool_started", data={"call_id": call.id, "name": call.name})
    state.bump("tool_calls", len(calls))
    if len(plain) > 1:
        with ThreadPoolExecutor(max_workers=min(4, len(plain)), thread_name_prefix="tools") as pool:
            futures = {index: pool.submit(invoke, index, call) for index, call in plain}
            for index, future in futures.items():
                outcomes[index] = future.result()
    else:
        for index, call in plain:
            outcomes[index] = invoke(index, call)
    saved: set[int] = set()
    cancelled = False

    def save_finished() -> None:
        """Save every outcome known so far, in call order, before anything else can fail:
        a Stop or a crash inside a sub-agent must not lose the other tools' results."""
        nonlocal cancelled
        state.ensure_owned()
        for index, (call, outcome) in enumerate(zip(calls, outcomes)):
            if index in saved or outcome is None:
                continue
            saved.add(index)
            outcome = ToolOutcome(outcome.status, state.redactor.content(outcome.content))
            kind = "delegation_result" if call.name == "delegate" else "tool_result"
            record_append(session=state.run.session, run=state.run, instance=instance, kind=kind,
                          entry_key=f"result-{step}-{index}", message=_result_message(call.id, call.name, outcome))
            event_emit(run_id=state.run.pk, type="tool_finished", data={
                "call_id": call.id, "name": call.name, "status": outcome.status,
                "duration_ms": int((time.monotonic() - started[index]) * 1000)})
            cancelled = cancelled or outcome.status == "cancelled"

    save_finished()
    try:
        for index, call in enumerate(calls):
            if call.name == "delegate" and call.name in allowed:
                started[index] = time.monotonic()
                event_emit(run_id=state.run.pk, type="tool_started", data={"call_id": call.id, "name": call.name})
                outcomes[index] = _delegate(state, instance, call, depth=depth, key=f"sub-{instance.pk}-{step}-{index}")
                save_finished()
    finally:
        if not state.watch.lost:
            save_finished()
    if any(outcome is None for outcome in outcomes):  # stopped mid-tool: its effect cannot be known
        cancelled = True
    _frame_pending(instance, [])
    if cancelled or state.watch.cancel_requested(fresh=True):
        raise RunCancelled()


def _save_not_started(state: RunState, instance: Instance, step: int, indexed_calls: list) -> None:
    records_append(session=state.run.session, run=state.run, instance=instance, records=[
        NewRecord("tool_result", _result_message(call.id, call.name, ToolOutcome("cancelled", NOT_STARTED)),
                  f"result-{step}-{index}") for index, call in indexed_calls])


def _frame_pending(instance: Instance, call_ids: list[str]) -> None:
    """Record the tool group in flight in the frame (RUN-7 refuses views while one is)."""
    with transaction.atomic():
        fresh = Instance.objects.select_for_update().get(pk=instance.pk)
        fresh.frame = {**(fresh.frame or {}), "pending_calls": call_ids}
        fresh.save(update_fields=["frame"])
    instance.frame = fresh.frame


def _delegate(state: RunState, parent: Instance, call, *, depth: int, key: str) -> ToolOutcome:
    """RUN-3: a sub-instance with its own context and counters; its answer is the result."""
    arguments = call.parsed_arguments() or {}
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        return ToolOutcome("error", "delegate needs a non-empty 'task' string.")
    if depth + 1 > state.limits["max_depth"]:
        return ToolOutcome("error", f"Delegation is limited to a depth of {state.limits['max_depth']}.")
    if state.sub_instances >= state.limits["max_sub_instances"]:
        return ToolOutcome("error", f"This run may start at most {state.limits['max_sub_instances']} sub-agents.")
    state.sub_instances += 1
    # Keyed by the parent's step and the call's position, like its result: call ids repeat.
    sub, _ = Instance.objects.get_or_create(run=state.run, key=key[:64], defaults={"parent": parent, "depth": depth + 1})
    record_append(session=state.run.session, run=state.run, instance=sub, kind="user", entry_key="task",
                  message={"role": "user", "content": task})
    event_emit(run_id=state.run.pk, type="sub_instance_started", data={"instance": str(sub.pk), "call_id": call.id})
    try:
        answer = instance_loop(state, sub, depth=depth + 1)
    except RunStopped as stop:
        event_emit(run_id=state.run.pk, type="sub_instance_finished",
                   data={"instance": str(sub.pk), "status": "failed"})
        return ToolOutcome("error", f"The sub-agent could not finish: {stop.message}")
    event_emit(run_id=state.run.pk, type="sub_instance_finished", data={"instance": str(sub.pk), "status": "completed"})
    return ToolOutcome("ok", answer or "(the sub-agent gave an empty answer)")


# --- resume ---------------------------------------------------------------------------------------


def resolve_pending_calls(state: RunState, instance: Instance) -> None:
    """RUN-6: calls left without a result by an earlier attempt. Idempotent tools run
    again; the others get an ``unknown`` result and are never re-run automatically. A call
    that already has a stored result is never repeated (results are keyed by step)."""
    if (instance.frame or {}).get("pending_calls"):
        # Whatever the last attempt left pending is settled below (or had already been):
        # a stale list would keep RUN-7 from ever saving a view for this run.
        _frame_pending(instance, [])
    last = (SessionMessage.objects.filter(instance=instance, kind="assistant").order_by("-seq").first())
    if last is None or not last.message.get("tool_calls") or last.message.get("partial"):
        return
    step = int(last.entry_key.rsplit("-", 1)[-1]) if last.entry_key.startswith("assistant-") else 0
    done = set(SessionMessage.objects.filter(instance=instance, entry_key__startswith=f"result-{step}-")
               .values_list("entry_key", flat=True))
    from models_catalog.providers.events import ToolCall

    pending = []
    for index, raw in enumerate(last.message["tool_calls"]):
        if f"result-{step}-{index}" in done:
            continue
        function = raw.get("function") or {}
        pending.append((index, ToolCall(id=raw.get("id", ""), name=function.get("name", ""),
                                        arguments=function.get("arguments", ""), index=index)))
    if not pending:
        return
    allowed = {tool.name: tool for tool in state.tools}
    for index, call in pending:
        tool = allowed.get(call.name)
        if tool is not None and tool.idempotent:
            context = ToolContext(run_id=state.run.pk, session_id=state.run.session_id, instance_id=instance.pk,
                                  services={"should_cancel": state.watch.cancel_requested_from_thread})
            outcome = tool_invoke(tool, call.arguments, context) or ToolOutcome("unknown", UNKNOWN_ON_RESUME)
        else:
            outcome = ToolOutcome("unknown", UNKNOWN_ON_RESUME)
        record_append(session=state.run.session, run=state.run, instance=instance, kind="tool_result",
                      entry_key=f"result-{step}-{index}", message=_result_message(call.id, call.name, outcome))
    _frame_pending(instance, [])
