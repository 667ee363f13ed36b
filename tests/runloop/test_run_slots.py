"""One person's runs never hold every worker thread (issue #44 item 6).

A person may have ``AGENTLOOM_MAX_RUNNING_RUNS_PER_USER`` runs running at once (a space's
people together ``…_PER_SPACE``). Further questions are accepted; their runs wait ``queued``,
marked and announced as waiting for the person's earlier runs, and start as those end:
woken by the end that frees a slot, or by the reaper's schedule when that wake was missed.
The bound is in the claim's one statement, after a lock per person, so workers racing for
one person's runs on PostgreSQL never run more than the bound. With a real worker whose
threads one person's long runs would fill, another person's question is answered while
they are still running.
"""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from core.spaces.services import membership_add
from runloop.housekeeping import Housekeeper
from runloop.tasks import dispatch_run
from sessions.models import Run, RunEvent, Session
from sessions.services.dispatch import dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_cancel, run_resume
from sessions.services.runs import run_claim, run_finish
from tests.fakes.fake_provider import chat_stream
from tests.runloop.worker import Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asks(space, mallory, agent, version):
    """``asks(person, n)`` → n questions of ``person``, each in a session of its own (the
    person is made a member of the space: mallory is one here)."""
    membership_add(space=space, user=mallory)

    def ask(person, n: int = 1, *, session_agent=None, session_version=None) -> list[Run]:
        runs = []
        for number in range(n):
            session = Session.objects.create(space=space, user=person, agent=session_agent or agent,
                                             version=session_version or version)
            runs.append(question_ask(session=session, content=f"{person.username} asks question {number}"))
        return runs

    return ask


def _statuses(runs: list[Run]) -> list[str]:
    return [Run.objects.get(pk=run.pk).status for run in runs]


def _waiting_events(run: Run) -> list[dict[str, Any]]:
    return [event.payload for event in RunEvent.objects.filter(run=run, type="run_waiting").order_by("seq")]


def test_a_persons_fourth_run_waits_queued_and_says_why_while_another_persons_starts(asks, mallory, bob):
    mallorys = asks(mallory, 4)
    assert [run_claim(run_id=run.pk) is not None for run in mallorys] == [True, True, True, False]
    waiting = Run.objects.get(pk=mallorys[3].pk)
    assert waiting.status == Run.Status.QUEUED and waiting.waiting_reason == Run.Waiting.USER_LIMIT
    assert _waiting_events(waiting) == [{"reason": "user_limit", "limit": 3}]
    assert run_claim(run_id=waiting.pk) is None  # delivered again: still no room, said once
    assert _waiting_events(waiting) == [{"reason": "user_limit", "limit": 3}]

    assert run_claim(run_id=asks(bob)[0].pk) is not None  # mallory's runs take none of bob's room


def test_a_waiting_run_is_woken_when_one_of_the_persons_runs_ends_and_then_runs(asks, mallory, dispatched_runs):
    mallorys = asks(mallory, 5)
    for run in mallorys:
        run_claim(run_id=run.pk)
    dispatched_runs.clear()
    first = Run.objects.select_related("session").get(pk=mallorys[0].pk)
    run_finish(run=first, status=Run.Status.COMPLETED, expected_from=(Run.Status.RUNNING,))
    # The oldest waiting run is sent to a worker, its mark cleared; the other waits on.
    assert dispatched_runs == [mallorys[3].pk]
    assert Run.objects.get(pk=mallorys[3].pk).waiting_reason == ""
    assert run_claim(run_id=mallorys[3].pk) is not None
    assert _statuses(mallorys) == ["completed", "running", "running", "running", "queued"]
    assert Run.objects.get(pk=mallorys[4].pk).waiting_reason == Run.Waiting.USER_LIMIT

    stopped = Run.objects.select_related("session").get(pk=mallorys[1].pk)  # a Stop frees a slot too
    Run.objects.filter(pk=stopped.pk).update(heartbeat_at="2000-01-01T00:00:00Z")  # no worker left to read it
    run_cancel(run=stopped)
    assert dispatched_runs[-1] == mallorys[4].pk


