"""Model calls of a run: the streaming action call, and the collected calls of summaries
and completion checks. Their bodies come from the context engine (``context.ContextPipeline``
for action calls, ``context.build_body`` for the others), already under the hard limit.

This is the one place a chat client is opened (``chat_client``), so every call of a run —
action, summary, verification — goes to the run's ``ModelTarget`` with the same
configured limits (``AGENTLOOM_PROVIDER_READ_TIMEOUT`` included). Each call is logged for
the context inspector before it is sent and closed with its outcome and usage.
"""
from __future__ import annotations

import copy
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from context import Send, prompt_truncated, truncation_confirmed, usage_prompt_tokens
from context.after_answer import Answer
from context.calibration import UNDER_COUNT
from context.truncation import answer_bound
from models_catalog.client import (
    ChatClient,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    call_with_retries,
    collect,
    get_chat_client,
)
from models_catalog.demo import DemoChatClient
from models_catalog.errors import ContextOverflowError, ProviderError
from models_catalog.slots import ACTION, Lease, Waiting, model_slot
from models_catalog.target import ModelTarget
from runloop.errors import ContextRefused, RunLost, RunStopped, WaitForServer
from runloop.journal import ActionLog, Deltas
from runloop.learning import estimate_exact, usage_learn
from runloop.state import RunState
from sessions.models import Instance, ModelCall
from sessions.run_errors import RunError
from sessions.selectors.usage import session_largest_prompt_count


def chat_client(target: ModelTarget, *, paced: bool = False) -> ChatClient:
    """Open a chat client for ``target`` — the only place the run loop opens one.

    ``paced``: the answer a person watches stream. Only there does the demo model write at a
    person's pace; its summaries and checks, which nobody watches, come at once."""
    client = get_chat_client(provider=target.provider, base_url=target.base_url, api_key=target.api_key,
                             allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS, limits=target.limits)
    if paced and isinstance(client, DemoChatClient):  # at a person's pace, so Stop can land mid-answer
        client.pace = settings.AGENTLOOM_DEMO_WORD_SECONDS
    return client


class _StopWhileWaiting(Exception):
    """Stop was asked while the action call waited for the model server: nothing was sent."""


def server_slot(state: RunState, *, purpose: str, source: dict[str, str] | None = None,
                stoppable: bool = False) -> AbstractContextManager[Lease | None]:
    """A slot of the model server for one call of the run (CAT-11), held for the block.

    While it waits the run's heartbeat goes on (the reaper must not take a waiting run for
    a dead one) and a run taken over gives up (RunLost). The run's own calls say so in the
    chat: ``model_waiting`` when the wait starts, ``model_waited`` when the slot comes;
    a summary prepared in the background waits silently, behind every action call.
    """
    journal = state.journal
    announce = journal.executes and state.slot_kind == ACTION
    where = source or {"instance": "main"}

    def on_wait() -> None:
        if announce:
            journal.emit("model_waiting", {**where, "purpose": purpose, "concurrency": state.target.concurrency})

    def on_waited(seconds: float) -> None:
        if announce:
            journal.emit("model_waited", {**where, "purpose": purpose, "seconds": round(seconds, 1)})

    def on_poll() -> None:
        if not journal.executes:  # a side writer (a background summary): no heartbeat of the run's to keep
            if state.slot_poll is not None:
                state.slot_poll()
            return
        journal.watch.beat()
        if journal.watch.lost:
            raise RunLost()
        if stoppable and journal.watch.cancel_requested():
            raise _StopWhileWaiting()

    return model_slot(base_url=state.target.base_url, concurrency=state.target.concurrency, kind=state.slot_kind,
                      waiting=Waiting(on_wait=on_wait, on_waited=on_waited, on_poll=on_poll))


# The call log's outcome of an answer its output limit stopped: the provider's own
# (finish reason ``length``, stop reason ``max_tokens``) or the platform's bound on a
# provider that ignored the limit it was sent. The answer is kept; the chat offers Continue.
OUTPUT_LIMIT = "output_limit"
# ... and of an answer with no text and no tool call that no limit stopped: the model
# answered nothing (LOOP-10, ``Answer.empty``: the run says so, and offers to ask again).
EMPTY = "empty"


def answer_parts(end: StreamEnd) -> Answer[ToolCall]:
    """The parts of an answer the decision after it reads (``context.after_answer``)."""
    return Answer(text=end.text, calls=end.tool_calls, finish_reason=end.finish_reason, cut=end.cut)


