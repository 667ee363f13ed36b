"""What the chat's status line is told when a run ends: a completed run whose answer the
output limit cut, or a run that failed on an empty answer, is never "Answer complete."
(the fragment's ``ending`` names the case; chat.js words it, tests/browser/test_chat_empty_and_cut.py)."""
from __future__ import annotations

import pytest

from sessions.models import Run
from tests.web.conftest import finished_run

pytestmark = pytest.mark.django_db


def fragment(client, run: Run) -> dict:
    response = client.get(f"/chat/runs/{run.pk}/fragment")
    assert response.status_code == 200
    return response.json()


def test_a_cut_answer_ends_as_cut_not_complete(client_for, alice, make_session):
    run = finished_run(make_session(alice), steps=[{"content": "The first half", "finish_reason": "length"}])
    data = fragment(client_for(alice), run)
    assert (data["status"], data["ending"]) == ("completed", "cut")


def test_a_whole_answer_ends_plainly(client_for, alice, make_session):
    data = fragment(client_for(alice), finished_run(make_session(alice)))
    assert (data["status"], data["ending"]) == ("completed", "")


def test_an_empty_answer_ends_as_empty_answer(client_for, alice, make_session):
    error = {"code": "empty_answer", "message": "The model returned an empty answer.", "retryable": True}
    run = finished_run(make_session(alice), steps=[], status=Run.Status.FAILED, error=error)
    data = fragment(client_for(alice), run)
    assert (data["status"], data["ending"]) == ("failed", "empty_answer")
