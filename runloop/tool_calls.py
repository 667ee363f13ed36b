"""Tool calls of a step (LOOP-4, LOOP-7, RUN-3, RUN-6).

A step's calls run concurrently when there are several; their results are saved in call
order as each is known, before anything else can fail. A tool flagged ``delegates`` runs
as a sub-agent: a sub-instance driven by the instance loop the caller passes in, so
nothing here imports the loop back. On resume, the calls an earlier attempt left pending
are settled: idempotent tools run again, the others get an ``unknown`` outcome.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connections

from agents.tool_registry import Tool, ToolContext, ToolOutcome, arguments_object
from context import records as rec
from models_catalog.providers.events import ToolCall
from runloop.approvals import SUB_AGENT_CANNOT_WAIT, approval_asks, settled, wait_for_approvals
from runloop.errors import RunCancelled, RunStopped
from runloop.inputs import input_asker
from runloop.journal import ApprovalAsk, NewRecord
from runloop.state import RunState
from sessions.models import Instance
from sessions.selectors.approvals import approvals_of_step
from sessions.selectors.steps import last_assistant, result_keys
from tools.invoke import tool_invoke

# Drives one instance until it answers: (state, instance, depth) -> the answer text.
InstanceLoop = Callable[[RunState, Instance, int], str]

UNKNOWN_ON_RESUME = ("[unknown outcome] The run was interrupted while this call was pending, and the tool is not "
                     "safe to repeat automatically. It may or may not have taken effect: check before relying on it.")
NOT_STARTED = rec.NOT_STARTED_TEXT
MAX_TOOL_THREADS = 4


PROGRESS_EVERY = 0.25  # seconds between two tool_progress events of one call


def result_message(call_id: str, name: str, outcome: ToolOutcome) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "name": name, "content": outcome.content,
                               "status": outcome.status}
    if outcome.structured is not None:  # a server tool's structuredContent, kept in the record (TOOL-4)
        message["structured_content"] = outcome.structured
    if outcome.structured_omitted is not None:  # ... or the note of its size, when it was over the cap
        message["structured_content_omitted"] = outcome.structured_omitted
    return message


def _result_key(step: int, index: int) -> str:
    """Results are keyed by the step and the call's position: call ids repeat."""
    return f"result-{step}-{index}"


def _delegates(state: RunState, call: ToolCall) -> bool:
    tool = next((t for t in state.tools if t.name == call.name), None)
    return tool is not None and tool.delegates


def tool_call_events(state: RunState, calls: list[ToolCall]) -> list[tuple[str, dict[str, Any]]]:
    """The events of a step's calls, written with the step that saves them."""
    return [("tool_call_detected", {"call_id": call.id, "name": call.name,
                                    "arguments": state.redactor.arguments(call.arguments)}) for call in calls]