def test_the_reapers_schedule_wakes_a_waiting_run_whose_wake_was_missed(asks, mallory, dispatched_runs):
    mallorys = asks(mallory, 4)
    for run in mallorys:
        run_claim(run_id=run.pk)
    # A slot freed at the moment the run was being marked waiting: no end woke it.
    Run.objects.filter(pk=mallorys[0].pk).update(status=Run.Status.COMPLETED)
    dispatched_runs.clear()
    Housekeeper(name="test-worker").tick(first=True)
    assert dispatched_runs == [mallorys[3].pk]
    Housekeeper(name="test-worker").tick(first=True)
    assert dispatched_runs == [mallorys[3].pk]  # woken once: its mark is cleared with the wake
    assert run_claim(run_id=mallorys[3].pk) is not None


def test_a_waiting_run_stopped_waits_for_nothing_and_resumed_waits_again(asks, mallory):
    mallorys = asks(mallory, 4)
    for run in mallorys[:3]:
        run_claim(run_id=run.pk)
    fourth = mallorys[3]
    assert run_claim(run_id=fourth.pk) is None
    run_cancel(run=Run.objects.select_related("session").get(pk=fourth.pk))  # Stop while it waits
    stopped = Run.objects.select_related("session").get(pk=fourth.pk)
    assert (stopped.status, stopped.waiting_reason) == ("cancelled", "")
    run_resume(run=stopped)
    assert run_claim(run_id=fourth.pk) is None  # a resumed run counts, and waits, like a new one
    assert Run.objects.get(pk=fourth.pk).waiting_reason == Run.Waiting.USER_LIMIT
    assert len(_waiting_events(fourth)) == 2


def test_a_spaces_bound_holds_for_all_its_people_together(asks, settings, alice, bob, mallory, mallory_space):
    settings.AGENTLOOM_MAX_RUNNING_RUNS_PER_USER = 0
    settings.AGENTLOOM_MAX_RUNNING_RUNS_PER_SPACE = 2
    first, second = asks(alice)[0], asks(bob, 2)
    assert run_claim(run_id=first.pk) is not None and run_claim(run_id=second[0].pk) is not None
    assert run_claim(run_id=second[1].pk) is None
    assert _waiting_events(second[1]) == [{"reason": "space_limit", "limit": 2}]
    assert Run.objects.get(pk=second[1].pk).waiting_reason == Run.Waiting.SPACE_LIMIT


def test_the_api_and_the_chat_say_a_run_waits_for_the_persons_earlier_runs(asks, mallory, client):
    mallorys = asks(mallory, 4)
    for run in mallorys:
        run_claim(run_id=run.pk)
    api = APIClient()
    api.force_authenticate(mallory)
    body = api.get(f"/api/v1/runs/{mallorys[3].pk}").json()
    assert (body["status"], body["waiting_reason"]) == ("queued", "user_limit")
    assert api.get(f"/api/v1/runs/{mallorys[0].pk}").json()["waiting_reason"] == ""
    client.force_login(mallory)
    page = client.get(f"/sessions/{mallorys[3].session_id}/").content.decode()
    assert 'data-status="queued" data-waiting="user_limit"' in page


def test_the_migration_gives_every_run_that_can_still_run_its_person_and_space(make_session, alice, space):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    session = make_session(alice)
    # Runs as an earlier version made them: no person, no space.
    interrupted, completed = (Run.objects.create(session=session, version=session.version, status=status)
                              for status in (Run.Status.INTERRUPTED, Run.Status.COMPLETED))
    executor = MigrationExecutor(connection)
    executor.migrate([("agent_sessions", "0013_session_action_model_fill")])
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # every app: going back took the apps built on it back too
    assert Run.objects.filter(pk=interrupted.pk).values_list("user_id", "space_id").get() == (alice.pk, space.pk)
    assert Run.objects.filter(pk=completed.pk).values_list("user_id", "space_id").get() == (None, None)


# ------------------------------------------------------------------ PostgreSQL: racing claims


