"""Running a tool (LOOP-4): argument checks, its time-out, Stop, and an output cap.

Any exception a tool raises is caught, so a broken tool gives a result with
``status: error`` and never crashes the run.
"""
from __future__ import annotations

import json
import logging
import threading
from typing import Any

from django.db import connections

from agentloom.agents.tool_registry import (
    Tool,
    ToolCancelled,
    ToolContext,
    ToolError,
    ToolOutcome,
)
from context.truncation import cap_for_storage

logger = logging.getLogger("agentloom.tools")


def _check_arguments(tool: Tool, raw: str) -> dict[str, Any]:
    try:
        arguments = json.loads(raw or "{}")
    except ValueError:
        raise ToolError("The arguments are not valid JSON.") from None
    if not isinstance(arguments, dict):
        raise ToolError("The arguments must be a JSON object.")
    properties = tool.parameters.get("properties", {})
    for name in tool.parameters.get("required", []):
        if name not in arguments:
            raise ToolError(f"Missing required argument {name!r}.")
    for name, value in arguments.items():
        spec = properties.get(name)
        if spec is None:
            if tool.parameters.get("additionalProperties", True) is False:
                raise ToolError(f"Unknown argument {name!r}.")
            continue
        expected = spec.get("type")
        checks = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}
        if expected in checks and (not isinstance(value, checks[expected]) or
                                   (expected in {"integer", "number"} and isinstance(value, bool))):
            raise ToolError(f"Argument {name!r} must be of type {expected}.")
    return arguments


def tool_invoke(tool: Tool, raw_arguments: str, context: ToolContext, *, poll: float = 0.05,
                cancel_grace: float = 2.0) -> ToolOutcome | None:
    """Run a tool with its time-out, watching for cancellation.

    Returns the outcome, or None when the run was cancelled and the tool did not stop
    within ``cancel_grace``: its effect cannot be known, so no result is invented
    (LOOP-7; the projector later shows it as an unknown outcome, CTX-3).
    """
    try:
        arguments = _check_arguments(tool, raw_arguments)
    except ToolError as exc:
        return ToolOutcome("error", str(exc))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["content"] = tool.run(arguments, context)
        except ToolCancelled:
            box["cancelled"] = True
        except ToolError as exc:
            box["error"] = str(exc)
        except Exception as exc:  # a broken tool must not crash the run (LOOP-4)
            logger.exception("tool %s raised", tool.name)
            box["error"] = f"The tool failed: {type(exc).__name__}."
        finally:
            connections.close_all()  # a tool that read the database leaves no connection behind

    worker = threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True)
    worker.start()
    waited = 0.0
    cancelled_at: float | None = None
    while worker.is_alive():
        worker.join(poll)
        waited += poll
        if cancelled_at is None and context.services.get("should_cancel", lambda: False)():
            context.cancel_event.set()
            cancelled_at = waited
        if cancelled_at is not None and waited - cancelled_at >= cancel_grace and worker.is_alive():
            return None
        if cancelled_at is None and waited >= tool.timeout_seconds and worker.is_alive():
            context.cancel_event.set()
            return ToolOutcome("timeout", f"The tool did not finish within {tool.timeout_seconds:g} seconds.")
    if box.get("cancelled") or (cancelled_at is not None and "content" not in box):
        return ToolOutcome("cancelled", "Stopped by the user before the tool finished.")
    if "error" in box:
        return ToolOutcome("error", box["error"])
    return ToolOutcome("ok", cap_for_storage(box.get("content", ""), tool.output_limit))
