"""Reads of a session's attached files (RUN-13). Nothing here writes."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core.errors import NotFound
from sessions.models import Session, SessionFile


def file_get_for_user(*, file_id: Any, user) -> SessionFile:
    """An attached file when ``user`` may read its session (the rule of
    ``session_get_for_user``); NotFound (404) for anyone else (RUN-13)."""
    try:
        return SessionFile.objects.select_related("session").get(
            pk=int(file_id), session__user=user, session__space__memberships__user=user)
    except (SessionFile.DoesNotExist, TypeError, ValueError, OverflowError):
        raise NotFound("File not found.") from None


def session_files(*, session: Session) -> QuerySet[SessionFile]:
    """The session's attached files, oldest first, without their bytes or text."""
    return SessionFile.objects.filter(session=session).defer("data", "text").order_by("id")
