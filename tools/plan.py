"""``update_plan``: the agent's checklist of steps, each with a status (LOOP-4, CTX-31/36).

Long runs need a plan that survives compaction. The agent writes its whole plan each time
(steps in order, each ``pending``, ``in_progress`` or ``done``); it is kept in the
instance's frame, carried verbatim into every compacted view by the runtime-state block,
shown live in the chat beside the run (a ``plan_updated`` event), and handed to the
completion check (LOOP-9) as the task's plan.

``pin`` (CTX-50): record seqs of main-line messages the agent wants kept verbatim through
every compaction -- a standing instruction, a decision, a result it will need again. The
agent names a message by its record seq, the number ``read_record`` takes and that the
platform's notes show (a folded tool result, a cut output, a pinned quote). Pins are checked
and written with the plan, all or nothing; the agent pins, only the person unpins.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.tool_registry import Tool, ToolError, register
from core.errors import ValidationFailed
from sessions.frames import PLAN_STATUSES, PlanStep, plan_text
from sessions.models import Instance
from sessions.services.events import event_emit
from sessions.services.frames import plan_set
from sessions.services.pins import pins_by_agent

MAX_STEPS = 50
MAX_STEP_CHARS = 500
MAX_PINS = 20  # seqs one call may pin


def _unchanged(value: Any) -> Any:
    return value


def _steps(arguments: dict[str, Any]) -> list[PlanStep]:
    steps = arguments["steps"]
    if len(steps) > MAX_STEPS:
        raise ToolError(f"A plan has at most {MAX_STEPS} steps.")
    out: list[PlanStep] = []
    for number, item in enumerate(steps, 1):
        if not isinstance(item, dict):
            raise ToolError(f"Step {number} must be an object with 'step' and 'status'.")
        text, status = item.get("step"), item.get("status", "pending")
        if not isinstance(text, str) or not text.strip():
            raise ToolError(f"Step {number} needs a non-empty 'step' text.")
        if len(text) > MAX_STEP_CHARS:
            raise ToolError(f"Step {number} is longer than {MAX_STEP_CHARS} characters.")
        if status not in PLAN_STATUSES:
            raise ToolError(f"Step {number} has status {status!r}; use one of {', '.join(PLAN_STATUSES)}.")
        out.append(PlanStep(step=text.strip(), status=status))
    if sum(step["status"] == "in_progress" for step in out) > 1:
        raise ToolError("Only one step can be in progress at a time.")
    return out


def _pin_seqs(arguments: dict[str, Any], context) -> list[Any]:
    seqs = arguments.get("pin") or []
    if not isinstance(seqs, list) or len(seqs) > MAX_PINS:
        raise ToolError(f"'pin' is a list of at most {MAX_PINS} record seqs.")
    if seqs and Instance.objects.filter(pk=context.instance_id, parent_id__isnull=False).exists():
        raise ToolError("Only the main agent can pin messages of the conversation; a sub-agent cannot.")
    return seqs


def _run(arguments: dict[str, Any], context) -> str:
    # Stored in the frame and announced: redacted like a record (LOOP-8).
    steps = _steps(context.services.get("redact", _unchanged)(arguments))
    seqs = _pin_seqs(arguments, context)
    # The frame, the pins and the event in the run's own transaction, which writes only
    # while the run is still this worker's (RunLost otherwise, and nothing is written).
    with context.services.get("owned", transaction.atomic)():
        try:  # CTX-50: a seq that names no main-line message fails the call, plan and all
            pinned = pins_by_agent(session_id=context.session_id, seqs=seqs) if seqs else []
        except ValidationFailed as exc:
            raise ToolError(f"Cannot pin: {exc.message} ({', '.join(exc.fields.values())})") from None
        instance = plan_set(instance_id=context.instance_id, steps=steps)
        event_emit(run_id=context.run_id, type="plan_updated",
                   data={"instance": instance, "steps": steps, **({"pinned": pinned} if pinned else {})})
    done = sum(step["status"] == "done" for step in steps)
    note = (f"\nPinned (kept verbatim through compaction): record seq {', '.join(map(str, seqs))}."
            if seqs else "")
    return f"Plan saved ({len(steps)} steps, {done} done):\n{plan_text(steps) or '(empty)'}{note}"


update_plan = register(Tool(
    name="update_plan",
    description="Write your plan for this task as a checklist: every step in order, each with a status "
                "(pending, in_progress, done). Send the whole plan each time; keep one step in progress. "
                "Optionally 'pin' messages you must not lose when older history is summarized (a standing "
                "instruction, a decision, a result you will need again), by record seq as read_record takes it.",
    parameters={"type": "object", "properties": {"steps": {"type": "array", "items": {
        "type": "object", "properties": {
            "step": {"type": "string"},
            "status": {"type": "string", "enum": list(PLAN_STATUSES)}},
        "required": ["step", "status"], "additionalProperties": False}},
        "pin": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": MAX_PINS,
                "description": "Record seqs of messages of this conversation to keep verbatim."}},
        "required": ["steps"], "additionalProperties": False},
    run=_run,
    idempotent=True,
    read_only=True,  # writing the same plan twice leaves the same plan
    timeout_seconds=10,
))