@dataclass
class _Attempt:
    """What one streaming attempt leaves beside its answer: the last buffered text, as
    events, and whether the answer was cut at its bound."""

    tail: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    over_bound: bool = False


@dataclass
class CallLog:
    """An action call's log, saved by the step that saves its answer (``RunJournal.step``),
    and the provider's usage it reports."""

    action: ActionLog
    usage: dict[str, Any] | None


@dataclass
class ActionAnswer:
    """An action call's answer, with what the step saves alongside it: the call's log (not
    yet made) and the last buffered text, as events."""

    end: StreamEnd
    log: CallLog
    events: list[tuple[str, dict[str, Any]]]


def action_call(state: RunState, instance: Instance, request: Send) -> ActionAnswer:
    """One streaming action call with bounded retries (LOOP-3), deltas as events, Stop honoured.

    The call's log is saved with the step that saves the answer (one transaction); a call
    that fails is logged with its error code here.
    """
    journal = state.journal
    journal.bump("model_calls")
    if not state.model_noted:  # the session's next runs learn where its calls went (CTX-11)
        journal.model_noted(provider=state.target.provider, model=state.target.model,
                            other_models=state.other_models)
        state.model_noted = True
    source = {"instance": "main" if instance.parent_id is None else str(instance.pk)}
    attempt = _Attempt()
    bound = answer_bound(state.figures.budget.max_output_tokens)

    def on_retry(number: int, error: ProviderError, delay: float) -> None:
        # The run error's shape, plus what a retry adds: the screen says "retrying in …".
        journal.emit("run_error", RunError.from_provider(error).event(retrying_in=round(delay, 1), attempt=number,
                                                                      reset=True, **source))

    try:
        end = call_with_retries(lambda: _stream_once(state, request.body, source, attempt, bound),
                                max_attempts=settings.AGENTLOOM_PROVIDER_ATTEMPTS,
                                base_delay=settings.AGENTLOOM_RETRY_BASE_DELAY,
                                max_delay=settings.AGENTLOOM_PROVIDER_RETRY_MAX_DELAY, on_retry=on_retry)
    except ContextOverflowError as exc:
        _log_failed(state, instance, request, "context_overflow")
        raise ContextRefused(exc, estimate=request.estimate) from None
    except ProviderError as exc:
        _log_failed(state, instance, request, exc.code)
        if exc.transient and exc.retry_after is not None and \
                settings.AGENTLOOM_PROVIDER_RETRY_MAX_DELAY < exc.retry_after <= settings.AGENTLOOM_PROVIDER_MAX_WAIT:
            raise WaitForServer(exc, seconds=exc.retry_after) from None  # not waited out holding this thread
        raise RunStopped.from_provider(exc) from None
    usage = end.usage.raw if end.usage else None
    counted = usage_prompt_tokens(usage)
    if counted is not None and end.finish_reason != "cancelled" and _cut_by_server(state, request, counted):
        raise _truncated(state, instance, request, end, usage, counted=counted, source=source)
    outcome = ("cancelled" if end.finish_reason == "cancelled"
               else OUTPUT_LIMIT if attempt.over_bound or end.finish_reason == "length"
               else EMPTY if answer_parts(end).empty else "ok")
    log = CallLog(journal.action_log(instance, **_log(state, request, outcome, usage, end=end)), usage=usage)
    usage_learn(state, estimate=request.estimate, provider_count=counted)
    return ActionAnswer(end=end, log=log, events=attempt.tail)


# CAT-10: the call log's outcome of an answer to a prompt the server cut without saying so.
TRUNCATED_PROMPT = "truncated_prompt"


def _cut_by_server(state: RunState, request: Send, counted: int) -> bool:
    """CAT-10: the server's own count says it cut the prompt. An under-count is confirmed
    against the largest count the server gave for this session before (read only then: a
    suspicion is rare, an answer is not)."""
    exact = estimate_exact(state)
    said = prompt_truncated(estimate=request.estimate, counted=counted, calibration=state.figures.calibration,
                            exact=exact, server_window=state.figures.budget.context_window)
    if said != UNDER_COUNT:
        return said is not None
    return truncation_confirmed(counted=counted, exact=exact,
                                largest_earlier=session_largest_prompt_count(session_id=state.run.session_id))


