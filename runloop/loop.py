"""The run loop (LOOP-1): claim → [finish tools → supplements → context → validate →
hard limit → model (streaming) → save → tools → save] until an answer, a limit, a Stop
or an error. Every step is saved before the next begins, so a worker killed anywhere
loses at most the step in flight and the run can be resumed.

This module is the step machine; what it drives lives beside it: ``state`` (what a run
knows, built once per claim), ``calls`` (model calls), ``tool_calls`` (tools, delegation,
pending calls on resume), ``compaction`` (CTX-30…44) and ``verification`` (LOOP-9). It
decides and writes nothing itself: every write is its attempt's journal's
(``runloop.journal.RunJournal``), which checks that the attempt still owns the run.

No network call happens inside a database transaction: each save commits before the
next model or tool call starts.
"""
from __future__ import annotations

import logging
from typing import Any, assert_never

from django.db import connection as db_connection

from context import ContextPipeline, ContextTooLong, PolicyError, RequestValidationError, Send, length_cause
from context.after_answer import (
    AskAgain,
    Cut,
    CutReason,
    FailedEmpty,
    Finish,
    RunTools,
    TakeSupplement,
    Wait,
    after_answer,
)
from core.log_redaction import secrets_kept_from_logs
from runloop import compaction
from runloop.approvals import approval_asks
from runloop.calls import action_call, answer_parts
from runloop.errors import ContextRefused, RunCancelled, RunLost, RunStopped, RunWaiting, WaitForServer
from runloop.journal import RunJournal, SupplementsPending, assistant_record
from runloop.learning import calibration_save, refusal_learn
from runloop.meter import step_measured
from runloop.state import RunState, run_state_build
from runloop.tool_calls import resolve_pending_calls, run_tool_calls, tool_call_events
from runloop.verification import run_verify
from sessions.models import Instance, Run, RunAttention
from sessions.run_errors import (
    COULD_NOT_START,
    EMPTY_ANSWER,
    EMPTY_ANSWER_RETRY,
    INTERNAL_ERROR,
    RunError,
    RunErrorCode,
)
from sessions.selectors.instances import main_instance

logger = logging.getLogger("runloop")

# CAT-9: a step's request refused as too long is compacted under the window the refusal
# taught and sent again; a refusal after that is tried again only while each one carries
# the server's figures and they teach a smaller window, at most this often.
MAX_REFUSALS = 3
MEMORY_WORTH_NAMING = 200  # tokens: below this, memory is not why a request does not fit


def run_execute(*, run_id: int) -> None:
    """Claim a queued run and drive it to a terminal state. A second delivery does nothing.

    Runs a vanished worker left running are ended by the workers' housekeeping thread (at
    start and on a schedule, ``runloop.housekeeping``), not here: a scan of the
    running runs with every run was one query per question for nothing.
    """
    journal = RunJournal.claim(run_id=run_id)
    if journal is None:
        return
    # Ended only from this attempt's working state: a run taken over meanwhile (reaped while
    # this worker was slow to start it, then resumed) is not this worker's to fail.
    try:
        state = run_state_build(journal.run, journal)
    except Exception as exc:  # e.g. a key that no longer decrypts: fail clearly, never hang "running"
        if not isinstance(exc, RunStopped):  # e.g. the connection moved to another endpoint (CAT-6)
            logger.exception("run %s could not start", run_id)
        try:
            journal.finish(Run.Status.FAILED, error=exc.error if isinstance(exc, RunStopped) else COULD_NOT_START,
                           announce=False)
        except RunLost:
            logger.warning("run %s is no longer owned by this worker; not failing it", run_id)
        return
    with secrets_kept_from_logs(state.redactor.secrets):  # LOOP-8: out of every thread's log lines too
        journal.watch.start_background()
        try:
            _drive(state, journal)
        except RunLost:
            logger.warning("run %s is no longer owned by this worker; stopping without writing", run_id)
        finally:
            journal.release()  # before anything that may take time
            journal.watch.stop_background()
            state.tool_sessions.close_all()  # one protocol session per server and run (TOOL-4)


