"""Reads of a tool server's questions to the person (TOOL-10). Nothing here writes."""
from __future__ import annotations

from typing import Any

from sessions.models import Run, ToolInput


def tool_input_read(*, input_id: int) -> ToolInput:
    """The question as it is now (the waiting thread polls it: one query by primary key)."""
    return ToolInput.objects.get(pk=input_id)


def inputs_waiting(*, run: Run) -> list[ToolInput]:
    """The run's questions nobody has answered yet (the chat page shows them when opened)."""
    return list(ToolInput.objects.filter(run=run, status=ToolInput.Status.AWAITING).order_by("id"))


def sessions_asked(*, user: Any) -> set[int]:
    """The sessions of this person where a tool server waits for their answer (the sessions
    list marks them, beside those whose run waits for an approval)."""
    return set(ToolInput.objects.filter(status=ToolInput.Status.AWAITING, session__user=user)
               .values_list("session_id", flat=True))
