"""``memory``: the agent's memory of the person across sessions (SPEC §7c, MEM-2).

The commands of Anthropic's memory tool over files under ``/memories``; on the Anthropic
wire the native tool is offered instead of this schema (``runloop.state``). It is not
picked from the tool list: a run has it when its version has memory and its person uses
it (``Run.memory`` is then set). Its memory is the run's person's, for the run's agent:
the owner is read from the run, never from the arguments.

A write happens only while the run is this worker's (the journal's ``owned``
transaction): a worker that lost its run writes nothing. A write past the bound is the
tool's error, saying how much room is left (``memory.files``).
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.tool_registry import Tool, ToolError, register
from memory.files import TOOL_DESCRIPTION, TOOL_PARAMETERS, MemoryCommandError
from memory.models import MemoryChange
from memory.selectors import MemoryOwner
from memory.services import memory_command
from sessions.models import Run

NAME = "memory"


def _owner(context) -> MemoryOwner:
    row = Run.objects.filter(pk=context.run_id).values("user_id", "space_id", "version__agent_id").first()
    if row is None or row["user_id"] is None or row["space_id"] is None:
        raise ToolError("Memory is not available in this conversation.")
    return MemoryOwner(space_id=row["space_id"], agent_id=row["version__agent_id"], user_id=row["user_id"])


def _run(arguments: dict[str, Any], context) -> str:
    owner = _owner(context)
    try:
        if arguments.get("command") == "view":
            return memory_command(owner=owner, arguments=arguments, by=MemoryChange.By.AGENT)
        with context.services.get("owned", transaction.atomic)():
            return memory_command(owner=owner, arguments=arguments, by=MemoryChange.By.AGENT,
                                  session_id=context.session_id, run_id=context.run_id)
    except MemoryCommandError as exc:
        raise ToolError(str(exc)) from None


memory_tool = register(Tool(
    name=NAME,
    description=TOOL_DESCRIPTION,
    parameters=TOOL_PARAMETERS,
    run=_run,
    idempotent=False,  # an insert made twice is two inserts
    reads=lambda arguments: arguments.get("command") == "view",
    choosable=False,
    asks_because="This call changes what the agent remembers about you across conversations.",
    timeout_seconds=15,
))
