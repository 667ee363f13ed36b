"""The opening of the question each run answered, for the runs on a session's console page.

The question is the person's words: ``run_questions`` reads them only for staff who may read
the session's records, after writing the access audit's row (``what="questions"``); the
page shows each as its first words, on one line, escaped like any text of the admin.
"""
from __future__ import annotations

from typing import Any

from sessions.admin.display import content_text
from sessions.admin.reads import session_run_questions
from sessions.models import Session, SessionMessage
from sessions.services.access_audit import read_audited
from sessions.staff import staff_may_read

QUESTION_OPENING_CHARS = 90


def question_opening(message: Any, *, limit: int = QUESTION_OPENING_CHARS) -> str:
    """The start of a question for a list: its text on one line, cut at a word with "…"
    when longer than ``limit``; "" for a record with no text (an image alone shows its note)."""
    content = message.get("content") if isinstance(message, dict) else None
    line = " ".join(content_text(content).split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] if " " in line[:limit] else line[:limit]
    return cut.rstrip(" ,.;:") + "…"


def run_questions(*, user: Any, session: Session) -> dict[int, str] | None:
    """The opening of each run's question by run id, read under the audit; None when
    ``user`` may not read the session's records (nothing read, nothing audited)."""
    if not staff_may_read(user=user, row_model=Session, content_model=SessionMessage):
        return None
    with read_audited(user=user, audited=True, what="questions", session=session):
        return {run_id: question_opening(message) for run_id, message in session_run_questions(session=session).items()}
