"""One thing at a time per session: an answer or a manual compaction (CTX-43, RUN-1)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from runloop.compaction_manual import compaction_manual
from sessions.models import Run, RunAttention
from sessions.services.manual_compaction import MANUAL_COMPACTION_HOLD_SECONDS
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.foundation.test_concurrency import _in_threads
from tests.sessions.helpers import answer, claim

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _answered(session) -> Run:
    run = claim(question_ask(session=session, content="Q1"))
    answer(run, "A1", "assistant-1")
    assert run_finish(run=run, status=Run.Status.COMPLETED)
    return run


def test_a_question_while_compact_now_runs_gets_a_409_that_says_to_wait(make_session, alice):
    session = make_session(alice)
    run = _answered(session)
    client = api(alice)
    assert client.post(f"/api/v1/sessions/{session.pk}/compact").status_code == 202
    response = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "Q2"}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "compaction_running" and "summarized" in error["message"]
    assert "send your question again" in error["message"]
    assert Run.objects.filter(session=session).count() == 1  # nothing changed
    # A second Compact now while the first runs is refused too, in words.
    again = client.post(f"/api/v1/sessions/{session.pk}/compact")
    assert again.status_code == 409 and again.json()["error"]["code"] == "compaction_running"
    # The worker is done (whatever came of it): questions are taken again.
    compaction_manual(run_id=run.pk)
    assert not Run.objects.get(pk=run.pk).attention & RunAttention.COMPACT
    assert client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "Q2"},
                       format="json").status_code == 202


def test_a_resume_while_compact_now_runs_is_refused(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Q1"))
    assert run_finish(run=run, status=Run.Status.CANCELLED, reason="stopped by user")
    client = api(alice)
    answer_row = Run.objects.get(pk=run.pk)
    assert answer_row.status == Run.Status.CANCELLED
    assert client.post(f"/api/v1/sessions/{session.pk}/compact").status_code == 202
    response = client.post(f"/api/v1/runs/{run.pk}/resume")
    assert response.status_code == 409 and response.json()["error"]["code"] == "compaction_running"
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED


def test_compact_now_while_an_answer_runs_gets_a_409_that_says_to_wait(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Q1"))
    response = api(alice).post(f"/api/v1/sessions/{session.pk}/compact")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "answer_running" and "Wait for it to finish" in error["message"]
    assert Run.objects.get(pk=run.pk).attention == 0  # nothing asked of the run


def test_compact_now_with_nothing_asked_says_there_is_nothing_to_summarize(make_session, alice):
    session = make_session(alice)
    response = api(alice).post(f"/api/v1/sessions/{session.pk}/compact")
    assert response.status_code == 409
    assert response.json()["error"] == {**response.json()["error"], "code": "nothing_to_compact",
                                        "message": "There is nothing to summarize yet: ask a question first."}


def test_compact_now_when_everything_is_summarized_says_so(make_session, alice):
    from sessions.models import SessionView

    session = make_session(alice)
    run = _answered(session)
    session.refresh_from_db()
    SessionView.objects.create(session=session, watermark=session.last_seq, messages=[], estimator_id="x",
                               source_run=run)
    response = api(alice).post(f"/api/v1/sessions/{session.pk}/compact")
    assert response.status_code == 409 and response.json()["error"]["code"] == "nothing_to_compact"
    assert "already summarized" in response.json()["error"]["message"]
    assert not Run.objects.get(pk=run.pk).attention & RunAttention.COMPACT


def test_a_hold_whose_worker_never_came_back_is_released(make_session, alice):
    session = make_session(alice)
    run = _answered(session)
    client = api(alice)
    assert client.post(f"/api/v1/sessions/{session.pk}/compact").status_code == 202
    Run.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=MANUAL_COMPACTION_HOLD_SECONDS + 1))
    assert client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "Q2"},
                       format="json").status_code == 202


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_a_question_and_compact_now_at_once_never_both_succeed(make_session, alice):
    from core.errors import Conflict
    from sessions.services.manual_compaction import compaction_request

    for _ in range(10):
        session = make_session(alice)
        _answered(session)

        def work(index: int, session=session):
            return question_ask(session=session, content="Q2") if index % 2 else compaction_request(
                session=session, while_answering="refuse")

        results = _in_threads(2, work)
        won = [r for r in results if not isinstance(r, Exception)]
        lost = [r for r in results if isinstance(r, Conflict)]
        assert len(won) == 1 and len(lost) == 1, results