class ToolGroup:
    """The calls of one assistant step and what became of each."""

    def __init__(self, state: RunState, instance: Instance, step: int, calls: list[ToolCall]) -> None:
        self.state, self.instance, self.step, self.calls = state, instance, step, calls
        self.allowed = {tool.name: tool for tool in state.tools}
        self.outcomes: list[ToolOutcome | None] = [None] * len(calls)
        self.started = [0.0] * len(calls)
        self.saved: set[int] = set()
        self.cancelled = False

    def _delegated(self, call: ToolCall) -> bool:
        tool = self.allowed.get(call.name)
        return tool is not None and tool.delegates

    def _invoke(self, call: ToolCall) -> ToolOutcome | None:
        """Run one plain tool."""
        tool = self.allowed.get(call.name)
        if tool is None:
            return ToolOutcome("error", f"This agent has no tool named {call.name!r}.")
        return tool_invoke(tool, call.arguments, tool_context(self.state, self.instance, call))

    def _invoke_in_thread(self, call: ToolCall) -> ToolOutcome | None:
        """Run one plain tool in a pool thread, closing the connections that thread opened
        (the loop's own thread keeps its connection: reconnecting each step cost more
        than the step's writes)."""
        try:
            return self._invoke(call)
        finally:
            connections.close_all()

    def run_plain(self, *, waiting: Collection[int] = ()) -> None:
        """Every call that is not a delegation, concurrently when there are several; not
        those ``waiting`` for a person (TOOL-8)."""
        plain = [i for i, call in enumerate(self.calls) if not self._delegated(call) and i not in waiting]
        for index in plain:
            self.started[index] = time.monotonic()
        self.state.journal.bump("tool_calls", len(self.calls))
        if len(plain) > 1:
            with ThreadPoolExecutor(max_workers=min(MAX_TOOL_THREADS, len(plain)), thread_name_prefix="tools") as pool:
                futures = {index: pool.submit(self._invoke_in_thread, self.calls[index]) for index in plain}
                for index, future in futures.items():
                    self.outcomes[index] = future.result()
        else:
            for index in plain:
                self.outcomes[index] = self._invoke(self.calls[index])

    def run_delegations(self, instance_loop: InstanceLoop, depth: int, *, waiting: Collection[int] = ()) -> None:
        """Each delegation in order, saving every finished result after each one."""
        for index, call in enumerate(self.calls):
            if self._delegated(call) and index not in waiting:
                self.started[index] = time.monotonic()
                self.state.journal.emit("tool_started", {"call_id": call.id, "name": call.name})
                key = f"sub-{self.instance.pk}-{self.step}-{index}"
                self.outcomes[index] = _delegate(self.state, self.instance, call, instance_loop, depth=depth, key=key)
                self.save_finished()

    def save_finished(self) -> None:
        """Save every outcome known so far, in call order, in one commit, before anything
        else can fail: a Stop or a crash inside a sub-agent must not lose the other tools'
        results. The commit also checks ownership and reads back a Stop."""
        records, events = [], []
        for index, (call, outcome) in enumerate(zip(self.calls, self.outcomes)):
            if index in self.saved or outcome is None:
                continue
            self.saved.add(index)
            outcome = _redacted(self.state, outcome)
            kind = "delegation_result" if self._delegated(call) else "tool_result"
            records.append(NewRecord(kind, result_message(call.id, call.name, outcome), _result_key(self.step, index)))
            events.append(("tool_finished", {"call_id": call.id, "name": call.name, "status": outcome.status,
                                             "duration_ms": int((time.monotonic() - self.started[index]) * 1000)}))
            self.cancelled = self.cancelled or outcome.status == "cancelled"
        if records:
            self.state.journal.step(self.instance, records=records, events=events)

    def save_not_started(self) -> None:
        """LOOP-7: stopped after the calls were announced — none of them ran."""
        self.state.journal.step(self.instance, records=[
            NewRecord("tool_result", result_message(call.id, call.name, ToolOutcome("cancelled", NOT_STARTED)),
                      _result_key(self.step, index)) for index, call in enumerate(self.calls)])


def _redacted(state: RunState, outcome: ToolOutcome) -> ToolOutcome:
    """A result as it is stored (LOOP-8): a tool may echo a secret, in any form, in its
    text or in its structured content, values and keys alike."""
    redact = state.redactor.content
    return ToolOutcome(outcome.status, redact(outcome.content),
                       redact(outcome.structured) if outcome.structured is not None else None,
                       outcome.structured_omitted)


