"""``delegate``: hand a sub-task to a sub-agent (RUN-3).

The run loop executes it — a sub-instance with its own context, the same model and
policy, its own counters — and returns the sub-agent's answer as this call's result.
The registry entry carries the schema and flags; calling ``run`` directly is a bug.
"""
from __future__ import annotations

from agents.tool_registry import Tool, ToolError, register


def _run(arguments: dict, context) -> str:
    raise ToolError("delegate is run by the run loop, not as a plain tool")


delegate = register(Tool(
    name="delegate",
    description="Hand a self-contained sub-task to a sub-agent and get its answer back. "
                "Describe the task fully: the sub-agent does not see this conversation.",
    parameters={"type": "object", "properties": {"task": {"type": "string"}},
                "required": ["task"], "additionalProperties": False},
    run=_run,
    idempotent=False,
    read_only=True,
    delegates=True,
    timeout_seconds=600,
))
