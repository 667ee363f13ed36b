"""Driving a run the way a worker does, in the test's own process."""
from __future__ import annotations

from runloop.loop import run_execute
from sessions.models import Run, Session
from sessions.services.questions import question_ask


def ask_and_run(session: Session, content: str) -> Run:
    """Ask a question and execute its run to the end; the run as it ended."""
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run
