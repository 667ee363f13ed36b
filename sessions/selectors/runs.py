"""Reads of a run for the person who asked it. Nothing here writes."""
from __future__ import annotations

from typing import Any

from core.errors import NotFound
from sessions.models import Run


def run_get_for_user(*, run_id: Any, user) -> Run:
    """The run when ``user`` created its session and is still a member of its space."""
    try:
        return Run.objects.select_related("session", "version").get(
            pk=int(run_id), session__user=user, session__space__memberships__user=user)
    except (Run.DoesNotExist, TypeError, ValueError):
        raise NotFound("Run not found.") from None


def run_visible_to(*, run_id: int, user_id: int) -> str | None:
    """The run's status while ``user_id`` may still see it (creator and member), else None.

    One indexed query, for streams that re-check their reader while they stay open.
    """
    return (Run.objects.filter(pk=run_id, session__user_id=user_id, session__space__memberships__user_id=user_id)
            .values_list("status", flat=True).first())
