"""Server tools as the run loop calls them (TOOL-3, TOOL-4, TOOL-5).

A published version froze each server tool (``agents.server_tools``); here each becomes a
``Tool`` of the registry's shape, named by its frozen function name, described and
schema'd byte for byte as frozen, idempotent as frozen, with its server's time-out. Calling
it goes through the run's ``RunToolSessions`` (one protocol session per server, opened by
``agents.server_tools.run_tool_sessions``), and the images of its result through
the upload rules (``tools.server_images``).
"""
from __future__ import annotations

from typing import Any

from agents.server_tools import frozen_server_tools
from agents.tool_registry import (
    DEFAULT_SERVER_APPROVAL,
    Tool,
    ToolCancelled,
    ToolContext,
    ToolError,
    ToolOutcomeUnknown,
    ToolResult,
)
from tools.server_images import server_images_check
from toolservers.sessions import CallRefused, CallStopped, CallUnknown, RunToolSessions

# Past the server's own time-out the SDK gives up first and cancels; ours is the backstop.
TIMEOUT_MARGIN = 5.0


def _noted(content: Any, notes: list[str]) -> Any:
    """The result with what became of the server's questions to the person (TOOL-10)."""
    if not notes:
        return content
    if isinstance(content, str):
        return "\n\n".join([content, *notes])
    return [*content, *({"type": "text", "text": note} for note in notes)]


def server_tools_build(*, version: Any, sessions: RunToolSessions) -> list[Tool]:
    """The version's server tools, in the order the agent chose them."""
    tools = []
    for entry in frozen_server_tools(version):
        def run(arguments: dict[str, Any], context: ToolContext, entry: dict[str, Any] = entry) -> ToolResult:
            try:
                result = sessions.call(entry, arguments, cancel=context.cancel_event,
                                       on_progress=context.services.get("progress"),
                                       ask=context.services.get("ask"))
            except CallRefused as exc:
                raise ToolError(str(exc)) from None
            except CallStopped:
                raise ToolCancelled() from None
            except CallUnknown as exc:
                raise ToolOutcomeUnknown(exc.message) from None
            notes = context.services.get("input_notes") or []
            if result.is_error:
                raise ToolError("\n\n".join([result.content if isinstance(result.content, str) else
                                              "\n".join(p.get("text", "") for p in result.content
                                                        if p.get("type") == "text"), *notes]))
            return ToolResult(_noted(server_images_check(result.content), notes), result.structured)

        timeout = sessions.timeout_of(entry["server_id"]) + TIMEOUT_MARGIN
        tools.append(Tool(name=entry["function"], description=entry["description"],
                          parameters=entry["input_schema"], run=run, idempotent=bool(entry["idempotent"]),
                          observes_screen=bool(entry.get("observes_screen")), timeout_seconds=timeout,
                          approval=entry.get("approval", DEFAULT_SERVER_APPROVAL),
                          read_only=(entry.get("annotations") or {}).get("readOnlyHint") is True))
    return tools