def _race(run_ids: list[int]) -> list[bool]:
    """Every run claimed at once, each by a thread of its own (its own connection: a worker)."""
    start = threading.Barrier(len(run_ids))
    claimed: dict[int, bool] = {}

    def claim(run_id: int) -> None:
        try:
            start.wait(timeout=30)
            claimed[run_id] = run_claim(run_id=run_id) is not None
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim, args=(run_id,)) for run_id in run_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return [claimed.get(run_id, False) for run_id in run_ids]


@pytest.mark.usefixtures("require_postgres")
def test_workers_racing_for_one_persons_runs_never_run_more_than_the_bound(asks, mallory):
    mallorys = asks(mallory, 8)
    assert sum(_race([run.pk for run in mallorys])) == 3
    running = list(Run.objects.filter(user=mallory, status=Run.Status.RUNNING).select_related("session"))
    waiting = list(Run.objects.filter(user=mallory, status=Run.Status.QUEUED))
    assert len(running) == 3 and len(waiting) == 5
    assert {run.waiting_reason for run in waiting} == {Run.Waiting.USER_LIMIT}
    for run in running[:2]:  # two end; the five race again for their two slots
        run_finish(run=run, status=Run.Status.COMPLETED, expected_from=(Run.Status.RUNNING,))
    assert sum(_race([run.pk for run in waiting])) == 2
    assert Run.objects.filter(user=mallory, status=Run.Status.RUNNING).count() == 3


@pytest.mark.usefixtures("require_postgres")
def test_workers_racing_for_a_spaces_runs_never_run_more_than_its_bound(asks, settings, alice, bob, mallory):
    settings.AGENTLOOM_MAX_RUNNING_RUNS_PER_SPACE = 4
    runs = [*asks(alice, 3), *asks(bob, 3), *asks(mallory, 3)]
    claimed = _race([run.pk for run in runs])
    assert sum(claimed) == 4
    by_person: dict[int, int] = {}
    for run in Run.objects.filter(status=Run.Status.RUNNING):
        by_person[run.user_id] = by_person.get(run.user_id, 0) + 1
    assert max(by_person.values()) <= 3


# ------------------------------------------------------------------ a real worker


@pytest.mark.usefixtures("require_postgres")
def test_one_persons_long_runs_do_not_keep_anothers_question_from_starting(asks, fake_agent_factory, mallory, bob,
                                                                          fake, strict):
    """Eight long runs of mallory's in eight sessions, on a worker of four threads, then a
    short question of bob's: bob's is answered while mallory's are still running; hers then
    all finish, never more than three at a time."""
    release = threading.Event()
    lock = threading.Lock()
    in_flight = {"mallory": 0, "most": 0}

    def handler(request):
        question = [m for m in request.json["messages"] if m["role"] == "user"][-1]["content"]
        if not question.startswith("mallory"):
            return chat_stream(["Bob's answer."])
        with lock:
            in_flight["mallory"] += 1
            in_flight["most"] = max(in_flight["most"], in_flight["mallory"])
        try:
            release.wait(timeout=90)  # a long run, until the test has seen what it looks for
            return chat_stream(["Mallory's long answer."])
        finally:
            with lock:
                in_flight["mallory"] -= 1

    strict.handler = handler
    agent, version = fake_agent_factory(tools=())
    dispatcher_set(dispatch_run)
    try:
        with Worker(concurrency=4):
            mallorys = asks(mallory, 8, session_agent=agent, session_version=version)
            wait_for(lambda: in_flight["mallory"] == 3, timeout=60)
            bobs = asks(bob, session_agent=agent, session_version=version)[0]
            wait_for(lambda: Run.objects.get(pk=bobs.pk).status == Run.Status.COMPLETED, timeout=60)
            assert _statuses(mallorys).count("running") == 3  # bob was answered while they ran
            assert _statuses(mallorys).count("queued") == 5
            release.set()
            wait_for(lambda: _statuses(mallorys) == ["completed"] * 8, timeout=90)
    finally:
        release.set()
    assert in_flight["most"] == 3
    assert strict.rejections == []