def _truncated(state: RunState, instance: Instance, request: Send, end: StreamEnd, usage: dict[str, Any] | None,
               *, counted: int, source: dict[str, str]) -> ContextRefused:
    """CAT-10: the server answered a prompt it cut (Ollama keeps its context's worth and
    drops the start, with no error): the answer read a conversation without its beginning.
    It is logged ``truncated_prompt`` (not kept as a record, nor its count as a calibration
    sample), the chat is told and drops the text it showed, and the loop learns the window
    from the server's own count (CAT-9), compacts and asks once more."""
    state.journal.action_logged(instance, **_log(state, request, TRUNCATED_PROMPT, usage, end=end))
    estimated = state.figures.figure(request.estimate)
    state.journal.emit("prompt_truncated", {
        **source, "kept_tokens": counted, "estimated_tokens": estimated, "reset": True,
        "message": f"The model's server kept only {counted:,} tokens of this conversation (about {estimated:,}) and "
                   "dropped the rest without saying so: its window is smaller than its connection says. Earlier "
                   "messages are summarized to fit it and the question asked once more."})
    error = ContextOverflowError(f"The model's server cut the prompt to {counted:,} tokens.", window=counted)
    return ContextRefused(error, estimate=request.estimate, truncated=True)


def call_output(state: RunState, end: StreamEnd) -> tuple[dict[str, Any], int]:
    """What a call answered, redacted as its record is (LOOP-8), for the inspector; and our
    estimate of it, which the usage page counts when the provider reports no usage."""
    message = state.redactor.message(end.assistant_message())
    return {"message": message, "finish_reason": end.finish_reason}, state.figures.estimates.message(message)


def _log(state: RunState, request: Send, outcome: str, usage: dict[str, Any] | None, *,
         end: StreamEnd | None = None) -> dict[str, Any]:
    """What an action call's log says (``RunJournal.action_log``)."""
    output, estimate = call_output(state, end) if end is not None else (None, None)
    return {"provider": state.target.provider, "model": state.target.model, "estimator_id": request.estimator_id,
            "estimated_tokens": request.estimate, "body": request.body, "estimates": request.per_message,
            "outcome": outcome, "usage": usage, "finished": True, "repairs": request.repairs, "output": output,
            "estimated_output_tokens": estimate}


def _log_failed(state: RunState, instance: Instance, request: Send, outcome: str) -> None:
    # What it sent, and the row, only while the run is this worker's.
    state.journal.action_logged(instance, **_log(state, request, outcome, None))


def _stream_once(state: RunState, body: dict[str, Any], source: dict[str, str], attempt: _Attempt,
                 bound: int) -> StreamEnd:
    """One attempt: stream the answer, publishing text and thinking as they come; what is
    still buffered at the end goes into ``attempt.tail``, for the step to save with the answer.

    An answer longer than ``bound`` characters (text, reasoning and call arguments, see
    ``context.truncation.answer_bound``) comes from a provider that ignored the output
    limit it was sent: it is cut there, the stream closed, and it ends as if the limit had
    stopped it (``length``) without its calls — their arguments may be cut, and a runaway
    answer's calls are not run. What is stored and published stays bounded.
    """
    attempt.tail.clear()
    attempt.over_bound = False
    # Each flush of streamed text reads the Stop flag with its seqs (no poll of its own while
    # text flows), which the ownership check takes: a worker that lost the run streams no more.
    journal = state.journal
    text = journal.deltas("message_delta", extra=source, redact=state.redactor.text, hold=state.redactor.hold)
    thinking = journal.deltas("thinking_delta", extra=source, redact=state.redactor.text, hold=state.redactor.hold)
    try:
        with server_slot(state, purpose=ModelCall.Purpose.ACTION, source=source, stoppable=True) as lease:
            return _stream_held(state, body, attempt, bound, text, thinking, lease)
    except _StopWhileWaiting:  # LOOP-7 while waiting for the server: nothing was asked, the run stops
        return StreamEnd(finish_reason="cancelled", usage=None, cut=True, text="")


