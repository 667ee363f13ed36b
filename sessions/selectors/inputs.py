"""Reads of a tool server's questions to the person (TOOL-10). Nothing here writes."""
from __future__ import annotations

from sessions.models import Run, ToolInput


def tool_input_read(*, input_id: int) -> ToolInput:
    """The question as it is now (the waiting thread polls it: one query by primary key)."""
    return ToolInput.objects.get(pk=input_id)


def inputs_waiting(*, run: Run) -> list[ToolInput]:
    """The run's questions nobody has answered yet (the chat page shows them when opened)."""
    return list(ToolInput.objects.filter(run=run, status=ToolInput.Status.AWAITING).order_by("id"))
