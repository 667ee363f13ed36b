"""Reads of approvals (TOOL-8/9): what a run waits for, whose sessions wait, and the
tools a person approved for a whole session."""
from __future__ import annotations

from typing import Any

from sessions.models import Run, ToolApproval


def approvals_waiting(*, run: Run) -> list[ToolApproval]:
    """The run's calls that wait for a decision, in call order."""
    return list(ToolApproval.objects.filter(run=run, status=ToolApproval.Status.AWAITING)
                .order_by("step", "index"))


def approvals_of_run(*, run: Run) -> list[ToolApproval]:
    """Every decision and request of a run, oldest first (the console's record)."""
    return list(ToolApproval.objects.filter(run=run).select_related("decided_by").order_by("step", "index"))


def approvals_of_step(*, run_id: int, instance_id: int, step: int) -> dict[int, ToolApproval]:
    """A step's approvals by the call's position."""
    return {row.index: row for row in ToolApproval.objects.filter(run_id=run_id, instance_id=instance_id, step=step)}


def tools_approved_for_session(*, session_id: int) -> set[str]:
    """The tools a person approved "for this session" (TOOL-8)."""
    return set(ToolApproval.objects.filter(session_id=session_id, scope=ToolApproval.Scope.SESSION,
                                           status=ToolApproval.Status.APPROVED).values_list("tool", flat=True))


def sessions_waiting_for(*, user: Any) -> set[int]:
    """The sessions of this person whose run waits for them."""
    return set(Run.objects.filter(user=user, status=Run.Status.WAITING).values_list("session_id", flat=True))
