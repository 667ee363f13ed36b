"""Console actions call the services: manual compaction (CTX-43), stop (LOOP-7), resume (RUN-4)."""
from __future__ import annotations

import pytest
from django.contrib.admin import helpers

from sessions.models import Run
from sessions.services.questions import question_ask

pytestmark = pytest.mark.django_db


def act(console, model: str, action: str, ids: list[int]):
    return console.post(f"/admin/agent_sessions/{model}/", {"action": action, helpers.ACTION_CHECKBOX_NAME: ids},
                        follow=True)


def test_compact_now_queues_a_manual_compaction_of_a_finished_session(console, story, dispatched_compactions,
                                                                      django_capture_on_commit_callbacks):
    from tests.admin_console.conftest import finish

    finish(story.second)
    with django_capture_on_commit_callbacks(execute=True):
        response = act(console, "session", "compact_now", [story.session.pk])
    assert f"compaction queued for run {story.second.pk}" in response.content.decode()
    assert dispatched_compactions == [story.second.pk]


def test_compact_now_on_a_working_session_asks_the_loop(console, story, dispatched_compactions):
    response = act(console, "session", "compact_now", [story.session.pk])
    assert "will compact at its next step" in response.content.decode()
    assert dispatched_compactions == []


def test_stop_ends_a_queued_run_and_asks_a_running_one_to_stop(console, story, make_session, alice):
    queued = question_ask(session=make_session(alice), content="Wait")
    response = act(console, "run", "stop_runs", [queued.pk, story.second.pk, story.first.pk])
    queued.refresh_from_db()
    story.second.refresh_from_db()
    assert queued.status == Run.Status.CANCELLED
    assert story.second.status == Run.Status.RUNNING and story.second.cancel_requested
    assert "(stop requested)" in response.content.decode()


def test_resume_requeues_a_stopped_run_and_explains_a_refusal(console, story, dispatched_runs,
                                                              django_capture_on_commit_callbacks):
    from sessions.services.runs import run_finish

    run_finish(run=story.second, status=Run.Status.CANCELLED)
    with django_capture_on_commit_callbacks(execute=True):
        response = act(console, "run", "resume_runs", [story.second.pk, story.first.pk]).content.decode()
    story.second.refresh_from_db()
    assert story.second.status == Run.Status.QUEUED and dispatched_runs == [story.second.pk]
    assert "A completed run cannot be resumed." in response
