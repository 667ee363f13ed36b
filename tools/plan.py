"""``update_plan``: the agent's checklist of steps, each with a status (LOOP-4, CTX-31/36).

Long runs need a plan that survives compaction. The agent writes its whole plan each time
(steps in order, each ``pending``, ``in_progress`` or ``done``); it is kept in the
instance's frame, carried verbatim into every compacted view by the runtime-state block,
shown live in the chat beside the run (a ``plan_updated`` event), and handed to the
completion check (LOOP-9) as the task's plan.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.tool_registry import Tool, ToolError, register
from sessions.frames import PLAN_STATUSES, PlanStep, plan_text
from sessions.services.events import event_emit
from sessions.services.frames import plan_set

MAX_STEPS = 50
MAX_STEP_CHARS = 500


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


def _run(arguments: dict[str, Any], context) -> str:
    # Stored in the frame and announced: redacted like a record (LOOP-8).
    steps = _steps(context.services.get("redact", _unchanged)(arguments))
    # The frame and its event in the run's own transaction, which writes only while the run
    # is still this worker's (RunLost otherwise, and nothing is written).
    with context.services.get("owned", transaction.atomic)():
        instance = plan_set(instance_id=context.instance_id, steps=steps)
        event_emit(run_id=context.run_id, type="plan_updated", data={"instance": instance, "steps": steps})
    done = sum(step["status"] == "done" for step in steps)
    return f"Plan saved ({len(steps)} steps, {done} done):\n{plan_text(steps) or '(empty)'}"


update_plan = register(Tool(
    name="update_plan",
    description="Write your plan for this task as a checklist: every step in order, each with a status "
                "(pending, in_progress, done). Send the whole plan each time; keep one step in progress.",
    parameters={"type": "object", "properties": {"steps": {"type": "array", "items": {
        "type": "object", "properties": {
            "step": {"type": "string"},
            "status": {"type": "string", "enum": list(PLAN_STATUSES)}},
        "required": ["step", "status"], "additionalProperties": False}}},
        "required": ["steps"], "additionalProperties": False},
    run=_run,
    idempotent=True,  # writing the same plan twice leaves the same plan
    timeout_seconds=10,
))