def _stream_held(state: RunState, body: dict[str, Any], attempt: _Attempt, bound: int, text: Deltas,
                 thinking: Deltas, lease: Any) -> StreamEnd:
    """``_stream_once`` with the server's slot held (CAT-11; ``lease`` None: no bound)."""
    pieces: list[str] = []
    reasoning: list[str] = []
    room = bound  # characters the answer may still stream
    end: StreamEnd | None = None
    watch = state.journal.watch
    with chat_client(state.target, paced=True) as client:
        stream = client.stream_chat(body)
        events = lease.kept(stream) if lease is not None else stream
        try:
            for event in events:
                if isinstance(event, TextDelta):
                    pieces.append(event.text[:max(room, 0)])
                    text.add(pieces[-1])
                    room -= len(event.text)
                elif isinstance(event, ReasoningDelta):
                    reasoning.append(event.text[:max(room, 0)])
                    thinking.add(reasoning[-1])
                    room -= len(event.text)
                elif isinstance(event, ToolCallDelta):
                    room -= len(event.arguments)
                elif isinstance(event, StreamEnd):
                    end = event
                watch.beat()
                if watch.lost:  # the beat found the run taken over: stop paying for its answer
                    raise RunLost()
                if end is None and room < 0:
                    attempt.over_bound = True
                    attempt.tail.extend([*thinking.take(), *text.take()])
                    return StreamEnd(finish_reason="length", usage=None, cut=False, text="".join(pieces),
                                     reasoning="".join(reasoning))
                if end is None and watch.cancel_requested():
                    # LOOP-7 mid-stream: keep what was said, marked interrupted; calls whose
                    # arguments were still streaming are dropped and never executed (CTX-6).
                    attempt.tail.extend([*thinking.take(), *text.take()])
                    return StreamEnd(finish_reason="cancelled", usage=None, cut=True, text="".join(pieces))
        finally:
            stream.close()
    attempt.tail.extend([*thinking.take(), *text.take()])
    if end is None:
        raise ProviderError("The provider's answer ended without a final event.", permanent=False,
                            code="provider_unavailable")
    return end.raise_if_cut()


def collected_call(state: RunState, instance: Instance, *, purpose: str, body: dict[str, Any], estimator_id: str,
                   estimate: int, counts_as_model_call: bool, extends_action: bool = False) -> StreamEnd:
    """A summary or verification call: logged, sent, read to the end (no events).
    ``extends_action``: the body is the action request's plus more (CTX-46's cached form),
    so its log is a delta of the last action call's, and the action chain stays as it was.

    Retried as an action call is (LOOP-3): the same attempts and back-off, a cut stream
    (``stream_cut``) asked again -- a one-request-at-a-time server cuts a background
    summary whenever an answer waits, and a single attempt was a failed summary. Only a
    whole answer is logged ``ok``; each retry is said in the chat, without touching the
    answer shown.

    Raises the ``ProviderError`` of the last attempt after closing the log with its code.
    """
    journal = state.journal
    chain = (copy.copy(journal.call_chain(instance, ModelCall.Purpose.ACTION)) if extends_action
             else journal.call_chain(instance, purpose))
    # The log, opened and closed, only while the run is the caller's to write.
    log = journal.call_open(instance, chain=chain, purpose=purpose, provider=state.target.provider,
                            model=state.target.model, estimator_id=estimator_id, estimated_tokens=estimate, body=body)
    if counts_as_model_call:
        journal.bump("model_calls")

    def attempt() -> StreamEnd:
        # CAT-11: each attempt takes its slot, so a retry's pause leaves the server to others.
        with server_slot(state, purpose=purpose) as lease, chat_client(state.target) as client:
            stream = client.stream_chat(body)
            return collect(lease.kept(stream) if lease is not None else stream).raise_if_cut()

    def on_retry(number: int, error: ProviderError, delay: float) -> None:
        if journal.executes:  # a manual compaction has no live run to speak in
            journal.emit("run_error", RunError.from_provider(error).event(retrying_in=round(delay, 1), attempt=number,
                                                                        reset=False, purpose=purpose))

    try:
        end = call_with_retries(attempt, max_attempts=settings.AGENTLOOM_PROVIDER_ATTEMPTS,
                                base_delay=settings.AGENTLOOM_RETRY_BASE_DELAY,
                                max_delay=settings.AGENTLOOM_PROVIDER_RETRY_MAX_DELAY, on_retry=on_retry)
    except ProviderError as exc:
        journal.call_close(log, outcome=exc.code)
        raise
    usage = end.usage.raw if end.usage else None
    output, output_estimate = call_output(state, end)
    journal.call_close(log, outcome="ok", usage=usage, output=output, estimated_output_tokens=output_estimate)
    usage_learn(state, estimate=estimate, provider_count=usage_prompt_tokens(usage))
    return end
