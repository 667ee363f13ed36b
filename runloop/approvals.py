"""Calls that wait for a person, as the run loop meets them (SPEC §7b, TOOL-7, TOOL-8, TOOL-9).

A step's calls whose tool's policy asks (``agents.tool_registry.approval_needed``), unless
the person approved that tool for the session, wait: the step's other calls run first and
their results are saved, then the waiting calls are recorded and the run moves to
``waiting`` (``RunJournal.wait_for_approvals``) and lets go of its worker. No request is
built meanwhile: the step's calls are a group, and the group is answered whole.

The next attempt settles them with the rest of the step's pending calls
(``runloop.tool_calls.resolve_pending_calls`` asks :func:`settled`): an approved call is
marked started, then made; one started before is an unknown outcome, never a second call;
a denied, expired or stopped one gets a ``denied`` result saying who or what decided.

A sub-agent cannot wait (its parent's call is in flight): its calls that would ask are
answered ``denied`` with words the model can act on — the main agent may make the call
itself, and that one asks.
"""
from __future__ import annotations

import json
from typing import Any

from agents.server_tools import frozen_server_tools
from agents.tool_registry import Tool, ToolContext, ToolOutcome, approval_needed, arguments_object
from models_catalog.providers.events import ToolCall
from runloop.errors import RunWaiting
from runloop.journal import ApprovalAsk
from runloop.state import RunState
from sessions.models import Instance, ToolApproval
from sessions.selectors.approvals import tools_approved_for_session
from tools.invoke import tool_invoke

SUB_AGENT_CANNOT_WAIT = ("[denied] This tool needs a person's approval before each call, and a sub-agent cannot wait "
                         "for one. Report back that this call is needed, with its arguments; the main agent can make "
                         "it, and the person will be asked then.")
STARTED_BEFORE = ("[unknown outcome] This call was approved and started, but the run was interrupted before its "
                  "result was saved. It was not repeated. It may or may not have taken effect: check before relying "
                  "on it or asking for it again.")
WHY_DENIED: dict[str, str] = {
    ToolApproval.Status.DENIED: "The person denied this call",
    ToolApproval.Status.EXPIRED: "Nobody decided on this call in time, so it was not made",
    ToolApproval.Status.STOPPED: "The person stopped the run while this call waited, so it was not made",
}


def approval_asks(state: RunState, calls: list[ToolCall]) -> dict[int, ApprovalAsk]:
    """The calls of a step that wait for a person, by position."""
    allowed: dict[str, Tool] = {tool.name: tool for tool in state.tools}
    asks: dict[int, ApprovalAsk] = {}
    granted: set[str] | None = None
    for index, call in enumerate(calls):
        tool = allowed.get(call.name)
        why = approval_needed(tool, arguments_object(call.arguments)) if tool is not None else ""
        if tool is None or not why:
            continue
        if granted is None:  # read once, only for a step that has a call to ask about
            granted = tools_approved_for_session(session_id=state.run.session_id)
        if call.name in granted:
            continue
        asks[index] = ApprovalAsk(index=index, call_id=call.id, tool=call.name, label=_label(state, call.name),
                                  description=tool.description if tool is not None else "",
                                  arguments=_arguments(state, call), why=why)
    return asks


def _label(state: RunState, function: str) -> str:
    """The tool as people know it: ``git: log``, not the function name requests carry."""
    for entry in frozen_server_tools(state.run.version):
        if entry.get("function") == function:
            return f"{entry['server']}: {entry['tool']}"
    return function


def _arguments(state: RunState, call: ToolCall) -> Any:
    """The arguments as stored and shown (LOOP-8): the redacted text, as JSON when it is."""
    redacted = state.redactor.arguments(call.arguments or "")
    try:
        return json.loads(redacted or "{}")
    except ValueError:
        return redacted


def wait_for_approvals(state: RunState, instance: Instance, step: int, asks: dict[int, ApprovalAsk]) -> None:
    """Record the waiting calls, move the run to ``waiting`` and let go of it."""
    state.journal.release()
    state.journal.wait_for_approvals(instance, step=step, asks=list(asks.values()))
    raise RunWaiting()


def denied(approval: ToolApproval) -> ToolOutcome:
    """A call that was not approved, as the model reads it: who or what decided, and why."""
    text = WHY_DENIED.get(approval.status, "This call was not approved")
    reason = approval.reason.strip()
    if approval.status == ToolApproval.Status.DENIED and reason:
        text += f", saying: {reason}"
    return ToolOutcome("denied", f"[denied] {text}. The tool was not called. Go on without it, or ask the person.")


def settled(state: RunState, instance: Instance, call: ToolCall, tool: Tool | None,
            approval: ToolApproval, context: ToolContext) -> ToolOutcome | None:
    """The outcome of a call that waited, on the attempt after its decision; None while it
    still waits."""
    if approval.status == ToolApproval.Status.AWAITING:
        return None
    if approval.status != ToolApproval.Status.APPROVED:
        return denied(approval)
    if tool is None:
        return ToolOutcome("error", f"This agent has no tool named {call.name!r}.")
    if approval.started_at is not None or not state.journal.approved_call_starts(approval.pk):
        return ToolOutcome("unknown", STARTED_BEFORE)
    state.journal.emit("tool_started", {"call_id": call.id, "name": call.name})
    return tool_invoke(tool, call.arguments, context) or ToolOutcome("unknown", STARTED_BEFORE)