def _drive(state: RunState, journal: RunJournal) -> None:
    run = journal.run
    try:
        # run_started was written with the claim. The main instance was read with it (one
        # statement); a run claimed otherwise reads it now.
        main = journal.main = journal.main or main_instance(run=run)
        if run.attempt:
            journal.reopen(main)  # a worker that lost the run before it began writes nothing of it
            resolve_pending_calls(state, main)
        else:  # a first attempt: its main line (made with the run) has no step yet, nothing pending
            journal.steps[main.pk] = 0
        while True:
            answer = instance_loop(state, main, 0)
            if run.version.verify_before_complete:
                journal.release()  # the answer is shown while it is checked
                run_verify(state, main, answer)
            compaction.prepare_at_end(state)  # CTX-45: the idle session's next summary, made meanwhile
            try:
                _finish(state, Run.Status.COMPLETED)
                break
            except SupplementsPending:  # a supplement arrived while finishing: answer it too (RUN-5)
                journal.asked(RunAttention.SUPPLEMENT)
                continue
    except RunLost:
        raise
    except RunCancelled:
        _finish(state, Run.Status.CANCELLED, reason="stopped by user")
    except RunStopped as stop:
        _finish(state, Run.Status.FAILED, error=stop.error)
    except RunWaiting:
        # TOOL-8: the run waits for a person, as ``waiting``, with no worker; its decision
        # sends it back to the queue (sessions.services.approvals).
        calibration_save(state)
        logger.info("run %s waits for a person's approval", run.pk)
    except WaitForServer as wait:
        # LOOP-3: back to the queue until the server's time, freeing this thread; a worker
        # takes it up then (the reaper's sweep), as a new attempt from the last saved step.
        journal.release()
        calibration_save(state)
        journal.wait_for_server(seconds=wait.seconds, error=RunError.from_provider(wait.error))
        logger.info("run %s waits %.0f s for its model's server (Retry-After)", run.pk, wait.seconds)
    except Exception:
        logger.exception("run %s failed unexpectedly", run.pk)
        _drop_dead_connection()
        _finish(state, Run.Status.FAILED, error=INTERNAL_ERROR)


def _drop_dead_connection() -> None:
    """A database connection cut mid-run is unusable; reconnect before recording the
    failure, or the run would stay "running" until the reaper finds it."""
    if db_connection.connection is not None and not db_connection.is_usable():
        db_connection.close()


def _finish(state: RunState, status: str, *, error: RunError | None = None, reason: str = "") -> None:
    """Record the end, only from ``running`` and only while this worker's attempt owns it."""
    journal = state.journal
    if status != Run.Status.COMPLETED:
        journal.release()  # a failing end may wait on a broken database: the answer goes first
    calibration_save(state)
    # The error is announced only while the run is ours: a lost worker's failure is not the run's.
    verdict = journal.counters.get("verification")
    journal.finish(status, error=error, reason=reason,
                   event_data={"verification": verdict} if verdict is not None else None)


def _length_named(state: RunState, message: dict[str, Any], *, request: Send, usage: Any) -> None:
    """CAT-12: an answer ended by ``length`` keeps the output limit it was sent with and
    its real cause: that limit, or the server's context filling long before it (a server
    that stops when prompt + answer reach its window), told apart by what was written —
    the provider's completion count, else our calibrated estimate of the text."""
    shape = state.shape
    sent = request.body.get("max_tokens" if shape.native else shape.output_limit_field)
    limit = sent if isinstance(sent, int) and not isinstance(sent, bool) else state.figures.budget.max_output_tokens
    # OpenAI-style ``completion_tokens``; Anthropic's ``output_tokens``.
    counted = (usage.get("completion_tokens", usage.get("output_tokens")) if isinstance(usage, dict) else None)
    if not isinstance(counted, int) or isinstance(counted, bool):
        counted = state.figures.figure(state.figures.estimates.message(message))
    message["output_limit"] = limit
    message["answer_tokens"] = counted
    message["length_cause"] = length_cause(output_limit=limit, answer_tokens=counted)


