"""A waiting tool call as the chat shows it (SPEC §7b, TOOL-8): the card with the tool as
people know it, what the tool does, the call's arguments, why it waits, and the three
decisions. The browser builds the same card from an ``approval_requested`` event
(static/web/approvals.js); this is the card of a page opened while the run still waits —
an hour later, on another device — read from the approvals themselves, not from events.

The words are the product's promise, so they live here once and the page hands them to
the script (``APPROVAL_WORDS``): a waiting call has not run, and a decided one says what
was decided, never more.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from agents.server_tools import frozen_server_tools
from agents.tool_registry import tool_description
from sessions.models import Run, ToolApproval
from sessions.selectors.approvals import approvals_waiting
from web.step_text import arguments_pretty
from web.tool_labels import tool_label, tool_labels
from web.transcript import RESUMED_NOTICE

WAITING_WORDS = "Waiting for your approval — nothing has run yet."
# The status line while a run waits for a person (never "running", never "complete").
RUN_WAITING_WORDS = "Waiting for you: a tool call needs your approval before the agent goes on."
SESSION_WAITING_WORDS = "Waiting for you"  # the sessions list's mark, rendered and live
AWAITING_STEP_WORDS = "waiting for you"  # the status of the call's step meanwhile
APPROVED_FOR_SESSION_WORDS = "Approved for this session — running now"
RAN_WORDS = "Approved — it ran (its result is in the step above)"
# Every waiting call is decided: the run is queued again and its worker goes on.
GOES_ON_WORDS = "Decided — the agent goes on…"


def decided_words(decision: str, reason: str = "", *, hours: int | None = None) -> str:
    """What a card says once its call is decided (``approval_decided``'s ``decision``)."""
    if decision == ToolApproval.Status.APPROVED:
        return "Approved — running now"
    if decision == ToolApproval.Status.DENIED:
        return f"Denied: {reason}" if reason else "Denied"
    if decision == ToolApproval.Status.EXPIRED:
        hours = settings.AGENTLOOM_APPROVAL_HOURS if hours is None else hours
        return f"Expired: nobody decided within {hours} hour{'' if hours == 1 else 's'}"
    if decision == ToolApproval.Status.STOPPED:
        return "Stopped with the run"
    return WAITING_WORDS


def approval_words() -> dict[str, Any]:
    """What the chat's script words cards with, as this module words them."""
    hours = settings.AGENTLOOM_APPROVAL_HOURS
    return {"waiting": WAITING_WORDS, "runWaiting": RUN_WAITING_WORDS, "sessionWaiting": SESSION_WAITING_WORDS,
            "approved": decided_words(ToolApproval.Status.APPROVED),
            "approvedSession": APPROVED_FOR_SESSION_WORDS, "ran": RAN_WORDS, "goesOn": GOES_ON_WORDS,
            "denied": decided_words(ToolApproval.Status.DENIED),
            "deniedBecause": decided_words(ToolApproval.Status.DENIED, "{reason}"),
            "expired": decided_words(ToolApproval.Status.EXPIRED, hours=hours),
            "stopped": decided_words(ToolApproval.Status.STOPPED)}


@dataclass(frozen=True)
class ApprovalCard:
    """One waiting call: what the card shows and what its buttons send (``call_id``)."""

    call_id: str
    tool: str  # the function name the model called
    label: str  # the tool as people know it (``git · log``)
    description: str
    arguments: str  # indented JSON, escaped by the template
    why: str
    status: str = ToolApproval.Status.AWAITING

    @property
    def waiting(self) -> bool:
        return self.status == ToolApproval.Status.AWAITING

    @property
    def words(self) -> str:
        return WAITING_WORDS if self.waiting else decided_words(self.status)


def decision_note(approval: ToolApproval) -> str:
    """What a finished run's step says of its call's approval (the step's status says the rest)."""
    if approval.status == ToolApproval.Status.APPROVED:
        return ("You approved this tool for the rest of this session." if approval.scope == ToolApproval.Scope.SESSION
                else "You approved this call.")
    if approval.status == ToolApproval.Status.DENIED:
        return f"You denied this call: {approval.reason}" if approval.reason else "You denied this call."
    return decided_words(approval.status) + "."


def went_on_words(approval: ToolApproval) -> str:
    """What the run's records call "Resumed." once its calls were decided: the run went on
    by itself, nobody pressed Resume."""
    if approval.status == ToolApproval.Status.EXPIRED:
        return "Nobody decided in time, so the agent went on without the call."
    return "The agent went on after your decision."


def decision_notes(*, run_ids: list[int]) -> dict[int, dict[str, tuple[str, str]]]:
    """Each run's decided calls, by call id: the step's note and the words of the run
    going on (one query for a page)."""
    notes: dict[int, dict[str, tuple[str, str]]] = {}
    for approval in (ToolApproval.objects.filter(run_id__in=run_ids, status__in=ToolApproval.DECIDED)
                     .order_by("run_id", "step", "index")):
        notes.setdefault(approval.run_id, {})[approval.call_id] = (decision_note(approval), went_on_words(approval))
    return notes


def steps_with_decisions(items: list[Any], notes: Mapping[str, tuple[str, str]]) -> None:
    """Each step whose call asked says what was decided, and the "Resumed." the records
    put right after the decided calls says the run went on (it was not a Resume)."""
    went_on = ""
    for item in items:
        if item.kind == "step" and item.call_id in notes:
            item.approval, went_on = notes[item.call_id]
        elif item.kind == "notice" and item.text == RESUMED_NOTICE and went_on:
            item.text = went_on
        if item.kind != "step":
            went_on = ""


def tool_descriptions(frozen: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Function name → description of each frozen server tool of a version."""
    return {str(entry["function"]): str(entry.get("description") or "") for entry in frozen
            if isinstance(entry.get("function"), str)}


def approval_cards(*, run: Run) -> list[ApprovalCard]:
    """The cards of ``run``'s calls that wait for a decision, in call order; none for a run
    that is not waiting (a decided call's outcome is its step's result)."""
    if run.status != Run.Status.WAITING:
        return []
    waiting = approvals_waiting(run=run)
    if not waiting:
        return []
    frozen = frozen_server_tools(run.version)
    labels, descriptions = tool_labels(frozen), tool_descriptions(frozen)
    return [ApprovalCard(call_id=approval.call_id, tool=approval.tool,
                         # As the call's step names it (" · "), else as the loop recorded it.
                         label=labels.get(approval.tool) or approval.label or tool_label(approval.tool, labels),
                         description=descriptions.get(approval.tool) or tool_description(approval.tool),
                         arguments=arguments_pretty(approval.arguments), why=approval.why)
            for approval in waiting]