def tool_context(state: RunState, instance: Instance, call: ToolCall) -> ToolContext:
    # ``redact``: for a tool that writes what the model gave it into the run's own storage
    # (the plan), so it is stored as every record is (LOOP-8).
    # ``owned``: the transaction a tool that writes into the run's own storage (the plan)
    # writes in, which checks that the run is still this attempt's (RunLost otherwise).
    # ``ask``: what a server asks the person during the call goes through the run (TOOL-10);
    # ``asking`` stops the call's time-out clock meanwhile; ``input_notes`` are for its result.
    journal = state.journal
    context = ToolContext(run_id=state.run.pk, session_id=state.run.session_id, instance_id=instance.pk,
                          call_id=call.id, services={"should_cancel": journal.watch.cancel_requested_from_thread,
                                                     "progress": _progress_events(state, call),
                                                     "redact": state.redactor.content, "owned": journal.owned,
                                                     "asking": threading.Event(), "input_notes": []})
    context.services["ask"] = input_asker(state, instance, call.id, cancel=context.cancel_event,
                                          asking=context.services["asking"], notes=context.services["input_notes"])
    return context


def _progress_events(state: RunState, call: ToolCall) -> Callable[[float, float | None, str | None], None]:
    """A tool's progress as ``tool_progress`` events (TOOL-4), at most one per quarter second."""
    last = [0.0]

    def progress(done: float, total: float | None, message: str | None) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_EVERY and (total is None or done < total):
            return
        last[0] = now
        state.journal.emit("tool_progress", {"call_id": call.id, "name": call.name, "progress": done, "total": total,
                                     "message": state.redactor.text(message or "")[:300]})

    return progress


def run_tool_calls(state: RunState, instance: Instance, step: int, calls: list[ToolCall], *, depth: int,
                   instance_loop: InstanceLoop, asks: Mapping[int, ApprovalAsk] | None = None) -> None:
    """Run a step's calls and save their results in call order; RunCancelled after a Stop.
    The step that saved the calls announced them (``tool_call_events``). ``asks``: the
    calls that wait for a person (``runloop.approvals.approval_asks``): the others run,
    then the run waits (RunWaiting)."""
    journal = state.journal
    group = ToolGroup(state, instance, step, calls)
    asks = dict(asks or {})
    if asks and instance.parent_id is not None:  # a sub-agent cannot wait: those calls are answered at once
        for index in asks:
            group.started[index] = time.monotonic()
            group.outcomes[index] = ToolOutcome("denied", SUB_AGENT_CANNOT_WAIT)
        asks = {}
    # The plain tools start now: say so, and read the Stop flag fresh in the same write.
    journal.announce([("tool_started", {"call_id": call.id, "name": call.name})
                      for index, call in enumerate(calls)
                      if not _delegates(state, call) and index not in asks and group.outcomes[index] is None])
    journal.release()  # the step that announced the calls, with their start (instance_loop held it)
    if journal.signals.cancel_requested:  # LOOP-7: stopped after the calls were announced
        group.save_not_started()
        raise RunCancelled()
    settled = [index for index, outcome in enumerate(group.outcomes) if outcome is not None]
    group.run_plain(waiting=[*asks, *settled])
    group.save_finished()
    try:
        group.run_delegations(instance_loop, depth, waiting=[*asks, *settled])
    finally:
        if not journal.watch.lost:
            group.save_finished()
    # A call without an outcome was stopped mid-tool: its effect cannot be known.
    cancelled = group.cancelled or any(outcome is None for index, outcome in enumerate(group.outcomes)
                                       if index not in asks)
    if cancelled or journal.signals.cancel_requested:  # read back by the results' commit
        raise RunCancelled()
    if asks:  # the rest of the group is answered: the run waits for the person (RunWaiting)
        wait_for_approvals(state, instance, step, asks)


