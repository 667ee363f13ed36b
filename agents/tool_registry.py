"""The tool registry (LOOP-4): what a tool is, and which tools agents may choose.

A tool is a plain function ``(arguments, context) -> str | list[content parts] | ToolResult``
with JSON-schema parameters (checked by a JSON-Schema library before it runs) and flags:
``idempotent`` (re-run on resume, RUN-6), ``observes_screen`` (CTX-8), ``delegates`` (run by
the loop as a sub-agent, RUN-3), a
time-out and an output cap. It raises ``ToolError`` for a failure the model should read.

The registry belongs to the agents domain: drafts are validated against it. The built-in
tools live in ``tools`` and register themselves when that package loads (the
run loop's app loads it at start-up); running them is ``tools.invoke``.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Content = str | list[dict[str, Any]]


class ToolError(Exception):
    """A failure to report to the model as the tool's result (``status: error``)."""


class ToolCancelled(Exception):
    """Raised by a tool that noticed ``context.cancelled()`` and stopped."""


class ToolOutcomeUnknown(Exception):
    """Raised by a tool that cannot know whether its effect happened (a server tool whose
    session was lost mid-call, or that was abandoned after a Stop). With a message, the call
    gets an ``unknown`` result saying so; after a Stop it is left without one (LOOP-7) and a
    resume records it as unknown, never repeating it (RUN-6)."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "outcome unknown")
        self.message = message


@dataclass(frozen=True)
class ToolResult:
    """A result with more than content: ``structured`` (a server tool's
    ``structuredContent``, TOOL-4) is kept in the record beside it."""

    content: Content
    structured: dict[str, Any] | None = None


@dataclass
class ToolContext:
    """What a running tool may know: where it runs, and whether it should stop."""

    run_id: int
    session_id: int
    instance_id: int
    call_id: str = ""
    cancel_event: threading.Event = field(default_factory=threading.Event)
    services: dict[str, Any] = field(default_factory=dict)

    def cancelled(self) -> bool:
        return self.cancel_event.is_set()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], Content | ToolResult]
    idempotent: bool
    observes_screen: bool = False
    delegates: bool = False  # the loop runs it as a sub-agent instead of calling ``run``
    # TOOL-7: whether a call waits for a person's approval — ``never``, ``side_effects``
    # (every call unless ``read_only``) or ``always`` — as the version froze it; and whether
    # the tool only reads (a server tool's ``readOnlyHint``; the built-ins that change nothing).
    approval: str = "never"
    read_only: bool = False
    # For a tool whose commands differ (``memory``: ``view`` reads, the rest write): whether
    # a call with these arguments only reads. ``side_effects`` then asks for the others only.
    reads: Callable[[dict[str, Any]], bool] | None = None
    # Whether an admin picks it from the list; ``memory`` comes with the agent's memory (MEM-2).
    choosable: bool = True
    # Why a call that changes something asks, when the general words would mislead (TOOL-7).
    asks_because: str = "This tool may change something outside the chat."
    timeout_seconds: float = 30.0
    # Characters of one result kept in the records; past it, head and tail (CTX-7). The
    # model view shows at most 24,000 of them and read_record pages through the rest.
    output_limit: int = 1_000_000

    def repeatable(self, arguments: dict[str, Any] | None) -> bool:
        """Whether a call with ``arguments`` left without a result may be made again on
        resume (RUN-6): the tool is idempotent, or this call only reads (``memory``'s view)."""
        return self.idempotent or (self.reads is not None and arguments is not None and self.reads(arguments))

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolOutcome:
    status: str  # ok | error | cancelled | timeout | unknown
    content: Content
    structured: dict[str, Any] | None = None
    # In its place when it was over the storage cap: {"characters", "limit"} (TOOL-4, CTX-7).
    structured_omitted: dict[str, int] | None = None


# TOOL-7: a tool's approval policy. Server tools default to ``side_effects``; built-ins to
# ``never`` (an admin may set any of them, ``http_fetch`` most usefully).
APPROVAL_POLICIES = ("never", "side_effects", "always")
DEFAULT_SERVER_APPROVAL = "side_effects"
DEFAULT_BUILTIN_APPROVAL = "never"


def arguments_object(raw: str | None) -> dict[str, Any] | None:
    """A call's arguments when they are a JSON object; None otherwise."""
    try:
        parsed = json.loads(raw or "{}")
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def approval_needed(tool: Tool, arguments: dict[str, Any] | None = None) -> str:
    """Why a call of ``tool`` (with ``arguments``, when known) waits for a person (TOOL-7),
    in words; "" when it does not."""
    if tool.approval == "always":
        return "This tool asks before every call."
    reads = tool.read_only or (tool.reads is not None and arguments is not None and tool.reads(arguments))
    if tool.approval == "side_effects" and not reads:
        return tool.asks_because
    return ""


registry: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    registry[tool.name] = tool
    return tool


def tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """Schemas of the named tools, in the agent's order; unknown names are skipped."""
    return [registry[name].schema() for name in names if name in registry]


def tool_names_available() -> list[str]:
    """Tool names an agent may choose."""
    return sorted(name for name, tool in registry.items() if tool.choosable)


def tool_names_reserved() -> list[str]:
    """Every built-in's name, chosen or given (``memory``): no server tool may take one."""
    return sorted(registry)


def tool_description(name: str) -> str:
    """What a built-in tool does, as the model reads it (the console's picker shows it too)."""
    tool = registry.get(name)
    return tool.description if tool is not None else ""
