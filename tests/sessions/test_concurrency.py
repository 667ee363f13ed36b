"""Concurrency on PostgreSQL: fifty simultaneous questions on one session (RUN-1)."""
from __future__ import annotations

import pytest

from core.errors import ActiveRunConflict
from sessions.models import Run, SessionMessage
from sessions.services.questions import question_ask
from tests.foundation.test_concurrency import _in_threads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


def test_run1_fifty_simultaneous_questions_exactly_one_is_accepted(make_session, alice):
    session = make_session(alice)
    results = _in_threads(50, lambda index: question_ask(session=session, content=f"question {index}"))
    accepted = [r for r in results if isinstance(r, Run)]
    refused = [r for r in results if isinstance(r, ActiveRunConflict)]
    assert len(accepted) == 1 and len(refused) == 49, [
        r for r in results if not isinstance(r, (Run, ActiveRunConflict))]
    assert Run.objects.filter(session=session).count() == 1
    assert list(SessionMessage.objects.filter(session=session).values_list("seq", "kind")) == [(1, "user")]