def _learn_window(state: RunState, refusal: ContextRefused) -> None:
    """The server keeps less than the configured window: learn what it keeps (CAT-3), then
    the next preparation compacts under the lowered budget and the call is tried once more."""
    try:
        window = refusal_learn(state, refusal.error, estimate=refusal.estimate, truncated=refusal.truncated)
    except PolicyError:
        raise refusal.stop(connection=_connection_name(state), budget=state.figures.budget,
                           after_summary=False) from None
    logger.warning("run %s: the provider refused a request as too long; window now %s", state.run.pk, window)


def _connection_name(state: RunState) -> str:
    connection = state.run.version.model_connection
    return connection.name if connection is not None else state.target.model


def _request(state: RunState, instance: Instance, pipeline: ContextPipeline, depth: int, system: dict[str, Any],
             schemas: list[dict[str, Any]], *, refused: int) -> Send:
    """The step's request from the instance's pipeline, compacted first when it says so."""
    try:
        return compaction.step_request(state, instance, pipeline, system, schemas, depth=depth,
                                       force="budget" if refused else None)
    except RequestValidationError as exc:
        # CTX-10: an invalid request is a bug. Never send it; say so and keep the records.
        logger.error("run %s: refusing to send an invalid request: %s", state.run.pk, exc)
        raise RunStopped(RunErrorCode.INVALID_REQUEST, "The conversation could not be turned into a valid request; "
                         "nothing was sent. This is a bug and has been logged.") from None
    except ContextTooLong as exc:  # CTX-39, checked before anything is sent
        raise RunStopped(RunErrorCode.CONTEXT_OVERFLOW, f"{exc}{_memory_share(state)}") from None


def _memory_share(state: RunState) -> str:
    """MEM-3: the person's memory is in every request and no compaction shortens it; when
    it is a good part of what does not fit, say so and what the person can do."""
    memory = state.run.memory
    if not memory:
        return ""
    tokens = state.figures.figure(state.figures.estimates.message({"role": "system", "content": memory}))
    if tokens < MEMORY_WORTH_NAMING:
        return ""
    return (f" Your memory for this agent takes about {tokens:,} tokens of every request and is never shortened: "
            "open Memory in the chat to delete what is no longer needed, or ask an admin for a larger window.")