def _delegate(state: RunState, parent: Instance, call: ToolCall, instance_loop: InstanceLoop, *, depth: int,
              key: str) -> ToolOutcome:
    """RUN-3: a sub-instance with its own context and counters; its answer is the result."""
    arguments = call.parsed_arguments() or {}
    task = arguments.get("task")
    if not isinstance(task, str) or not task.strip():
        return ToolOutcome("error", "delegate needs a non-empty 'task' string.")
    if depth + 1 > state.limits.max_depth:
        return ToolOutcome("error", f"Delegation is limited to a depth of {state.limits.max_depth}.")
    if state.sub_instances >= state.limits.max_sub_instances:
        return ToolOutcome("error", f"This run may start at most {state.limits.max_sub_instances} sub-agents.")
    state.sub_instances += 1
    # Keyed by the parent's step and the call's position, like its result: call ids repeat.
    # Made, given its task and announced in one commit, only while the run is this worker's.
    journal = state.journal
    sub = journal.sub_instance(parent, key=key, depth=depth + 1, task=state.redactor.text(task),  # LOOP-8
                               call_id=call.id)
    try:
        answer = instance_loop(state, sub, depth + 1)
    except RunStopped as stop:
        journal.emit("sub_instance_finished", {"instance": str(sub.pk), "status": "failed"})
        return ToolOutcome("error", f"The sub-agent could not finish: {stop.error.message}")
    journal.emit("sub_instance_finished", {"instance": str(sub.pk), "status": "completed"})
    return ToolOutcome("ok", answer or "(the sub-agent gave an empty answer)")


def resolve_pending_calls(state: RunState, instance: Instance) -> None:
    """RUN-6: calls left without a result by an earlier attempt. Idempotent tools run
    again; the others get an ``unknown`` result and are never re-run automatically. A call
    that already has a stored result is never repeated (results are keyed by step)."""
    last = last_assistant(instance=instance)
    if last is None or not last.message.get("tool_calls") or last.message.get("partial"):
        return
    step = int(last.entry_key.rsplit("-", 1)[-1]) if last.entry_key.startswith("assistant-") else 0
    done = result_keys(instance=instance, step=step)
    allowed: dict[str, Tool] = {tool.name: tool for tool in state.tools}
    approvals = approvals_of_step(run_id=state.run.pk, instance_id=instance.pk, step=step)  # TOOL-9
    calls = [ToolCall(id=raw.get("id", ""), name=(raw.get("function") or {}).get("name", ""),
                      arguments=(raw.get("function") or {}).get("arguments", ""), index=index)
             for index, raw in enumerate(last.message["tool_calls"])]
    # TOOL-9: a call that needs a person whose request was never stored (its worker died
    # in the transaction that records it) is asked now, never run and never "unknown".
    unasked = {index: ask for index, ask in approval_asks(state, calls).items()
               if index not in approvals and _result_key(step, index) not in done}
    still: list[int] = []
    for index, call in enumerate(calls):
        if _result_key(step, index) in done:
            continue
        tool = allowed.get(call.name)
        if index in unasked:
            still.append(index)
            continue
        if index in approvals:
            started = time.monotonic()
            outcome = settled(state, instance, call, tool, approvals[index], tool_context(state, instance, call))
            if outcome is None:  # still waits: the group is answered whole, after every decision
                still.append(index)
                continue
            result = result_message(call.id, call.name, _redacted(state, outcome))
            state.journal.step(instance, records=[NewRecord("tool_result", result, _result_key(step, index))],
                               events=[("tool_finished", {"call_id": call.id, "name": call.name,
                                                          "status": outcome.status,
                                                          "duration_ms": int((time.monotonic() - started) * 1000)})])
            continue
        if tool is not None and tool.repeatable(arguments_object(call.arguments)):
            state.journal.touch()  # a tool is run again only while the run is this attempt's (RunLost)
            outcome = (tool_invoke(tool, call.arguments, tool_context(state, instance, call))
                       or ToolOutcome("unknown", UNKNOWN_ON_RESUME))
        else:
            outcome = ToolOutcome("unknown", UNKNOWN_ON_RESUME)
        # Saved only while the run is this attempt's: a worker that lost it settles nothing.
        result = result_message(call.id, call.name, _redacted(state, outcome))  # LOOP-8
        state.journal.step(instance, records=[NewRecord("tool_result", result, _result_key(step, index))])
    if still:  # claimed while a call still waits (never by a decision), or was never asked: back to waiting
        wait_for_approvals(state, instance, step, unasked)