def instance_loop(state: RunState, instance: Instance, depth: int) -> str:
    """Drive one instance until it answers; returns the answer text. Each step ends in the
    decision after the answer (``context.after_answer``), which this carries out."""
    system, schemas = state.request_parts(depth)
    pipeline: ContextPipeline | None = None
    refused = 0  # refusals of this step's request as too long (CAT-3, CAT-9)
    last_refusal: ContextRefused | None = None
    empty_asked_again = False  # LOOP-10: one empty answer is asked once more, a second ends the run
    journal = state.journal
    while True:
        journal.release()  # a step after one that was held: what it waited for is out
        state.check()
        if instance.parent_id is None and journal.attention(RunAttention.SUPPLEMENT):
            journal.supplements_take(instance)
        if pipeline is None or not pipeline.context.loaded:  # the first step, or the first after a compaction
            pipeline = state.pipeline(instance, depth)  # made once, its records loaded again
        try:
            request = _request(state, instance, pipeline, depth, system, schemas, refused=refused)
            answer = action_call(state, instance, request)
        except RunStopped as stop:
            if refused and stop.error.code == "context_overflow" and last_refusal is not None:
                # CAT-9: it cannot be made to fit the window the server proved: say what the
                # server keeps and what to change, not "start a new session".
                raise last_refusal.stop(connection=_connection_name(state), budget=state.figures.budget,
                                        after_summary=False) from None
            raise
        except ContextRefused as refusal:
            last_refusal = refusal
            before = state.figures.budget.context_window
            counted = refusal.error.window or refusal.error.prompt_tokens
            # Compacted and refused again: never retry forever (CTX-39), nor lower the window
            # on a guess (a refusal without the server's figures teaches once).
            if refused and (refused >= MAX_REFUSALS or not counted):
                raise refusal.stop(connection=_connection_name(state), budget=state.figures.budget,
                                   after_summary=True) from None
            _learn_window(state, refusal)
            if refused and state.figures.budget.context_window >= before:  # it taught nothing new
                raise refusal.stop(connection=_connection_name(state), budget=state.figures.budget,
                                   after_summary=True) from None
            refused += 1
            continue
        refused = 0
        end = answer.end
        parts = answer_parts(end)
        if not parts.empty:
            empty_asked_again = False  # the rule is per answer: a later empty one is asked again too
        step = journal.step_number(instance)
        message = end.assistant_message()
        if end.finish_reason == "length":  # stopped by its output limit: the chat says so and offers Continue
            message["finish_reason"] = "length"
            _length_named(state, message, request=request, usage=answer.log.usage)
        calls = list(parts.runnable)
        if calls:
            message["tool_calls"] = [call.to_message_dict() for call in calls]
        else:
            message.pop("tool_calls", None)
        # Stored redacted (LOOP-8); the tools themselves run with what the model wrote.
        message = state.redactor.message(message)
        record, steps = assistant_record(message=message, entry_key=f"assistant-{step}")
        # A cut answer is kept, with no step (CTX-6); an empty one is not kept at all (only
        # its call's log is), so asking again sends what was sent before.
        kept = [record] if not parts.empty and (not end.cut or message.get("content")) else []
        measured = [step_measured(state, estimate=request.estimate, usage=answer.log.usage, answer=message)
                    ] if instance.parent_id is None else []
        if calls or (instance.parent_id is None and not end.cut):
            # What follows this step at once goes out with it: the calls' ``tool_started``
            # (run_tool_calls), or the end of the run after its answer (issue #29).
            journal.hold()
        journal.step(instance, records=kept, events=[*answer.events, *measured, *tool_call_events(state, calls)],
                     model_steps=steps if kept else 0, model_call=answer.log.action)
        # The decision after the answer (context.after_answer), read after the commit: it
        # brought back the supplements queued meanwhile (RUN-5).
        asks = approval_asks(state, calls) if calls else {}  # TOOL-8: the calls that ask a person first
        decision = after_answer(parts, main=instance.parent_id is None, asked_again=empty_asked_again,
                                supplement_waiting=journal.attention(RunAttention.SUPPLEMENT),
                                waiting=frozenset(asks))
        match decision:
            case Cut(reason=CutReason.STOPPED):  # LOOP-7: Stop ended the stream; what was said is kept
                raise RunCancelled()
            case RunTools(calls=runnable) | Wait(calls=runnable):  # a Wait ends in RunWaiting, once the rest ran
                run_tool_calls(state, instance, step, list(runnable), depth=depth, instance_loop=instance_loop,
                               asks=asks)
            case TakeSupplement():
                continue  # a supplement arrived while answering: take it and go on (RUN-5)
            case AskAgain():
                # LOOP-10: small local models answer nothing now and then, and a second ask
                # usually answers. Nothing of the empty one was kept, so the same request
                # goes again; the chat says so (a retry, not a failure yet).
                empty_asked_again = True
                journal.emit("run_error", EMPTY_ANSWER_RETRY.event(retrying_in=0, attempt=1, reset=True,
                                                                 instance="main" if instance.parent_id is None
                                                                 else str(instance.pk)))
            case FailedEmpty():  # a sub-agent's empty answer fails its delegation with the same words
                raise RunStopped.of(EMPTY_ANSWER)
            case Finish() | Cut():  # CAT-12: an answer its output limit stopped stands as it is
                return message.get("content") or ""
            case _:
                assert_never(decision)
